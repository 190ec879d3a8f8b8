"""The Spark Connect server's command line and settings (sda.lake.server, sda.lake.spark), and the client's
clear error when nothing answers. Starting and killing a real server is in tests/test_exactly_once_process_kills.py
(and every Spark test runs on the suite's shared server, tests/conftest.py)."""

from __future__ import annotations

import pytest

from sda.config.settings import SettingsError, load_settings
from sda.lake import server
from sda.lake.spark import SparkServerUnavailable, activate, connect, is_server_gone, parse_url
from tests.ports import free_port as _closed_port  # nothing listens there


def test_server_command_has_delta_loopback_and_the_session_settings(tmp_path):
    settings = load_settings(env={}, jars_dir=tmp_path / "jars", connect_port=15077, shuffle_partitions=3,
                             driver_memory="1536m", spark_master="local[2]")
    cmd = server.command(settings)
    assert cmd[cmd.index("--class") + 1] == "org.apache.spark.sql.connect.service.SparkConnectServer"
    assert cmd[cmd.index("--master") + 1] == "local[2]" and cmd[cmd.index("--driver-memory") + 1] == "1536m"
    conf = dict(c.split("=", 1) for c in cmd[1:] if "=" in c and c.startswith("spark."))
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert conf["spark.connect.grpc.binding.port"] == "15077"
    assert conf["spark.sql.shuffle.partitions"] == "3" and conf["spark.databricks.delta.snapshotPartitions"] == "3"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    env = server.server_env(settings)
    assert env["PYSPARK_PYTHON"] and env["SDA_CONNECT_PORT"] == "15077" and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert "SPARK_REMOTE" not in env
    assert server.server_dir(settings) == tmp_path / "spark-connect" / "15077"


@pytest.mark.parametrize("name, value, words", [
    ("SDA_CONNECT_PORT", "0", "above 0"),
    ("SDA_CONNECT_PORT", "70000", "1 to 65535"),
    ("SDA_CONNECT_PORT", "http", "whole number"),
    ("SDA_CONNECT_HOST", "sc://x", "host name"),
    ("SDA_CONNECT_BIND", "1.2.3.4; rm", "host name"),
    ("SDA_DRIVER_MEMORY", "lots", "memory size"),
    ("SDA_SPARK_MASTER", "local[two]", "master URL"),
])
def test_bad_server_settings_are_refused_with_their_name(name, value, words):
    with pytest.raises(SettingsError, match=words) as err:
        load_settings(env={name: value})
    assert name in str(err.value)


def test_a_client_without_a_server_gets_an_error_naming_the_address():
    settings = load_settings(env={}, connect_port=_closed_port())
    with pytest.raises(SparkServerUnavailable) as err:
        connect(settings)
    assert settings.connect_url in str(err.value) and "sda server start" in str(err.value)


def test_status_and_stop_without_a_server(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SDA_JARS_DIR", str(tmp_path / "jars"))
    monkeypatch.setenv("SDA_CONNECT_PORT", str(_closed_port()))
    assert server.main(["status"]) == 1
    assert '"answers": false' in capsys.readouterr().out
    assert server.main(["stop"]) == 0
    assert "no Spark Connect server of ours" in capsys.readouterr().out


def test_server_gone_is_recognised_through_the_cause_chain():
    try:
        try:
            raise ConnectionError("<_MultiThreadedRendezvous status = StatusCode.UNAVAILABLE "
                                  "details = failed to connect>")
        except ConnectionError as inner:
            raise RuntimeError("[RETRIES_EXCEEDED] The maximum number of retries has been exceeded.") from inner
    except RuntimeError as exc:
        assert is_server_gone(exc)
    assert not is_server_gone(ValueError("[DELTA_CONCURRENT_APPEND] ..."))


def test_connect_urls():
    assert parse_url("sc://127.0.0.1:15002/;use_ssl=false") == ("127.0.0.1", 15002)
    assert parse_url("sc://spark-connect") == ("spark-connect", 15002)
    with pytest.raises(SparkServerUnavailable, match="not a Spark Connect URL"):
        parse_url("spark://master:7077")


def test_the_newest_session_is_the_active_one(spark, connect_server):
    """Results the server hands back as DataFrames (localCheckpoint's) belong to the *active*
    session: a second session must become active, or they go to one that never cached them."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    first = connect(connect_server)
    second = connect(connect_server)
    try:
        assert ConnectSession.active() is second
        assert second.range(3).localCheckpoint().count() == 3
    finally:
        first.stop()
        second.stop()
        activate(spark)  # the suite's session, for the tests after this one


def test_a_dropped_session_leaves_the_shared_release_pool_alone(spark, connect_server):
    """A session garbage-collected in some thread must not shut down the release thread pool the
    process's other sessions share (pyspark's own ``__del__`` did, and could deadlock the process)."""
    import gc

    from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator as Iter

    from sda.lake.spark import activate, connect

    assert spark.range(3).count() == 3  # the shared session has used the pool
    pool = Iter._get_or_create_release_thread_pool()
    other = connect(connect_server)
    assert other.range(2).count() == 2
    del other
    gc.collect()
    activate(spark)
    assert Iter._release_thread_pool_instance is pool and not pool._shutdown
    assert spark.range(4).count() == 4


# `sda server run` with a stand-in for the JVM: a process that starts listening after `delay` seconds
# and exits 0 once the ready file is written (or 3 if it never is)
_FAKE_SERVER = """
import pathlib, socket, sys, time
delay, port, ready = float(sys.argv[1]), int(sys.argv[2]), pathlib.Path(sys.argv[3])
time.sleep(delay)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen()
deadline = time.time() + 60
while not ready.exists() and time.time() < deadline:
    time.sleep(0.05)
