"""
### sda_replay: recompute chosen stages for an event-time range

Trigger it from the UI (**Trigger DAG** shows the form) or the REST API with a `conf` of
`start`, `end` (ISO-8601, UTC), `stages` (any of the replayable stages listed at the end; all by default)
and `dry_run`.

1. `plan` checks the request and refuses it with a message saying what is wrong: end not after
   start, a range longer than `SDA_REPLAY_MAX_HOURS`, a start in the future, an unknown or
   non-replayable stage (the form's schema already refuses unknown stage names at trigger time).
   It logs the plan: stages in topology order, the jobs, the number of conjunction screenings.
2. `choose` follows only the chosen stages (none on a dry run).
3. each chosen stage runs `jobs/<stage>.py --start S --end E --replay` on the Spark Connect server: it recomputes
   the range from the tables upstream of it and MERGEs the result (see `include/sda/pipeline/replay.py`).
   With unchanged inputs nothing but lineage columns changes; no stage's incremental progress moves.

The same from the command line: `sda replay --start S --end E [--stages a,b] [--dry-run]`.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Param, task

from sda.config.settings import load_settings
from sda.orchestration.airflow_support import stage_kwargs
from sda.orchestration.operators import SdaStageOperator
from sda.pipeline.replay import REPLAYABLE
from sda.pipeline.topology import STAGE_BY_NAME

settings = load_settings()
# what the Airflow UI shows: the docstring above and the replayable stages, from the topology
DOC_MD = f"{__doc__}\nReplayable stages, in topology order: {', '.join(f'`{name}`' for name in REPLAYABLE)}.\n"
PLAN = "{{ ti.xcom_pull(task_ids='plan') }}"

with DAG(
    dag_id="sda_replay",
    description="Recompute chosen stages for an event-time range from the tables upstream of them",
    doc_md=DOC_MD,
    schedule=None,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    catchup=False,
    # replays write the same tables as the pipeline: one at a time, one task at a time on a local master
    max_active_runs=1,
    max_active_tasks=1,
    default_args={"owner": "sda", "retries": 1, "retry_delay": dt.timedelta(seconds=30),
                  "execution_timeout": dt.timedelta(hours=2)},
    params={
        "start": Param(type="string", format="date-time", title="Start (UTC)",
                       description="first event time to recompute, e.g. 2026-11-20T06:00:00Z"),
        "end": Param(type="string", format="date-time", title="End (UTC, exclusive)",
                     description=f"after start, at most SDA_REPLAY_MAX_HOURS ({settings.replay_max_hours:g} h) later"),
        "stages": Param(list(REPLAYABLE), type="array", title="Stages",
                        items={"type": "string", "enum": list(REPLAYABLE)},
                        description="which stages to recompute (run in topology order)"),
        "dry_run": Param(False, type="boolean", title="Dry run", description="check and log the plan only"),
    },
    tags=["sda", "replay", "spark", "delta"],
) as dag:

    @task(retries=0)
    def plan(params: dict | None = None) -> dict:
        """Check the request (sda.pipeline.replay.plan) and log the plan; a bad request fails here, before any job."""
        import json

        from sda.config.settings import load_settings as _load
        from sda.pipeline import replay

        current = _load()
        try:
            request = replay.plan(params["start"], params["end"], params.get("stages"), params.get("dry_run", False),
                                  max_hours=current.replay_max_hours)
        except replay.ReplayError as exc:
            raise ValueError(f"replay refused: {exc}") from None
        described = request.describe(current.cadence_minutes)
        print(json.dumps(described, indent=2))
        return described

    @task.branch(retries=0)
    def choose(described: dict) -> list[str]:
        """The chosen stages' tasks; none on a dry run."""
        return [] if described["dry_run"] else [f"replay_{s}" for s in described["stages"]]

    planned = plan()
    chosen = choose(planned)
    previous = None
    for name in REPLAYABLE:
        stage = STAGE_BY_NAME[name]
        replay_task = SdaStageOperator(
            task_id=f"replay_{name}",
            doc_md=f"**{name}** over the requested range (`--replay`): {stage.summary}.",
            job=stage.job,
            application_args=["--start", "{{ ti.xcom_pull(task_ids='plan')['start'] }}",
                              "--end", "{{ ti.xcom_pull(task_ids='plan')['end'] }}",
                              "--run-id", "{{ run_id }}", "--replay"],
            # the earlier stages may be skipped (not chosen): run after them either way, never after a failure
            trigger_rule="none_failed",
            **stage_kwargs(settings),
        )
        chosen >> replay_task
        if previous is not None:
            previous >> replay_task
        previous = replay_task
