"""SdaStageOperator without a server: how a job's outcome becomes the task's (exit codes, skips, the
server's address in the error). The real thing runs under the scheduler in tests/test_end_to_end.py."""

from __future__ import annotations

import json

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from sda.orchestration import operators
from tests.ports import free_port


@pytest.fixture
def fake_job(tmp_path, monkeypatch):
    """jobs/fake.py under a temporary project root, whose main() does what the test writes into it."""
    import sda.config.settings
    import sda.lake.spark

    (tmp_path / "jobs").mkdir()
    calls = []
    monkeypatch.setattr(sda.config.settings, "PROJECT_ROOT", tmp_path)
    monkeypatch.setattr(sda.lake.spark, "connect", lambda settings, url: calls.append(url) or "SESSION")
    monkeypatch.setattr(operators, "connect_url", lambda conn_id: f"sc://fake-for-{conn_id}:15002/")

    def write(body: str):
        (tmp_path / "jobs" / "fake.py").write_text("def main(argv, spark=None):\n" + body)
        return operators.SdaStageOperator(task_id="fake", job="jobs/fake.py",
                                          application_args=["--mode", "incremental"])

    return write, calls


def test_the_job_gets_the_session_and_its_figures_become_the_xcom(fake_job):
    write, calls = fake_job
    op = write("    assert spark == 'SESSION' and argv == ['--mode', 'incremental']\n    return {'records_in': 3}\n")
    assert op.execute({}) == {"records_in": 3}
    assert calls == ["sc://fake-for-spark_connect:15002/"]


@pytest.mark.parametrize("code, error, words", [
    (2, AirflowFailException, "bad arguments"),
    (3, AirflowFailException, "data-quality check failed"),
    (1, AirflowException, "exited with status 1"),
])
def test_exit_codes(fake_job, code, error, words):
    write, _ = fake_job
    with pytest.raises(error, match=words) as err:
        write(f"    raise SystemExit({code})\n").execute({})
    if error is AirflowException:
        assert not isinstance(err.value, AirflowFailException)  # retried by Airflow


def test_replay_mode_skips_tasks_made_to_skip(fake_job):
    write, calls = fake_job
    op = write("    raise AssertionError('must not run')\n")
    op.skip_in_replay, op.application_args = True, ["--mode", "replay"]
    with pytest.raises(AirflowSkipException):
        op.execute({})
    assert calls == []


def test_no_server_fails_the_task_naming_the_address(monkeypatch):
    port = free_port()  # nothing listens there
    conn = {"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": port}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT", json.dumps(conn))
    op = operators.SdaStageOperator(task_id="ingest", job="jobs/ingest.py", application_args=[])
    with pytest.raises(AirflowException, match=f"sc://127.0.0.1:{port}"):
        op.execute({})
