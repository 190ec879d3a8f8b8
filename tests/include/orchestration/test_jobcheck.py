"""sda.orchestration.jobcheck, the compose health check of the dag processor and triggerer, against a
hand-made ``job`` table (the columns Airflow's has): which rows count as alive is decided here by
hand, from the row's state, type, host and heartbeat age. tests/test_end_to_end.py checks it agrees
with ``airflow jobs check`` on a real metadata database."""

from __future__ import annotations

import datetime as dt
import sqlite3
import subprocess
import sys

import pytest

from sda.orchestration import jobcheck


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "airflow.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE job (id INTEGER PRIMARY KEY, job_type VARCHAR(30), state VARCHAR(20), "
                     "hostname VARCHAR(500), latest_heartbeat TIMESTAMP)")
    return path


def _add(path, job_type, state, host, age_s):
    beat = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=age_s)).replace(tzinfo=None)
    with sqlite3.connect(path) as conn:  # Airflow's SQLite format: naive UTC, space-separated
        conn.execute("INSERT INTO job (job_type, state, hostname, latest_heartbeat) VALUES (?, ?, ?, ?)",
                     (job_type, state, host, beat.strftime("%Y-%m-%d %H:%M:%S.%f")))


def _env(path, **extra):
    return {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{path}", **extra}


def test_a_fresh_heartbeat_on_this_host_is_alive(db):
    _add(db, "TriggererJob", "running", jobcheck.hostname(), 5)
    assert jobcheck.check("TriggererJob", _env(db)) is None


@pytest.mark.parametrize("row, why", [
    (("TriggererJob", "running", "elsewhere.example", 5), "no running TriggererJob"),
    (("TriggererJob", "success", None, 5), "no running TriggererJob"),
    (("DagProcessorJob", "running", None, 5), "no running TriggererJob"),
    (("TriggererJob", "running", None, 45), "last heartbeat 45 s ago (limit 30 s)"),
])
def test_other_hosts_ended_jobs_other_types_and_stale_heartbeats_are_not(db, row, why):
    job_type, state, host, age = row
    _add(db, job_type, state, host or jobcheck.hostname(), age)
    assert why in jobcheck.check("TriggererJob", _env(db))


def test_the_threshold_is_airflows_setting(db):
    _add(db, "DagProcessorJob", "running", jobcheck.hostname(), 45)
    assert jobcheck.check("DagProcessorJob", _env(db)) is not None
    assert jobcheck.check("DagProcessorJob", _env(db, AIRFLOW__DAG_PROCESSOR__HEALTH_CHECK_THRESHOLD="60")) is None
    with pytest.raises(SystemExit, match="not a number"):
        jobcheck.check("DagProcessorJob", _env(db, AIRFLOW__DAG_PROCESSOR__HEALTH_CHECK_THRESHOLD="soon"))


def test_command_exit_status_and_messages(db, tmp_path):
    def run(*args, env):
        return subprocess.run([sys.executable, "-m", "sda.orchestration.jobcheck", *args], env=env,
                              capture_output=True, text=True, timeout=60)

    _add(db, "TriggererJob", "running", jobcheck.hostname(), 1)
    assert run("TriggererJob", env=_env(db)).returncode == 0
    missing = run("DagProcessorJob", env=_env(db))
    assert missing.returncode == 1 and "no running DagProcessorJob" in missing.stderr
    assert run("SchedulerJob", env=_env(db)).returncode == 2  # the scheduler has its own HTTP check
    no_table = run("TriggererJob", env=_env(tmp_path / "empty.db"))
    assert no_table.returncode == 1 and "cannot read the metadata database" in no_table.stderr


def test_the_host_is_the_configured_hostname_callables(db):
    """The local stack (sda.orchestration.local_stack) records its jobs under its bind address, 127.0.0.1
    by default; the check asks for the host the same callable gives."""
    _add(db, "TriggererJob", "running", "127.0.0.1", 5)
    local = _env(db, AIRFLOW__CORE__HOSTNAME_CALLABLE="sda.orchestration.local_stack.hostname")
    assert jobcheck.hostname(local) == "127.0.0.1"
    assert jobcheck.check("TriggererJob", local) is None
    default = _env(db, AIRFLOW__CORE__HOSTNAME_CALLABLE="airflow.utils.net.getfqdn")
    assert jobcheck.hostname(default) == jobcheck.hostname({})
