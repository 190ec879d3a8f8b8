"""
### sda_maintenance: daily table upkeep of the lakehouse (compaction and VACUUM)

One task, `maintenance` (`jobs/maintenance.py`), goes through every Delta table of the registry
(`include/sda/lake/tables.py`):

1. **compaction**: `OPTIMIZE` bin-packs the small files that the 15-minute `sda_pipeline` runs leave
   behind into a few large ones per partition. The rows do not change, and the commit is marked
   `dataChange=false`, so change-feed readers skip it;
2. **VACUUM**: deletes files that are no longer in the current snapshot and are older than the
   retention, `SDA_VACUUM_RETENTION_H` (default 168 h, and never below the table's
   `delta.deletedFileRetentionDuration` of 7 days);
3. **files beside the tables** (`include/sda/pipeline/retention.py`): landed files the ingest ledger holds
   as done, after `SDA_LANDING_RETENTION_H` (default 72 h; bronze is the replayable log), the outbox's CDMs
   after `SDA_OUTBOX_RETENTION_H` (720 h), Airflow's task logs after `SDA_LOG_RETENTION_H` (168 h); 0 keeps
   them all.

**Change-feed consumers.** `normalize`, `dedup` and `correlate` read their upstream table's change
feed from the version after the one recorded in `ops.progress`. Before each VACUUM the job finds
the oldest version any consumer still has to read. If that version was committed longer ago than
the retention (with a 1 h margin), the job widens the retention for that table, reports it as
`retention_widened` and logs a warning naming the lagging stage. A consumer that has never run
(no progress row) will read from version 0, so its table is not vacuumed at all until it has run
once. The same happens when a consumer's next version has already left the log
(`delta.logRetentionDuration`, 30 days), and the warning then says to replay that stage.

**Replay.** A replay from bronze reads bronze's current snapshot and is unaffected by VACUUM
(bronze is append-only; compaction only moves rows into new files). A change-feed replay of old
versions (a progress row moved back) works only for versions newer than the VACUUM horizon and
the log retention. Move the row back before those files are gone, and not while this DAG runs:
the next maintenance run then keeps the files from that version on.

A concurrent `sda_pipeline` commit that conflicts with OPTIMIZE is retried with back-off; after
that the task fails and Airflow retries it. To see what a run would do without changing anything,
run `python jobs/maintenance.py --start ... --end ... --run-id ... --dry-run [--tables a,b]`.
Each run records its figures in `ops.run_metrics` (stage `maintenance`).
"""

from __future__ import annotations

import datetime as dt

from airflow.configuration import conf
from airflow.sdk import DAG

from sda.config.settings import load_settings
from sda.orchestration.airflow_support import stage_kwargs
from sda.orchestration.operators import SdaStageOperator

settings = load_settings()
LOGS = conf.get("logging", "base_log_folder")  # Airflow's task logs, pruned after SDA_LOG_RETENTION_H

# In Airflow 3, "@daily" is a cron *trigger*: data_interval_start == data_interval_end (the trigger
# time), and a manual run may have no data interval at all. The job is given the day that ends at
# the trigger (or at run_after), which it records as lineage in ops.run_metrics.
RUN_END = "{{ (data_interval_end | default(dag_run.run_after, true)).isoformat() }}"
RUN_START = "{{ ((data_interval_end | default(dag_run.run_after, true)) - macros.timedelta(days=1)).isoformat() }}"

with DAG(
    dag_id="sda_maintenance",
    description="Daily Delta upkeep: compact small files, VACUUM with a retention that spares change-feed consumers",
    doc_md=__doc__,
    schedule="@daily",
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args={
        "owner": "sda",
        "retries": 2,
        "retry_delay": dt.timedelta(minutes=5),
        "execution_timeout": dt.timedelta(hours=2),
    },
    tags=["sda", "maintenance", "delta"],
) as dag:
    SdaStageOperator(
        task_id="maintenance",
        doc_md="**maintenance**: OPTIMIZE then VACUUM every registered table; the retention is widened "
               "for a table whose change-feed consumer lags, and a table is not vacuumed while a consumer "
               "has never run.",
        job="jobs/maintenance.py",
        application_args=["--start", RUN_START, "--end", RUN_END, "--run-id", "{{ run_id }}", "--logs", LOGS],
        **stage_kwargs(settings),
    )
