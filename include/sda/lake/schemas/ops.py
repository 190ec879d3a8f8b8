"""Ops schemas: the pipeline's own bookkeeping -- the versions each stage consumed (``progress``), the
landing ledger (``ingested_files``), refused records (``quarantine``), watermarks and late data, propagation
errors, the conjunction screening's record (``screening_state``, ``screening_events``), run metrics and
data-quality results."""

from __future__ import annotations

from pyspark.sql import types as T

from sda.lake.schemas.silver import OBSERVATION

PROGRESS = T.StructType(
    [
        T.StructField("stage", T.StringType(), False),
        T.StructField("source_table", T.StringType(), False),
        T.StructField("version", T.LongType(), False),  # last upstream Delta version consumed
        T.StructField("run_id", T.StringType(), False),
        T.StructField("updated", T.TimestampType(), False),
    ]
)

INGESTED_FILES = T.StructType(
    [
        T.StructField("file_path", T.StringType(), False),  # relative to the landing root
        T.StructField("file_sha256", T.StringType(), False),
        T.StructField("file_size", T.LongType(), False),
        T.StructField("sensor_kind", T.StringType(), False),
        T.StructField("records", T.LongType(), False),  # records appended to bronze
        T.StructField("quarantined", T.LongType(), False),  # records refused; the two sum to the data lines
        T.StructField("ingest_time", T.TimestampType(), False),
        T.StructField("run_id", T.StringType(), False),
        # The batch this file was ingested in: also the Delta txnVersion of the batch's bronze appends,
        # so a rerun after a crash replays the *same* batch and Delta skips what was already appended.
        T.StructField("batch_id", T.LongType(), False),
        T.StructField("status", T.StringType(), False),  # planned | done | vanished (gone before replay)
        # the file's modification time (epoch microseconds) when it was read: a file whose path, size
        # and mtime the ledger holds is known without reading and hashing it again (null: older rows)
        T.StructField("file_mtime_us", T.LongType(), True),
    ]
)

QUARANTINE = T.StructType(
    [
        # sha256 of (stage, where the record came from): deterministic, so quarantine writes are
        # MERGEs on it and a retried stage never quarantines the same record twice
        T.StructField("quarantine_id", T.StringType(), False),
        T.StructField("stage", T.StringType(), False),  # ingest | normalize | ...
        T.StructField("reason", T.StringType(), False),
        T.StructField("sensor_kind", T.StringType()),
        T.StructField("source_file", T.StringType()),
        T.StructField("record_no", T.LongType()),
        T.StructField("item_no", T.LongType()),  # position inside the record (radar detection), else null
        T.StructField("bronze_id", T.StringType()),  # null when the record never reached bronze
        T.StructField("raw", T.BinaryType()),  # the bytes as landed
        T.StructField("quarantine_time", T.TimestampType(), False),
        T.StructField("run_id", T.StringType(), False),
    ]
)

# Per sensor and ingest batch: the newest (and oldest) event time that arrived; the watermark of a
# sensor before batch b is the newest event time of its batches < b minus the allowed lateness.
WATERMARKS = T.StructType(
    [
        T.StructField("sensor_id", T.StringType(), False),
        T.StructField("sensor_kind", T.StringType(), False),
        T.StructField("ingest_batch", T.LongType(), False),
        T.StructField("max_event_time", T.TimestampType(), False),
        T.StructField("min_event_time", T.TimestampType(), False),
        T.StructField("records", T.LongType(), False),
        T.StructField("run_id", T.StringType(), False),
    ]
)

# Observations that arrived after the event-time window they belong to was final: kept, counted,
# never folded into a final result.
LATE_DATA = T.StructType(
    OBSERVATION.fields
    + [
        T.StructField("late_stage", T.StringType(), False),  # the stage whose window was final
        T.StructField("window_end", T.TimestampType(), False),  # end of the window that was already final
        T.StructField("watermark", T.TimestampType(), False),  # the watermark it met on arrival
        T.StructField("lateness_s", T.DoubleType(), False),  # newest event time seen from its sensor - its event time
        T.StructField("late_run_id", T.StringType(), False),
    ]
)

# Objects SGP4 could not propagate at some time of a run (its error codes 1-6), per stage and run:
# they are skipped from that time on, never crash the job.
PROPAGATION_ERRORS = T.StructType(
    [
        T.StructField("stage", T.StringType(), False),
        T.StructField("run_id", T.StringType(), False),
        T.StructField("norad_id", T.LongType(), False),
        T.StructField("error_code", T.IntegerType(), False),
        T.StructField("meaning", T.StringType(), False),
        T.StructField("first_error_time", T.TimestampType(), False),
        T.StructField("epoch", T.TimestampType()),  # the element set's epoch
    ]
)

