"""The long-lived Spark Connect server every stage runs on (``sda server start|stop|status``).

One JVM holds Spark, Delta and the Python workers for the whole pipeline; Airflow tasks, ``sda
stage`` and the tests are thin clients of it (:func:`sda.lake.spark.connect`). It is started from the
pyspark package itself::

    spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer \\
        --master <SDA_SPARK_MASTER> --driver-memory <SDA_DRIVER_MEMORY> --conf ... (sda.lake.spark.server_conf)

bound to ``SDA_CONNECT_BIND`` (127.0.0.1 by default) on ``SDA_CONNECT_PORT``, with the venv's
Python for its Python workers. It runs in its own process group with its pid in
``var/spark-connect/server.pid`` and its log in ``var/spark-connect/server.log``. :func:`start`
returns once the server answers and has run a Delta MERGE once, so the first stage does not pay
Delta's warm-up (9-18 s on a cold JVM).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sda.config.settings import PROJECT_ROOT, Settings, SettingsError, load_settings
from sda.lake.spark import answers, server_conf

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
# `sda server run`: how often the warm-up and table creation are tried before the server is given up
PREPARE_ATTEMPTS = 5
PREPARE_PAUSE_S = 15.0


class ServerError(RuntimeError):
    """The server could not be started or stopped; the message says why and where its log is."""


def server_dir(settings: Settings) -> Path:
    """``var/spark-connect/<port>`` (beside the jar cache): pid file, log, warm-up table; one
    directory per port, so a test session's server and yours never share a pid file."""
    return settings.jars_dir.parent / "spark-connect" / str(settings.connect_port)


def pid_file(settings: Settings) -> Path:
    return server_dir(settings) / "server.pid"


def log_file(settings: Settings) -> Path:
    return server_dir(settings) / "server.log"


def spark_submit() -> str:
    """The spark-submit of this interpreter's pyspark (the venv's)."""
    candidate = Path(sys.executable).parent / "spark-submit"
    if candidate.is_file():
        return str(candidate)
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def command(settings: Settings) -> list[str]:
    """The spark-submit command line that starts the server."""
    cmd = [spark_submit(), "--class", SERVER_CLASS, "--name", "sda-spark-connect",
           "--master", settings.spark_master, "--driver-memory", settings.driver_memory]
    for key, value in sorted(server_conf(settings).items()):
        cmd += ["--conf", f"{key}={value}"]
    return cmd


def server_env(settings: Settings) -> dict[str, str]:
    """The server's environment: this Python for its workers, the pipeline's settings, loopback."""
    # a client's SPARK_REMOTE (sda.lake.spark.connect sets it) would make spark-submit start a client
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(settings.as_env())
    env["SDA_HOME"] = str(PROJECT_ROOT)
    env["PYSPARK_PYTHON"] = os.environ.get("PYSPARK_PYTHON", sys.executable)
    env["PYSPARK_DRIVER_PYTHON"] = env["PYSPARK_PYTHON"]
    if settings.connect_bind in ("127.0.0.1", "localhost"):
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # driver and block manager on loopback too
    token = settings.connect_token()
    # the server refuses every call without it (Spark's pre-shared token; not on the command line)
    if token is not None:
        env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    return env