sys.exit(0 if ready.exists() else 3)
"""


@pytest.fixture
def fake_run(tmp_path, monkeypatch):
    """run_foreground's settings with the JVM replaced by _FAKE_SERVER; signal handlers restored after."""
    import os
    import signal
    import sys

    settings = load_settings(env={}, jars_dir=tmp_path / "jars", connect_port=_closed_port())
    calls = {"warm": 0, "tables": 0, "delay": 0.0, "fail_warm": 0}

    def command(_settings):
        return [sys.executable, "-c", _FAKE_SERVER, str(calls["delay"]), str(settings.connect_port),
                str(server.ready_file(settings))]

    def warm_up(_settings, _path=None):
        calls["warm"] += 1
        if calls["warm"] <= calls["fail_warm"]:
            raise RuntimeError("no executor registered yet")

    def create_tables(_settings):
        calls["tables"] += 1

    monkeypatch.setattr(server, "command", command)
    monkeypatch.setattr(server, "server_env", lambda _settings: dict(os.environ))
    monkeypatch.setattr(server, "warm_up", warm_up)
    monkeypatch.setattr(server, "_create_tables", create_tables)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield settings, calls
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def test_run_waits_past_the_start_timeout_and_retries_a_failing_warm_up(fake_run, monkeypatch):
    settings, calls = fake_run
    calls.update(delay=2.0, fail_warm=2)
    monkeypatch.setattr(server, "START_TIMEOUT_S", 0.5)
    # no deadline by default: a server slower to answer than `start`'s would be is still waited for
    assert server.run_foreground(settings, attempts=3, pause_s=0.1) == 0
    assert (calls["warm"], calls["tables"]) == (3, 1)
    assert server.ready_file(settings).is_file()


def test_run_gives_up_after_its_warm_up_attempts_and_leaves_no_ready_file(fake_run, capsys):
    settings, calls = fake_run
    calls.update(fail_warm=99)
    with pytest.raises(RuntimeError, match="no executor registered yet"):
        server.run_foreground(settings, attempts=3, pause_s=0.1)
    assert (calls["warm"], calls["tables"]) == (3, 0)
    assert not server.ready_file(settings).exists()
    assert not server.answers(settings.connect_host, settings.connect_port)  # the server was stopped
    err = capsys.readouterr().err
    assert "warm-up attempt 1 of 3 failed (RuntimeError: no executor registered yet)" in err
    assert "attempt 2 of 3" in err and "attempt 3 of 3" not in err


def test_run_with_a_timeout_stops_a_server_that_does_not_answer(fake_run):
    settings, calls = fake_run
    calls.update(delay=30.0)
    with pytest.raises(server.ServerError, match=r"did not answer .* within 1 s"):
        server.run_foreground(settings, timeout_s=1.0)
    assert calls["warm"] == 0 and not server.ready_file(settings).exists()


def test_a_bad_timeout_is_refused(capsys):
    with pytest.raises(SystemExit):
        server.main(["run", "--timeout", "-5"])
    assert "--timeout must be a positive number of seconds, got -5" in capsys.readouterr().err