# The conjunction stage's screening state (sda.orbit.screening.ScreeningState), one row per catalogue object:
# the element-set epoch it was last screened with, the object state its events' Pc was assessed with,
# and -- the same on every row -- the horizon the screening covers, its threshold, step and code
# version. The next screening screens only what changed since (jobs/conjunction.py).
SCREENING_STATE = T.StructType(
    [
        T.StructField("norad_id", T.LongType(), False),
        T.StructField("epoch", T.TimestampType(), False),  # element-set epoch screened
        T.StructField("state_observed", T.TimestampType()),  # newest object_state last_observed its Pc used
        T.StructField("state_rms_m", T.DoubleType()),  # and that state's residual RMS
        T.StructField("horizon_start", T.TimestampType(), False),
        T.StructField("horizon_end", T.TimestampType(), False),
        T.StructField("threshold_km", T.DoubleType(), False),
        T.StructField("step_s", T.DoubleType(), False),
        T.StructField("code_version", T.StringType(), False),  # sda.orbit.screening.code_version()
        T.StructField("mode", T.StringType(), False),  # full | incremental: how the last screening ran
        T.StructField("run_id", T.StringType(), False),
        T.StructField("line1", T.StringType()),  # the element set screened (a fused object's: kept until renewed)
        T.StructField("line2", T.StringType()),
    ]
)

# The open events of the recorded screening (sda.orbit.screening.EVENT_COLUMNS): the approach as screened
# (km, km/s, TEME states at TCA), which the next screening keeps for pairs that did not change.
SCREENING_EVENTS = T.StructType(
    [T.StructField("event_id", T.StringType(), False)]
    + [T.StructField(c, T.LongType() if c in ("primary_id", "secondary_id") else T.DoubleType(), False)
       for c in ("primary_id", "secondary_id", "tca_unix", "miss_km", "rel_speed_km_s", "r_km", "t_km", "n_km",
                 "p_x", "p_y", "p_z", "p_vx", "p_vy", "p_vz", "s_x", "s_y", "s_z", "s_vx", "s_vy", "s_vz")]
    + [T.StructField("flag", T.StringType()), T.StructField("run_id", T.StringType(), False)]
)

# One row per stage per run (sda.pipeline.runtime.run_stage); MERGEd on (stage, run_id) so a retry replaces it.
RUN_METRICS = T.StructType(
    [
        T.StructField("stage", T.StringType(), False),
        T.StructField("run_id", T.StringType(), False),
        T.StructField("interval_start", T.TimestampType(), False),
        T.StructField("interval_end", T.TimestampType(), False),
        T.StructField("finished", T.TimestampType(), False),
        T.StructField("seconds", T.DoubleType(), False),
        T.StructField("records_in", T.LongType()),
        T.StructField("records_out", T.LongType()),
        T.StructField("quarantined", T.LongType()),
        T.StructField("duplicates", T.LongType()),
        T.StructField("late", T.LongType()),
        T.StructField("conserved", T.BooleanType()),  # in == out + quarantined + duplicates + late; null if not counted
        T.StructField("metrics_json", T.StringType(), False),  # everything the stage reported
        T.StructField("mode", T.StringType()),  # incremental | replay
        # the stage's event-time watermark after the run (stages that keep one: dedup, correlate)
        T.StructField("watermark", T.TimestampType()),
        # upstream lag as the run started: Delta commits of its inputs not yet consumed, and the age
        # of the oldest of them in seconds (null: no change-feed input, or a replay)
        T.StructField("lag_versions", T.LongType()),
        T.StructField("lag_seconds", T.DoubleType()),
    ]
)

# One row per expectation per validated table per run (sda.quality.gates); MERGEd on (run_id, table, expectation).
DATA_QUALITY = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("layer", T.StringType(), False),  # bronze | silver | gold
        T.StructField("table", T.StringType(), False),
        T.StructField("expectation", T.StringType(), False),  # the check's stable name in its suite
        # the GX expectation, e.g. expect_column_values_to_be_between
        T.StructField("expectation_type", T.StringType(), False),
        T.StructField("column", T.StringType()),  # null for table-level checks
        T.StructField("severity", T.StringType(), False),  # warn | quarantine | fail
        T.StructField("success", T.BooleanType(), False),
        T.StructField("unexpected_count", T.LongType()),  # null for aggregate checks
        T.StructField("element_count", T.LongType()),
        T.StructField("observed", T.StringType()),  # observed value / unexpected sample / exception, as text
        T.StructField("checked_at", T.TimestampType(), False),
        T.StructField("suite", T.StringType(), False),  # the GX expectation suite
        T.StructField("data_docs_url", T.StringType()),  # file:// URL of the run's validation page
    ]
)
