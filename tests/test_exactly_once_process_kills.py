"""Exactly-once through real kills: a job process killed with exit status 137 (``SDA_KILL_AT``, no
Python clean-up at all) and the Spark Connect server's JVM killed mid-stage, each inside normalize and
then retried; the tables equal those of the shared uninterrupted run (:mod:`tests.exactly_once_support`)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sda.config.settings import load_settings
from sda.pipeline import faults
from tests import chain
from tests.exactly_once_support import (
    PROJECT_ROOT,
    SCREEN,
    lakehouse,
    load_catalog,
    reference_through_normalize,
    through_normalize,
)

# the fixtures scenario, staging and reference: tests/exactly_once_support.py, a plugin of tests/conftest.py
pytestmark = pytest.mark.slow

def test_process_killed_mid_write_then_retried(spark, staging, reference, tmp_path):
    """kill -9 semantics: the job process dies between its silver and quarantine writes."""
    root, files = staging
    settings = lakehouse(tmp_path, "killed", root / "catalog.tle")
    load_catalog(spark, settings)
    chain.land(files, root / "landing", settings.landing)
    chain.run_stage(spark, settings, "ingest", "run-1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SDA_")}
    env.update(settings.as_env(), SDA_KILL_AT="normalize:after-silver", PYTHONPATH=str(PROJECT_ROOT))
    argv = ["--start", chain.iso(chain.START), "--end", chain.iso(chain.FAR_END), "--run-id", "run-1"]
    code = "import sys; from jobs import normalize; normalize.main(sys.argv[1:])"
    proc = subprocess.run([sys.executable, "-c", code, *argv], env=env, cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 137, proc.stderr[-3000:]
    assert "killing the process at normalize:after-silver" in proc.stderr
    for stage in ("normalize", "dedup", "correlate", "fuse"):  # the Airflow retry, then the rest of the run
        chain.run_stage(spark, settings, stage, "run-1")
    chain.run_stage(spark, settings, "conjunction", "run-1", SCREEN)
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) == []


def test_server_killed_mid_stage_then_restarted_and_retried(spark, staging, reference, tmp_path, monkeypatch):
    """kill -9 of the Spark Connect server's JVM in the middle of a stage (between normalize's silver
    and quarantine writes): the stage fails at once with an error naming the server's address, the
    server is started again, the Airflow retry converges, and the tables equal an uninterrupted run's.
    A server of its own, so the suite's shared one stays up; it runs only the killed stage and its
    retry: the catalogue, ingest and the rest of the run go on on the shared one (a lakehouse is a
    directory: any server can carry on), where they run warm."""
    import signal
    import time

    from sda.lake import server
    from sda.lake.spark import SparkServerUnavailable, activate, connect
    from tests.ports import free_port

    root, files = staging
    settings = lakehouse(tmp_path, "server-killed", root / "catalog.tle")
    own = load_settings(env={}, lakehouse=settings.lakehouse, landing=settings.landing, outbox=settings.outbox,
                        catalog_file=settings.catalog_file, shuffle_partitions=2,
                        connect_port=free_port())
    monkeypatch.setenv("SPARK_REMOTE", os.environ.get("SPARK_REMOTE", ""))  # connect() sets it: restored at teardown
    load_catalog(spark, settings)
    chain.land(files, root / "landing", settings.landing)
    chain.run_stage(spark, settings, "ingest", "run-1")
    server.start(own, warm=False)
    try:
        own_spark = connect(own)
        pid = server.read_pid(own)
        real_checkpoint = faults.checkpoint
        killed_at = []

        def kill_server_at(name):
            if name == "normalize:after-silver":
                killed_at.append(time.monotonic())
                os.kill(pid, signal.SIGKILL)  # the JVM itself, as kill -9 would
            real_checkpoint(name)

        monkeypatch.setattr(faults, "checkpoint", kill_server_at)
        with pytest.raises(SparkServerUnavailable) as failure:
            chain.run_stage(own_spark, own, "normalize", "run-1")
        assert own.connect_url in str(failure.value) and "normalize" in str(failure.value)
        # no hang: from the kill, the client gives up within its retries (seconds), however long the
        # cold server took to get to the kill point
        assert killed_at, "normalize never reached the kill point"
        print(f"server killed -> SparkServerUnavailable in {time.monotonic() - killed_at[0]:.1f} s")
        assert time.monotonic() - killed_at[0] < 120
        monkeypatch.setattr(faults, "checkpoint", real_checkpoint)
        # a client whose server is not running gets the same clear error, before any work
        with pytest.raises(SparkServerUnavailable, match=own.connect_url.replace(".", r"\.")):
            connect(own)
        server.start(own, warm=False)
        own_spark = connect(own)
        chain.run_stage(own_spark, own, "normalize", "run-1")  # the Airflow retry
        assert chain.differences(through_normalize(own_spark, own), reference_through_normalize(reference)) == []
    finally:
        server.stop(own)
        activate(spark)  # connect() made its session the default: the shared one again
    for stage in ("dedup", "correlate", "fuse"):  # the rest of the run
        chain.run_stage(spark, settings, stage, "run-1")
    chain.run_stage(spark, settings, "conjunction", "run-1", SCREEN)
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) == []