def read_pid(settings: Settings) -> int | None:
    try:
        pid = int(pid_file(settings).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if _alive(pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (our own exited child) is not alive
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


def status(settings: Settings) -> dict[str, Any]:
    """pid (if this machine started it), whether the port answers, the URL and the log."""
    pid = read_pid(settings)
    return {"url": settings.connect_url, "pid": pid, "answers": answers(settings.connect_host, settings.connect_port),
            "master": settings.spark_master, "log": str(log_file(settings))}


def start(settings: Settings | None = None, timeout_s: float = START_TIMEOUT_S, warm: bool = True) -> dict[str, Any]:
    """Start the server unless it already answers; wait until it does (and warm Delta up)."""
    settings = settings or load_settings()
    if answers(settings.connect_host, settings.connect_port):
        return {**status(settings), "started": False}
    server_dir(settings).mkdir(parents=True, exist_ok=True)
    log = log_file(settings)
    began = time.monotonic()
    with open(log, "ab") as out:
        out.write(f"\n=== sda server start {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n".encode())
        out.flush()
        proc = subprocess.Popen(command(settings), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=server_env(settings), cwd=str(PROJECT_ROOT), start_new_session=True)
    pid_file(settings).write_text(f"{proc.pid}\n")
    problem = _wait_until_answering(settings, proc, timeout_s)
    if problem:
        if proc.poll() is None:
            stop(settings)
        raise ServerError(f"{problem}; see {log}:\n{_tail(log)}")
    ready_s = time.monotonic() - began
    if warm:
        warm_up(settings)
    return {**status(settings), "started": True, "ready_s": round(ready_s, 1),
            "warm_s": round(time.monotonic() - began - ready_s, 1)}


@contextlib.contextmanager
def running(settings: Settings | None = None, warm: bool = True):
    """A client session on the settings' server, started for the block when none answers (and then
    stopped after it): for benchmarks and scripts that need a Spark of their own."""
    from sda.lake.spark import connect

    settings = settings or load_settings()
    info = start(settings, warm=warm)
    spark = None
    try:
        spark = connect(settings)
        yield spark
    finally:
        if spark is not None:
            try:
                spark.stop()  # the session released while its server still answers
            except Exception:  # pragma: no cover - a server already gone has nothing to release
                pass
        if info.get("started"):
            stop(settings)


def _wait_until_answering(settings: Settings, proc: subprocess.Popen, timeout_s: float | None) -> str | None:
    """None once the server started as ``proc`` answers; else why not (it exited, or time ran out).
    ``timeout_s`` None waits for as long as the server lives."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not answers(settings.connect_host, settings.connect_port, timeout_s=1.0):
        if proc.poll() is not None:
            return f"the Spark Connect server exited with status {proc.returncode} during start-up"
        if deadline is not None and time.monotonic() > deadline:
            return f"the Spark Connect server did not answer at {settings.connect_url} within {timeout_s:.0f} s"
        time.sleep(0.25)
    return None


def warm_up(settings: Settings, path: Path | None = None) -> None:
    """One tiny Delta create, MERGE and change-feed read, so that the classes and code paths every
    stage uses are loaded and compiled before the first stage needs them. On a cluster ``path`` must
    be where the executors see it too (the shared lakehouse)."""
    from sda.lake.spark import connect

    spark = connect(settings)
    path = path or server_dir(settings) / "warmup"
    spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{path}` (k BIGINT, v STRING) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.range(8).selectExpr("id AS k", "CAST(id AS STRING) AS v").createOrReplaceTempView("sda_warmup_source")
    spark.sql(f"MERGE INTO delta.`{path}` t USING sda_warmup_source s ON t.k = s.k "
              "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").collect()
    spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()
    spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0).load(str(path)).count()
    spark.catalog.dropTempView("sda_warmup_source")
    spark.stop()


def ready_file(settings: Settings) -> Path:
    """Written by :func:`run_foreground` once the server answers, is warm and the tables exist."""
    return server_dir(settings) / "ready"


def run_foreground(settings: Settings, prepare: bool = True, timeout_s: float | None = None,
                   attempts: int = PREPARE_ATTEMPTS, pause_s: float = PREPARE_PAUSE_S) -> int:
    """``sda server run``: the server as this process's child, for a container's main process (its
    log is the container's). Once it answers, Delta is warmed up and the lakehouse's missing tables are
    created -- what the first task of a fresh deployment would otherwise do, on a cold cluster, before
    its own work (about a minute on the compose cluster) -- and :func:`ready_file` is written, which
    the container's health check waits for. SIGTERM and SIGINT are passed on; the exit status is the
    server's.

    By default it waits for the JVM to answer for as long as the JVM lives (on a loaded machine that
    took over three minutes): the container's health check, not this process, decides how long is too
    long. A warm-up that fails (workers not registered yet, a storage hiccup) is tried ``attempts``
    times, ``pause_s`` apart, with each failure in the log, before the server is stopped and the
    error raised."""
    ready = ready_file(settings)
    server_dir(settings).mkdir(parents=True, exist_ok=True)
    ready.unlink(missing_ok=True)
    proc = subprocess.Popen(command(settings), env=server_env(settings), cwd=str(PROJECT_ROOT))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: proc.send_signal(signum))
    if prepare:
        problem = _wait_until_answering(settings, proc, timeout_s)
        if problem:
            if proc.poll() is not None:
                return proc.returncode
            proc.kill()
            raise ServerError(problem)
        for attempt in range(1, attempts + 1):
            try:
                # on the lakehouse: a cluster's executors read and write it as the driver does
                warm_up(settings, settings.lakehouse / "_server_warmup" / str(settings.connect_port))
                _create_tables(settings)
                break
            except Exception as exc:
                if proc.poll() is not None:
                    print(f"sda server: the server exited with status {proc.returncode} during the warm-up",
                          file=sys.stderr, flush=True)
                    return proc.returncode
                if attempt == attempts:
                    proc.kill()
                    proc.wait()
                    raise
                print(f"sda server: warm-up attempt {attempt} of {attempts} failed "
                      f"({type(exc).__name__}: {str(exc)[:300]}); trying again in {pause_s:.0f} s",
                      file=sys.stderr, flush=True)
                time.sleep(pause_s)
    ready.write_text(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
    print(f"sda server: ready at {settings.connect_url}", file=sys.stderr, flush=True)
    return proc.wait()


def _create_tables(settings: Settings) -> None:
    from sda.lake.spark import connect
    from sda.lake.tables import ensure_tables

    spark = connect(settings)
    ensure_tables(spark, settings)
    spark.stop()


def is_ready(settings: Settings) -> bool:
    """The health check of ``sda server run``: the ready file is there and the port answers."""
    return ready_file(settings).is_file() and answers(settings.connect_host, settings.connect_port)


def stop(settings: Settings | None = None, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the server this machine started (its whole process group); True when one was stopped."""
    settings = settings or load_settings()
    pid = read_pid(settings)
    if pid is None:
        pid_file(settings).unlink(missing_ok=True)
        return False
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while _alive(pid) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.2)
        if not _alive(pid):
            break
    _reap(pid)
    pid_file(settings).unlink(missing_ok=True)
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sda server", description="the pipeline's Spark Connect server")
    parser.add_argument("action", choices=("start", "stop", "status", "restart", "run", "ready"),
                        help="run: in the foreground (a container's main process), warmed up and with the "
                             "lakehouse's tables created; ready: exit status 0 once such a server is ready")
    parser.add_argument("--timeout", type=float, default=None,
                        help=f"seconds to wait for the server to answer (start: {START_TIMEOUT_S:.0f}; "
                             "run: for as long as it lives)")
    parser.add_argument("--no-warm", action="store_true", help="skip the Delta warm-up after start")
    args = parser.parse_args(argv)
    if args.timeout is not None and not args.timeout > 0:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    try:
        settings = load_settings()
    except SettingsError as exc:
        parser.error(str(exc))
    if args.action == "run":
        return run_foreground(settings, prepare=not args.no_warm, timeout_s=args.timeout)
    if args.action == "ready":
        ready = is_ready(settings)
        print(f"{settings.connect_url}: {'ready' if ready else 'not ready'}")
        return 0 if ready else 1
    try:
        if args.action in ("stop", "restart"):
            stopped = stop(settings)
            print(f"stopped the Spark Connect server at {settings.connect_url}" if stopped
                  else f"no Spark Connect server of ours was running (pid file {pid_file(settings)})")
        if args.action in ("start", "restart"):
            timeout_s = START_TIMEOUT_S if args.timeout is None else args.timeout
            info = start(settings, timeout_s=timeout_s, warm=not args.no_warm)
            print(json.dumps(info, sort_keys=True))
        if args.action == "status":
            info = status(settings)
            print(json.dumps(info, sort_keys=True))
            return 0 if info["answers"] else 1
    except ServerError as exc:
        print(f"sda server {args.action}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # python -m sda.lake.server start|stop|status
    sys.exit(main())
