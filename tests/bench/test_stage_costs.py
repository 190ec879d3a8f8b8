"""bench/stage_costs.py's counting: round trips counted per kind and the client put back as it was, commits counted
from the Delta log files, totals summed, arguments refused with a message (hand-made cases; no Spark)."""

from __future__ import annotations

import os
import time

import pytest
import stage_costs


class FakeClient:
    """Stands in for the Spark Connect client: the three calls the benchmark counts."""

    def _execute_and_fetch_as_iterator(self, plan):
        yield from (plan, plan)

    def _analyze(self, method):
        return method

    def config(self, operation):
        return operation


def test_round_trips_are_counted_per_kind_and_the_client_is_put_back():
    before = {m: FakeClient.__dict__[m] for m in stage_costs.ROUND_TRIPS}
    client = FakeClient()
    with stage_costs.RoundTrips(FakeClient) as trips:
        assert client._execute_and_fetch_as_iterator("p") == ["p", "p"]  # consumed inside the timed call
        client._execute_and_fetch_as_iterator("q")
        assert client._analyze("schema") == "schema"
        counted = trips.take()
        assert {k: v[0] for k, v in counted.items()} == {"plans": 2, "analyze": 1}
        client.config("get")
        assert {k: v[0] for k, v in trips.take().items()} == {"config": 1}  # take() starts afresh
    assert {m: FakeClient.__dict__[m] for m in stage_costs.ROUND_TRIPS} == before


def test_commits_are_the_delta_log_files(tmp_path):
    for table, versions in (("silver/observations", 3), ("ops/progress", 2)):
        log = tmp_path / table / "_delta_log"
        log.mkdir(parents=True)
        for v in range(versions):
            (log / f"{v:020d}.json").write_text("{}")
        (log / "00000000000000000000.checkpoint.parquet").write_bytes(b"")  # not a commit
    assert stage_costs.commits(tmp_path) == 5


@pytest.mark.parametrize("argv, message", [(["--objects", "1"], "--objects"), (["--files", "0"], "--files"),
                                           (["--conf", "spark.sql.x"], "--conf"), (["--conf", "sql.x=1"], "--conf")])
def test_bad_arguments_are_refused_saying_which(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        stage_costs.parse_args(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_each_round_trip_is_charged_to_the_project_line_that_made_it(tmp_path, monkeypatch):
    """Calls made from a file under the project's code are named by that file, line and function; others are '?'."""
    code = tmp_path / "jobs" / "stagey.py"
    code.parent.mkdir()
    code.write_text("def body(client):\n    client._analyze('schema')\n    client._analyze('schema')\n")
    monkeypatch.setattr(stage_costs, "_PROJECT", (str(tmp_path / "jobs"),))
    monkeypatch.setattr(stage_costs, "_ROOT", tmp_path)
    namespace: dict = {}
    exec(compile(code.read_text(), str(code), "exec"), namespace)
    client = FakeClient()
    with stage_costs.RoundTrips(FakeClient) as trips:
        namespace["body"](client)
        client.config("get")
        sites = {(kind, line): n for kind, line, n, _ in trips.take_sites()}
        assert sites == {("analyze", "jobs/stagey.py:2 body"): 1, ("analyze", "jobs/stagey.py:3 body"): 1,
                         ("config", "?"): 1}
        assert trips.take_sites() == []  # taken afresh


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="server CPU is read from /proc")
def test_server_cpu_is_the_cpu_of_the_servers_process_group(monkeypatch):
    """With this test's own process group standing for the server's, the figure grows by at least the CPU this
    process burns (its own clock, time.process_time, is the independent measure), and is 0 with no server."""
    from sda.lake import server

    monkeypatch.setattr(server, "read_pid", lambda settings: os.getpgid(0))
    before, cpu0 = stage_costs.server_cpu_s(None), time.process_time()
    while time.process_time() - cpu0 < 0.3:
        sum(i * i for i in range(10_000))
    burned = time.process_time() - cpu0
    assert stage_costs.server_cpu_s(None) - before >= burned - 0.02  # clock ticks are 10 ms
    monkeypatch.setattr(server, "read_pid", lambda settings: None)
    assert stage_costs.server_cpu_s(None) == 0.0
