"""The DAG parses, wires the topology's graph, and stays thin (nothing heavy at parse time)."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DAGS = PROJECT_ROOT / "dags"
HEAVY = ("pyspark", "pandas", "numpy", "sgp4", "delta", "great_expectations", "pyarrow")
EXPECTED_EDGES = {
    ("ingest", "normalize"),
    ("normalize", "dedup"),
    ("dedup", "correlate"),
    ("catalog", "correlate"),
    ("correlate", "fuse"),
    ("fuse", "acquire"),
    ("acquire", "conjunction"),
    # the quality gates: bronze+silver before anything reaches gold, gold at the end
    ("dedup", "quality_silver"),
    ("quality_silver", "correlate"),
    ("conjunction", "quality_gold"),
}
GATES = {"quality_silver": "bronze,silver", "quality_gold": "gold"}


@pytest.fixture(scope="module")
def dag(dagbag):
    return dagbag.dags["sda_pipeline"]


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert "sda_pipeline" in dagbag.dags


def test_documented_and_tagged(dag):
    assert dag.doc_md and "data interval" in dag.doc_md
    assert {"sda", "spark"} <= set(dag.tags)
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    assert dag.start_date.year >= 2020  # fixed, not now()


def test_doc_md_lists_every_stage_and_gate(dag):
    """What the Airflow UI shows names each task and its job: the list is generated from the topology."""
    from sda.pipeline.topology import GATES as TOPOLOGY_GATES
    from sda.pipeline.topology import STAGES

    tasks = dag.doc_md.split("#### Tasks", 1)[1]
    for stage in STAGES:
        assert f"* `{stage.name}` (`{stage.job}`)" in tasks, stage.name
    for gate in TOPOLOGY_GATES:
        assert f"* `{gate.name}` (`{gate.job} --layer {','.join(gate.layers)}`" in tasks, gate.name


def test_every_stage_retries_and_gates_do_not(dag):
    for task in dag.tasks:
        if task.task_id in GATES:
            assert task.retries == 0, task.task_id  # a failed check fails again on the same rows
            continue
        assert task.retries >= 2, task.task_id
        assert task.retry_delay > dt.timedelta(0), task.task_id


def test_task_graph(dag):
    from sda.pipeline.topology import STAGES, edges

    assert {t.task_id for t in dag.tasks} == {s.name for s in STAGES} | set(GATES)
    actual = {(up, t.task_id) for t in dag.tasks for up in t.upstream_task_ids}
    assert actual == EXPECTED_EDGES == set(edges())


def test_stage_tasks_are_spark_connect_clients(dag):
    from sda.orchestration.operators import QualityGateOperator, SdaStageOperator

    for task in dag.tasks:
        assert isinstance(task, SdaStageOperator)
        assert isinstance(task, QualityGateOperator) == (task.task_id in GATES), task.task_id
        assert task.conn_id == "spark_connect"
        job = "quality" if task.task_id in GATES else task.task_id
        assert task.job == f"jobs/{job}.py" and (PROJECT_ROOT / task.job).is_file()
        args = task.application_args
        if task.task_id in GATES:
            assert args[args.index("--layer") + 1] == GATES[task.task_id]
        assert task.trigger_rule == "none_failed"  # a skip in a backfill does not cascade
        for flag in ("--start", "--end", "--run-id"):
            assert flag in args, (task.task_id, flag)
        assert "data_interval_start" in args[args.index("--start") + 1]
        assert "data_interval_end" in args[args.index("--end") + 1]
        assert args[args.index("--run-id") + 1] == "{{ run_id }}"
    catalog = dag.get_task("catalog")
    assert "--file" in catalog.application_args


def test_landed_files_trigger_runs_and_the_cadence_stays(dag):
    from airflow.sdk import AssetOrTimeSchedule

    from sda.orchestration.landing_watch import LandingTrigger

    assert isinstance(dag.timetable, AssetOrTimeSchedule)
    (watcher,) = dag.timetable.asset_condition.watchers
    assert isinstance(watcher.trigger, LandingTrigger)
    assert dag.max_active_runs == 1  # Airflow then defers asset-triggered runs: never a pile


def _render(dag, text, context):
    return dag.get_template_env().from_string(text).render(**context)


def test_interval_templates_render(dag):
    """Scheduled runs pass their data interval; a manual run without a logical date (Airflow 3 has
    no data interval then) falls back to the cadence ending at run_after."""
    from airflow.sdk.execution_time import macros

    task = dag.get_task("ingest")
    args = task.application_args
    start_t, end_t = args[args.index("--start") + 1], args[args.index("--end") + 1]
    start = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
    end = dt.datetime(2026, 11, 21, 6, 15, tzinfo=dt.timezone.utc)
    run = types.SimpleNamespace(run_after=end, run_type="scheduled")
    scheduled = {"data_interval_start": start, "data_interval_end": end, "dag_run": run, "macros": macros}
    assert _render(dag, start_t, scheduled) == start.isoformat()
    assert _render(dag, end_t, scheduled) == end.isoformat()
    manual = {"dag_run": types.SimpleNamespace(run_after=end, run_type="manual"), "macros": macros}
    rendered_start = dt.datetime.fromisoformat(_render(dag, start_t, manual))
    rendered_end = dt.datetime.fromisoformat(_render(dag, end_t, manual))
    assert rendered_end == end and rendered_start < rendered_end
    # started by landed files: the asset events' span (here zero-length) is not the run's interval
    landed = {"data_interval_start": end, "data_interval_end": end, "macros": macros,
              "dag_run": types.SimpleNamespace(run_after=end, run_type="asset_triggered")}
    assert _render(dag, end_t, landed) == end.isoformat()
    assert _render(dag, start_t, landed) == (end - dt.timedelta(minutes=15)).isoformat()


def test_scheduled_runs_have_a_real_interval(dag):
    from airflow.serialization.encoders import coerce_to_core_timetable

    run_after = dt.datetime(2026, 11, 21, 6, 15, tzinfo=dt.timezone.utc)
    interval = coerce_to_core_timetable(dag.timetable).infer_manual_data_interval(run_after=run_after)
    assert interval.end - interval.start == dt.timedelta(minutes=15)


def test_parse_time_imports_nothing_heavy(tmp_path):
    """Importing the DAG file must not pull Spark, pandas, numpy or sgp4 into the scheduler."""
    code = (
        "import json, sys, runpy\n"
        f"runpy.run_path({str(DAGS / 'sda_pipeline.py')!r})\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))\n"
    )
    env = dict(os.environ, AIRFLOW_HOME=str(tmp_path), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_topology_names_registered_tables():
    """include/sda/pipeline/topology.py spells table names as strings (no pyspark at parse time): every one
    must be in the registry, and every registered table must be produced by a stage, except the
    bookkeeping every stage writes through sda.pipeline.runtime (the change-feed cursor, the run metrics) and
    the data-quality results of the quality gates (jobs/quality.py, topology.GATES)."""
    from sda.lake.tables import TABLES
    from sda.pipeline.topology import EXTERNAL, OPERATOR_KINDS, STAGES, tables

    assert set(tables()) <= set(TABLES)
    produced = {name for stage in STAGES for name in stage.outputs if name not in EXTERNAL}
    assert set(TABLES) - produced == {"progress", "run_metrics", "data_quality"}
    for stage in STAGES:
        assert set(stage.operators) <= set(OPERATOR_KINDS), stage.name
        assert (PROJECT_ROOT / stage.job).parent.is_dir()
        for up in stage.upstream:
            assert STAGES.index(next(s for s in STAGES if s.name == up)) < STAGES.index(stage), (up, stage.name)


def test_topology_derives_the_stage_lists():
    """The lists the CLI, the replay and the benchmarks take from the topology (expected values written out)."""
    from sda.pipeline import topology

    assert topology.stage_names() == ("catalog", "ingest", "normalize", "dedup", "correlate", "fuse", "acquire",
                                      "conjunction")
    assert topology.stages_upto("correlate") == ("catalog", "ingest", "normalize", "dedup", "correlate")
    assert topology.stages_upto("ingest") == ("ingest",)
    assert topology.stages_from("fuse") == ("fuse", "acquire", "conjunction")
    assert topology.stages_between("normalize", "correlate") == ("normalize", "dedup", "correlate")
    assert topology.stages_between("catalog", "fuse") == ("catalog", "correlate", "fuse")
    assert topology.source_stages() == ("catalog", "ingest")
    with pytest.raises(KeyError, match="unknown stage 'teleport'"):
        topology.stages_upto("teleport")


@pytest.mark.parametrize("run_type,mode",
                         [("backfill", "replay"), ("scheduled", "incremental"), ("manual", "incremental")])
def test_backfill_runs_recompute_from_bronze(dag, run_type, mode):
    """A backfill's tasks get --mode replay (recompute the interval, commit no progress, send no
    alerts); scheduled and manual runs consume what is new."""
    import types

    import jinja2
    from airflow.utils.types import DagRunType

    for task in dag.tasks:
        args = task.application_args
        template = args[args.index("--mode") + 1]
        rendered = jinja2.Template(template).render(dag_run=types.SimpleNamespace(run_type=DagRunType(run_type)))
        assert rendered == mode, task.task_id


def test_replay_mode_skips_what_has_nothing_to_do(dag):
    """In a backfill (--mode replay) catalog, ingest and the gates skip; the recomputing stages run."""
    from airflow.sdk.exceptions import AirflowSkipException

    skipping = {t.task_id for t in dag.tasks if t.skip_in_replay}
    assert skipping == {"catalog", "ingest", "quality_silver", "quality_gold"}
    task = dag.get_task("ingest")
    original = task.application_args
    try:
        task.application_args = ["--start", "a", "--end", "b", "--run-id", "r", "--mode", "replay"]
        with pytest.raises(AirflowSkipException, match="nothing to do in a replay"):
            task.execute({})
    finally:
        task.application_args = original


def test_gates_link_to_the_run_report(dag, monkeypatch):
    from airflow.models.taskinstancekey import TaskInstanceKey

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://airflow.example:8080/")
    for gate in GATES:
        links = dag.get_task(gate).operator_extra_links
        assert [link.name for link in links] == ["Run report"]
        key = TaskInstanceKey("sda_pipeline", gate, "scheduled__2026-11-21T06:15:00+00:00", 1)
        assert links[0].get_link(dag.get_task(gate), ti_key=key) == (
            "http://airflow.example:8080/sda-reports/runs/scheduled__2026-11-21T06%3A15%3A00%2B00%3A00/index.html")
    assert not dag.get_task("correlate").operator_extra_links
