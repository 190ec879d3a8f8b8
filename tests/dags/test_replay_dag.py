"""The sda_replay DAG: its form (Params) and the plan task's refusals, without running Spark.

Expected messages and values are written out by hand here, not taken from the code under test."""

from __future__ import annotations

import datetime as dt

import pytest

from sda.pipeline import replay

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def dag(dagbag):
    return dagbag.dags["sda_replay"]


def test_replay_dag_loads_with_its_form(dagbag, dag):
    assert not dagbag.import_errors
    assert set(dag.params.keys()) == {"start", "end", "stages", "dry_run"}
    assert dag.params["stages"] == ["normalize", "dedup", "correlate", "fuse", "acquire", "conjunction"]
    assert dag.params["dry_run"] is False


def test_replay_dag_doc_lists_the_replayable_stages(dag):
    assert "Replayable stages, in topology order: `normalize`, `dedup`, `correlate`, `fuse`, `acquire`, " \
           "`conjunction`." in dag.doc_md


def test_replay_dag_graph(dag):
    ids = {t.task_id for t in dag.tasks}
    assert ids == {"plan", "choose", "replay_normalize", "replay_dedup", "replay_correlate", "replay_fuse",
                   "replay_acquire", "replay_conjunction"}
    assert dag.get_task("replay_dedup").upstream_task_ids == {"choose", "replay_normalize"}
    for name in ("normalize", "dedup", "correlate", "fuse", "acquire", "conjunction"):
        t = dag.get_task(f"replay_{name}")
        assert t.trigger_rule == "none_failed"
        assert t.job == f"jobs/{name}.py"
        assert "--replay" in t.application_args


def test_form_refuses_an_unknown_stage_at_trigger_time(dag):
    from airflow.sdk.definitions.param import ParamsDict

    params = ParamsDict(dag.params)
    params["start"], params["end"] = "2026-11-20T06:00:00Z", "2026-11-20T07:00:00Z"
    params.validate()  # a good request passes
    bad = ParamsDict(dag.params)
    bad["start"], bad["end"] = "2026-11-20T06:00:00Z", "2026-11-20T07:00:00Z"
    with pytest.raises(Exception, match="teleport"):
        bad["stages"] = ["normalize", "teleport"]
        bad.validate()


@pytest.mark.parametrize("start,end,stages,message", [
    ("2026-11-20T07:00:00Z", "2026-11-20T06:00:00Z", None, r"end 2026-11-20T06:00:00\+00:00 is not after start"),
    ("2026-11-20T06:00:00Z", "2026-11-20T06:00:00Z", None, "is not after start"),
    ("2026-11-01T00:00:00Z", "2026-11-09T00:00:01Z", None, "over the maximum of 168 h"),
    ("2026-11-20T06:00:00Z", "2026-11-20T07:00:00Z", ["teleport"], "unknown stage 'teleport'"),
    ("2026-11-20T06:00:00Z", "2026-11-20T07:00:00Z", ["ingest"], "stage 'ingest' cannot be replayed"),
    ("2026-11-22T06:00:00Z", "2026-11-22T07:00:00Z", None, "is in the future"),
    ("yesterday", "2026-11-20T07:00:00Z", None, "start 'yesterday' is not an ISO-8601 time"),
    ("", "2026-11-20T07:00:00Z", None, "start is required"),
])
def test_bad_requests_are_refused_with_what_is_wrong(start, end, stages, message):
    with pytest.raises(replay.ReplayError, match=message):
        replay.plan(start, end, stages, max_hours=168.0, now=NOW)


def test_a_good_request_is_put_in_topology_order():
    p = replay.plan("2026-11-20T06:00:00Z", "2026-11-20T07:00:00", ["conjunction", "normalize"], max_hours=168.0,
                    now=NOW)
    assert p.stages == ("normalize", "conjunction")
    assert p.end == dt.datetime(2026, 11, 20, 7, 0, tzinfo=UTC)  # naive = UTC
    # 15-min cadence: interval ends at 06:15, 06:30, 06:45, 07:00 are screened
    assert p.describe(15)["conjunction_screenings"] == 4
    assert replay.plan("2026-11-20T06:00:00Z", "2026-11-20T07:00:00Z", max_hours=168.0, now=NOW).stages == (
        "normalize", "dedup", "correlate", "fuse", "acquire", "conjunction")


def test_cli_refuses_a_bad_range_with_exit_2(capsys):
    from sda import cli

    assert cli.main(["replay", "--start", "2026-11-20T07:00:00Z", "--end", "2026-11-20T06:00:00Z"]) == 2
    assert "is not after start" in capsys.readouterr().err


def test_cli_dry_run_prints_the_plan_and_runs_nothing(capsys):
    from sda import cli

    assert cli.main(["replay", "--start", "2026-11-20T06:00:00Z", "--end", "2026-11-20T06:30:00Z",
                     "--stages", "dedup,normalize", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert '"normalize"' in out and "dry run: nothing was recomputed" in out
    assert out.index('"normalize"') < out.index('"dedup"')


def test_conjunction_replay_screens_at_the_interval_ends():
    t = lambda h, m: dt.datetime(2026, 11, 20, h, m, tzinfo=UTC)  # noqa: E731
    assert replay.screening_starts(t(6, 0), t(6, 20), 15) == [t(6, 15)]
    assert replay.screening_starts(t(6, 0), t(7, 0), 15) == [t(6, 15), t(6, 30), t(6, 45), t(7, 0)]
    assert replay.screening_starts(t(6, 1), t(6, 14), 15) == []
