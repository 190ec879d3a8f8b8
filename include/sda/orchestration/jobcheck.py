"""A cheap container health check for Airflow's dag processor and triggerer.

``airflow jobs check`` answers the question, but it imports all of Airflow: on a busy 2-core machine
one check takes 10-40 s of CPU, and Docker runs one per service every interval. This asks the
metadata database the same question with SQLAlchemy alone (a fraction of a second): is there a
``running`` job of this type on this host whose latest heartbeat is younger than Airflow's health
threshold for it? Exit status 0 if so, 1 (with the reason) if not::

    python -m sda.orchestration.jobcheck DagProcessorJob
    python -m sda.orchestration.jobcheck TriggererJob

The database comes from ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``; the thresholds from the same
variables Airflow reads (``AIRFLOW__DAG_PROCESSOR__HEALTH_CHECK_THRESHOLD``,
``AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD``; 30 s by default, as in Airflow); the host
name is the configured ``hostname_callable`` (``AIRFLOW__CORE__HOSTNAME_CALLABLE``), or Airflow's default
(``airflow.utils.net.getfqdn``), reproduced below.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import sys

# job type -> (environment variable, Airflow's default threshold in seconds)
THRESHOLDS = {
    "DagProcessorJob": ("AIRFLOW__DAG_PROCESSOR__HEALTH_CHECK_THRESHOLD", 30.0),
    "TriggererJob": ("AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD", 30.0),
}


DEFAULT_HOSTNAME_CALLABLES = ("", "airflow.utils.net.getfqdn", "airflow.utils.net:getfqdn")


def hostname(environ: dict[str, str] | None = None) -> str:
    """What Airflow records as a job's host: the ``AIRFLOW__CORE__HOSTNAME_CALLABLE`` when one is set (the
    local stack's, :func:`sda.orchestration.local_stack.hostname`), else ``airflow.utils.net.getfqdn()``."""
    configured = (os.environ if environ is None else environ).get("AIRFLOW__CORE__HOSTNAME_CALLABLE", "")
    if configured not in DEFAULT_HOSTNAME_CALLABLES:
        import importlib

        module, _, attr = configured.replace(":", ".").rpartition(".")
        return importlib.import_module(module).__dict__[attr]()
    name = socket.gethostname()
    try:
        addrs = socket.getaddrinfo(name, None, 0, socket.SOCK_DGRAM, 0, socket.AI_CANONNAME)
    except OSError:
        return name
    return next((a[3] for a in addrs if a[3]), name)


def threshold_s(job_type: str, environ: dict[str, str]) -> float:
    var, default = THRESHOLDS[job_type]
    raw = environ.get(var, "")
    try:
        return float(raw) if raw else default
    except ValueError:
        raise SystemExit(f"{var}={raw!r} is not a number of seconds") from None


def check(job_type: str, environ: dict[str, str] | None = None) -> str | None:
    """None when a live job of ``job_type`` runs on this host, else why not."""
    import sqlalchemy as sa

    environ = dict(os.environ if environ is None else environ)
    url = environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")
    if not url:
        raise SystemExit("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN is not set")
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    query = sa.text("SELECT latest_heartbeat FROM job WHERE state = 'running' AND job_type = :t "
                    "AND hostname = :h ORDER BY latest_heartbeat DESC LIMIT 1")
    try:
        with engine.connect() as conn:
            beat = conn.execute(query, {"t": job_type, "h": hostname(environ)}).scalar()
    except sa.exc.SQLAlchemyError as exc:
        return f"cannot read the metadata database's job table: {str(exc.orig or exc).splitlines()[0]}"
    finally:
        engine.dispose()
    if beat is None:
        return f"no running {job_type} on {hostname(environ)}"
    if isinstance(beat, str):  # SQLite hands a text query its timestamps as text
        beat = dt.datetime.fromisoformat(beat)
    if beat.tzinfo is None:  # and stores them as naive UTC
        beat = beat.replace(tzinfo=dt.timezone.utc)
    age = (dt.datetime.now(dt.timezone.utc) - beat).total_seconds()
    limit = threshold_s(job_type, environ)
    if age < limit:
        return None
    return f"{job_type} on {hostname(environ)}: last heartbeat {age:.0f} s ago (limit {limit:.0f} s)"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in THRESHOLDS:
        print(f"usage: python -m sda.orchestration.jobcheck {{{','.join(THRESHOLDS)}}}", file=sys.stderr)
        return 2
    problem = check(args[0])
    if problem:
        print(problem, file=sys.stderr)
        return 1
    print(f"{args[0]} alive on {hostname()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
