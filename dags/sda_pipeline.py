"""
### sda_pipeline: space-domain-awareness sensor fusion, one data interval per run

Every run takes the sensor files that landed since the last run and carries them through the
lakehouse (Delta tables under `SDA_LAKEHOUSE`, default `var/lakehouse`), one task per stage of
`include/sda/pipeline/topology.py` and its two quality gates (listed under *Tasks* below, generated from it
when the DAG is parsed: `DOC_MD`). The catalogue file is `SDA_CATALOG_FILE`, the landing zone `SDA_LANDING`, the
outbox `SDA_OUTBOX`; a failed `quality_silver` stops the run before `correlate`, so nothing reaches gold,
and `quality_gold` writes the run report (the task's **Run report** link).

Each task runs `jobs/<stage>.py --start <data_interval_start> --end <data_interval_end> --run-id
<run_id>` as a thin client of the long-lived Spark Connect server (`sda server start`; `make run`
starts it) through the `spark_connect` connection (`AIRFLOW_CONN_SPARK_CONNECT`, `sc://host:port`):
no task starts a JVM. A run processes
the data interval it is given, never "whatever is latest"; a manual run without a logical date uses
the `SDA_CADENCE_MINUTES` before its `run_after`. All sinks are idempotent, so a retry or a re-run of
the same interval converges to the same tables. A **backfill** (Airflow UI "Backfill", or
`POST /api/v2/backfills`) passes `--mode replay`: each run recomputes its interval from bronze and
the tables downstream of it (see `sda_replay` and `include/sda/pipeline/replay.py`), commits no progress and
sends no alerts, so it can run beside the scheduled runs (a write conflict between them is retried:
every sink is an idempotent MERGE). The stages that read files (those no other stage feeds) and the gates skip
in a backfill. The graph is declared in `include/sda/pipeline/topology.py` (see the README's diagram).
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, AssetWatcher, DeltaTriggerTimetable

from sda.config.settings import load_settings
from sda.orchestration.airflow_support import landing_state_file, stage_kwargs
from sda.orchestration.landing_watch import LandingTrigger
from sda.orchestration.operators import QualityGateOperator, SdaStageOperator
from sda.pipeline.topology import GATES, STAGES, edges, markdown

settings = load_settings()

# what the Airflow UI shows: the docstring above and the tasks, generated from the topology (plain strings: no
# Spark or pandas at parse time)
DOC_MD = f"{__doc__}\n#### Tasks\n\n{markdown()}"

# A run's data interval, as job arguments. A manual run triggered without a logical date has no data
# interval in Airflow 3, and a run started by landed files (asset-triggered) has the span of its
# asset events, possibly zero-length: both take the cadence that ends at the run's run_after.
OWN_INTERVAL = ("(dag_run.run_type in ('scheduled', 'backfill', 'manual') "
                "and (data_interval_start | default(none)) is not none "
                "and (data_interval_end | default(none)) is not none and data_interval_end > data_interval_start)")
INTERVAL_START = ("{{ (data_interval_start if %s else dag_run.run_after - macros.timedelta(minutes=%d)).isoformat() }}"
                  % (OWN_INTERVAL, settings.cadence_minutes))
INTERVAL_END = "{{ (data_interval_end if %s else dag_run.run_after).isoformat() }}" % OWN_INTERVAL

# A backfill recomputes its intervals from bronze (the stages' replay mode, sda.pipeline.replay); scheduled and
# manual runs consume what is new.
MODE = "{{ 'replay' if dag_run.run_type == 'backfill' else 'incremental' }}"

cadence = dt.timedelta(minutes=settings.cadence_minutes)

# New files under the landing zone start a run within seconds (sda.orchestration.landing_watch); the cadence is the
# safety net (a triggerer that was down, files whose arrival went unseen).
landing = Asset(
    name="sda_landing",
    uri=f"file://{settings.landing}",
    watchers=[AssetWatcher(name="sda_landing_watcher",
                           trigger=LandingTrigger(directory=str(settings.landing),
                                                  state_file=str(landing_state_file(settings))))],
)

with DAG(
    dag_id="sda_pipeline",
    description="Sensor files -> bronze -> silver -> correlated observations -> conjunction alerts",
    doc_md=DOC_MD,
    # A plain timedelta gives zero-length data intervals in Airflow 3: each run covers the cadence
    # that ends when it starts. Landed files trigger a run in between; at max_active_runs Airflow
    # defers asset-triggered runs, so files landing during a run are taken by the next one.
    schedule=AssetOrTimeSchedule(timetable=DeltaTriggerTimetable(cadence, interval=cadence), assets=landing),
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    catchup=False,
    max_active_runs=1,
    # On a local master two Spark applications would only share the same cores (and, on a fresh
    # lakehouse, race each other creating the tables).
    max_active_tasks=1 if settings.spark_master.startswith("local") else len(STAGES),
    default_args={
        "owner": "sda",
        "retries": 2,
        "retry_delay": dt.timedelta(seconds=30),
        "execution_timeout": dt.timedelta(minutes=30),
    },
    tags=["sda", "spark", "delta", "space-domain-awareness"],
) as dag:
    tasks = {}
    common = ["--start", INTERVAL_START, "--end", INTERVAL_END, "--run-id", "{{ run_id }}", "--mode", MODE]
    for order, stage in enumerate(STAGES):
        extra = [arg.format(catalog_file=settings.catalog_file) for arg in stage.extra_args]
        tasks[stage.name] = SdaStageOperator(
            task_id=stage.name,
            doc_md=f"**{stage.name}**: {stage.summary}. "
                   f"Reads {', '.join(stage.inputs)}; writes {', '.join(stage.outputs)}.",
            job=stage.job,
            application_args=[*common, *extra],
            # topology order first: with one task at a time the catalogue is loaded before the sensor
            # stages, so a new element set reaches the screening in the same run
            priority_weight=len(STAGES) + len(GATES) - order,
            weight_rule="absolute",
            # a backfill (replay mode) has no new files to land or catalogue to load
            skip_in_replay=not stage.upstream,
            # ... and its skips must not cascade
            trigger_rule="none_failed",
            **stage_kwargs(settings),
        )
    for gate in GATES:
        tasks[gate.name] = QualityGateOperator(
            task_id=gate.name,
            doc_md=f"**{gate.name}**: {gate.summary}. Fail-severity checks fail this task (exit 3); "
                   "the **Run report** link opens the run's page with every check and its Data Docs.",
            job=gate.job,
            application_args=[*common, "--layer", ",".join(gate.layers)],
            priority_weight=len(STAGES) + len(GATES) - 1 - max(
                [i for i, s in enumerate(STAGES) if s.name in gate.after], default=0),
            weight_rule="absolute",
            # a failed gate is a verdict on the data, not a flaky run: validating again changes nothing
            retries=0,
            # a backfill replays rows that keep their first run's ids: nothing of its own to validate
            skip_in_replay=True,
            trigger_rule="none_failed",
            **stage_kwargs(settings),
        )
    for upstream, downstream in edges():
        tasks[upstream] >> tasks[downstream]
