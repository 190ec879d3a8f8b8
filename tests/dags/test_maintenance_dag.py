"""The maintenance DAG parses, runs jobs/maintenance.py daily the way sda_pipeline submits its jobs,
and stays thin (nothing heavy at parse time)."""

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


@pytest.fixture(scope="module")
def dag(dagbag):
    return dagbag.dags["sda_maintenance"]


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert {"sda_maintenance", "sda_pipeline"} <= set(dagbag.dags)


def test_schedule_and_defaults(dag):
    from airflow.sdk.definitions.timetables.trigger import CronTriggerTimetable

    assert dag.schedule == "@daily"
    assert isinstance(dag.timetable, CronTriggerTimetable)
    assert dag.start_date == dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    assert set(dag.tags) == {"sda", "maintenance", "delta"}
    for words in ("VACUUM", "change-feed consumers", "retention_widened", "replay", "ops.progress"):
        assert words.lower() in dag.doc_md.lower(), words


def test_one_stage_task(dag):
    from sda.orchestration.operators import SdaStageOperator

    assert [t.task_id for t in dag.tasks] == ["maintenance"]
    task = dag.get_task("maintenance")
    assert isinstance(task, SdaStageOperator)
    assert task.retries == 2 and task.retry_delay > dt.timedelta(0)
    assert task.execution_timeout is not None
    assert task.conn_id == "spark_connect"
    assert task.job == "jobs/maintenance.py"
    args = task.application_args
    assert args[args.index("--run-id") + 1] == "{{ run_id }}"
    assert "--dry-run" not in args and "--tables" not in args  # the scheduled run maintains every table


def test_run_like_the_pipeline(dagbag, dag):
    """Same connection and package shipping as sda_pipeline's tasks."""
    ours, theirs = dag.get_task("maintenance"), dagbag.dags["sda_pipeline"].get_task("ingest")
    for attr in ("conn_id", "dist_dir"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr


def _render(dag, text, context):
    return dag.get_template_env().from_string(text).render(**context)


def test_interval_templates_render(dag):
    """"@daily" is a cron trigger in Airflow 3 (start == end): the job gets the day ending at the
    trigger, and a manual run without a logical date the day ending at run_after."""
    from airflow.sdk.execution_time import macros

    args = dag.get_task("maintenance").application_args
    start_t, end_t = args[args.index("--start") + 1], args[args.index("--end") + 1]
    trigger = dt.datetime(2026, 11, 21, 0, 0, tzinfo=dt.timezone.utc)
    run = types.SimpleNamespace(run_after=trigger + dt.timedelta(minutes=3))
    scheduled = {"data_interval_start": trigger, "data_interval_end": trigger, "dag_run": run, "macros": macros}
    assert _render(dag, start_t, scheduled) == (trigger - dt.timedelta(days=1)).isoformat()
    assert _render(dag, end_t, scheduled) == trigger.isoformat()
    manual = {"data_interval_start": None, "data_interval_end": None, "dag_run": run, "macros": macros}
    assert _render(dag, end_t, manual) == run.run_after.isoformat()
    assert _render(dag, start_t, manual) == (run.run_after - dt.timedelta(days=1)).isoformat()


def test_parse_time_imports_nothing_heavy(tmp_path):
    code = (
        "import json, sys, runpy\n"
        f"runpy.run_path({str(DAGS / 'sda_maintenance.py')!r})\n"
        "import sda.orchestration.airflow_support\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))\n"
    )
    env = dict(os.environ, AIRFLOW_HOME=str(tmp_path), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_airflow_support_helpers():
    import json

    from sda.config.settings import load_settings
    from sda.orchestration import airflow_support

    settings = load_settings(env={}, connect_host="spark-connect", connect_port=15077)
    kwargs = airflow_support.stage_kwargs(settings)
    assert kwargs["conn_id"] == "spark_connect"
    assert json.loads(airflow_support.connection_json(settings)) == {
        "conn_type": "spark_connect", "host": "sc://spark-connect", "port": 15077}
