"""Schemas, declared once: every table's columns, and the sensor kinds with the suffix of each one's
landed files. What a landed record looks like (the wire formats) is :mod:`sda.lake.wire_formats`.

Units inside the pipeline are SI (metres, m/s, radians) from silver onwards.
"""

from __future__ import annotations

from pyspark.sql import types as T

# The landing kinds, each with a bronze table. ``tdm`` (CCSDS Tracking Data Messages, KVN or XML) is a
# format, not a sensor type: normalize gives each of its measurements the kind of envelope it fills.
SENSOR_KINDS = ("radar", "optical", "isl", "tdm")
LANDING_SUFFIX = {"radar": ".jsonl", "optical": ".csv", "isl": ".bcn", "tdm": (".kvn", ".xml", ".tdm")}

# --- tables ---------------------------------------------------------------------------------------

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

BRONZE = T.StructType(
    [
        T.StructField("bronze_id", T.StringType(), False),  # sha256(file sha256, record number)
        T.StructField("sensor_kind", T.StringType(), False),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("record_no", T.LongType(), False),  # 0-based line number in the file
        T.StructField("payload", T.StringType(), False),  # the raw record, as landed
        T.StructField("ingest_time", T.TimestampType(), False),
        T.StructField("ingest_date", T.DateType(), False),
        T.StructField("run_id", T.StringType(), False),
        # The ledger batch that appended the row: the arrival order every event-time watermark is
        # judged by (see sda.pipeline.watermarks), the same whichever run later reads it.
        T.StructField("ingest_batch", T.LongType(), False),
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

# The common observation envelope (silver). Measurement columns not used by a kind are null.
OBSERVATION = T.StructType(
    [
        T.StructField("obs_id", T.StringType(), False),  # deterministic, see sda.transforms.envelope
        T.StructField("sensor_id", T.StringType(), False),
        T.StructField("sensor_kind", T.StringType(), False),
        T.StructField("event_time", T.TimestampType(), False),
        T.StructField("event_date", T.DateType(), False),
        T.StructField("ingest_time", T.TimestampType(), False),
        T.StructField("ingest_batch", T.LongType(), False),  # arrival order (bronze ``ingest_batch``)
        # radar (site-relative, SI)
        T.StructField("range_m", T.DoubleType()),
        T.StructField("az_rad", T.DoubleType()),
        T.StructField("el_rad", T.DoubleType()),
        T.StructField("range_rate_ms", T.DoubleType()),
        # optical (topocentric, radians)
        T.StructField("ra_rad", T.DoubleType()),
        T.StructField("dec_rad", T.DoubleType()),
        # ISL (TEME state vector, SI)
        T.StructField("x_m", T.DoubleType()),
        T.StructField("y_m", T.DoubleType()),
        T.StructField("z_m", T.DoubleType()),
        T.StructField("vx_ms", T.DoubleType()),
        T.StructField("vy_ms", T.DoubleType()),
        T.StructField("vz_ms", T.DoubleType()),
        # sensor site (geodetic, WGS-84) for ground sensors
        T.StructField("site_lat_deg", T.DoubleType()),
        T.StructField("site_lon_deg", T.DoubleType()),
        T.StructField("site_alt_m", T.DoubleType()),
        # lineage
        T.StructField("bronze_id", T.StringType(), False),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("run_id", T.StringType(), False),
    ]
)

# Dedup output: the envelope plus how many copies were folded into this observation.
DEDUPED = T.StructType(OBSERVATION.fields + [T.StructField("copies", T.LongType(), False)])

CATALOG = T.StructType(
    [
        T.StructField("norad_id", T.LongType(), False),
        T.StructField("name", T.StringType()),
        T.StructField("epoch", T.TimestampType(), False),
        T.StructField("line1", T.StringType(), False),
        T.StructField("line2", T.StringType(), False),
        T.StructField("perigee_km", T.DoubleType(), False),
        T.StructField("apogee_km", T.DoubleType(), False),
        T.StructField("source", T.StringType(), False),
        T.StructField("load_time", T.TimestampType(), False),
        T.StructField("run_id", T.StringType(), False),
    ]
)

# Signed per-measurement residuals (observed - predicted) of the associated object, see
# sda.orbit.correlation: (name, unit, unit of the variance). Radar: range, azimuth (wrapped to [-pi, pi]),
# elevation, range-rate; optical: right ascension (wrapped, not times cos dec), declination; ISL:
# the position miss on the predicted orbit's radial / along-track / cross-track axes.
MEASUREMENT_RESIDUALS = (
    ("range", "m", "m2"),
    ("az", "rad", "rad2"),
    ("el", "rad", "rad2"),
    ("range_rate", "ms", "m2s2"),
    ("ra", "rad", "rad2"),
    ("dec", "rad", "rad2"),
    ("radial", "m", "m2"),
    ("along", "m", "m2"),
    ("cross", "m", "m2"),
)

CORRELATED = T.StructType(
    DEDUPED.fields
    + [
        T.StructField("norad_id", T.LongType(), False),
        T.StructField("residual_m", T.DoubleType(), False),  # position-space miss to the prediction
        T.StructField("candidates", T.IntegerType(), False),  # objects inside the gate
        T.StructField("ambiguous", T.BooleanType(), False),  # an in-gate runner-up not 100x less likely
        T.StructField("correlate_run_id", T.StringType(), False),
        T.StructField("gate_d2", T.DoubleType()),  # normalised residual (chi-square statistic) of the association
    ]
    # residual_<name>_<unit>: null for the measurements the observation's sensor kind does not make
    + [T.StructField(f"residual_{name}_{unit}", T.DoubleType()) for name, unit, _ in MEASUREMENT_RESIDUALS]
)

UNCORRELATED = T.StructType(
    DEDUPED.fields
    + [
        T.StructField("reason", T.StringType(), False),
        T.StructField("nearest_norad_id", T.LongType()),
        T.StructField("nearest_residual_m", T.DoubleType()),
        T.StructField("correlate_run_id", T.StringType(), False),
        T.StructField("nearest_gate_d2", T.DoubleType()),  # the named near miss's normalised residual
    ]
)

OBJECT_STATE = T.StructType(
    [
        T.StructField("norad_id", T.LongType(), False),
        T.StructField("window_start", T.TimestampType(), False),  # fixed event-time window (settings.state_window_s)
        T.StructField("window_end", T.TimestampType(), False),
        T.StructField("observations", T.LongType(), False),
        T.StructField("residual_mean_m", T.DoubleType()),
        T.StructField("residual_rms_m", T.DoubleType()),
        T.StructField("last_observed", T.TimestampType(), False),
        # provisional (false) until the pipeline watermark passes window_end; then no data can change it
        T.StructField("final", T.BooleanType(), False),
        T.StructField("run_id", T.StringType(), False),
        T.StructField("ambiguous_observations", T.LongType()),  # of ``observations``, those flagged ambiguous
    ]
    # Per measurement type, over the window's correlated observations that have it: how many, the
    # mean of the signed residual and its *sample* variance (n - 1 denominator; null below 2).
    + [
        field
        for name, unit, var_unit in MEASUREMENT_RESIDUALS
        for field in (
            T.StructField(f"residual_{name}_count", T.LongType()),
            T.StructField(f"residual_{name}_mean_{unit}", T.DoubleType()),
            T.StructField(f"residual_{name}_var_{var_unit}", T.DoubleType()),
        )
    ]
)

# A sensor's pass over an object: a session window over its correlated observations that ends after
# a gap of settings.pass_gap_s without one.
PASSES = T.StructType(
    [
        T.StructField("sensor_id", T.StringType(), False),
        T.StructField("norad_id", T.LongType(), False),
        T.StructField("pass_start", T.TimestampType(), False),  # first observation
        T.StructField("pass_end", T.TimestampType(), False),  # last observation
        T.StructField("observations", T.LongType(), False),
        T.StructField("residual_rms_m", T.DoubleType()),
        T.StructField("final", T.BooleanType(), False),  # the sensor's watermark is past pass_end + gap
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

CONJUNCTION = T.StructType(
    [
        T.StructField("event_id", T.StringType(), False),  # sha256(primary, secondary, TCA rounded to the minute)
        T.StructField("primary_id", T.LongType(), False),
        T.StructField("secondary_id", T.LongType(), False),
        T.StructField("screen_start", T.TimestampType(), False),
        T.StructField("tca", T.TimestampType(), False),
        T.StructField("miss_m", T.DoubleType(), False),
        T.StructField("rel_speed_ms", T.DoubleType(), False),
        T.StructField("r_m", T.DoubleType(), False),  # relative position, primary's RTN frame
        T.StructField("t_m", T.DoubleType(), False),
        T.StructField("n_m", T.DoubleType(), False),
        # 2-D Pc (Foster, sda.orbit.pc) with the modelled covariances (sda.orbit.uncertainty); null when the 2-D
        # method is invalid for the encounter (pc_valid false, pc_flag says why)
        T.StructField("pc", T.DoubleType()),
        T.StructField("pc_valid", T.BooleanType(), False),
        T.StructField("pc_flag", T.StringType()),  # null | low relative velocity | long encounter (...) | ...
        T.StructField("level", T.StringType(), False),  # red | yellow | none (sda.alerts.assessment.alert_level)
        T.StructField("run_id", T.StringType(), False),
        # null: a closest approach (a range-rate root); "persistent: ..." a pair within the threshold at
        # a window edge with no approach inside, or all along (sda.orbit.screening.pair_events): one row per
        # pair, at its smallest distance in the window, updated in place by later screenings
        T.StructField("flag", T.StringType()),
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

# The current state of an alert (gold ``alerts``, one row per alert_id) and each emitted change of it
# (gold ``alert_events``, one row per (alert_id, version)): see sda.alerts.plan for the lifecycle.
_ALERT_STATE = [
    T.StructField("alert_id", T.StringType(), False),  # event_id of the first sighting
    T.StructField("version", T.IntegerType(), False),  # 1 when new, +1 per emitted change
    T.StructField("status", T.StringType(), False),  # new | updated | closed (the last emitted change)
    T.StructField("level", T.StringType(), False),  # red | yellow | none (none: closed, risk gone)
    T.StructField("reason", T.StringType(), False),  # why this level / status, in words
    T.StructField("close_reason", T.StringType()),  # null | TCA passed | risk dropped below thresholds | ...
    T.StructField("event_id", T.StringType(), False),  # the conjunctions row the values come from
    T.StructField("primary_id", T.LongType(), False),
    T.StructField("secondary_id", T.LongType(), False),
    T.StructField("primary_name", T.StringType()),
    T.StructField("secondary_name", T.StringType()),
    T.StructField("primary_intldes", T.StringType()),  # international designator, e.g. 1998-067A
    T.StructField("secondary_intldes", T.StringType()),
    T.StructField("screen_start", T.TimestampType(), False),  # screening start of the run the values come from
    T.StructField("tca", T.TimestampType(), False),
    T.StructField("miss_m", T.DoubleType(), False),
    T.StructField("rel_speed_ms", T.DoubleType(), False),
    T.StructField("r_m", T.DoubleType(), False),  # secondary relative to primary, primary's RTN frame
    T.StructField("t_m", T.DoubleType(), False),
    T.StructField("n_m", T.DoubleType(), False),
    T.StructField("pc", T.DoubleType()),  # null when the 2-D method is invalid
    T.StructField("pc_valid", T.BooleanType(), False),
    T.StructField("pc_flag", T.StringType()),
    T.StructField("hbr_m", T.DoubleType(), False),  # combined hard-body radius used for pc
    # both objects' states at TCA (SGP4, TEME; m, m/s) and the modelled 1-sigma RTN uncertainties there
    # (sda.orbit.uncertainty; diagonal covariance): what the CDM carries, so any version can be re-emitted
    *[T.StructField(f"{o}_{c}", T.DoubleType(), False)
      for o in ("p", "s") for c in ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms")],
    *[T.StructField(f"{o}_sigma_{c}", T.DoubleType(), False)
      for o in ("p", "s") for c in ("r_m", "t_m", "n_m", "rdot_ms", "tdot_ms", "ndot_ms")],
    T.StructField("p_cov_source", T.StringType(), False),  # observed/<regime> | tle/<regime> | fused/<regime>/<id>
    T.StructField("s_cov_source", T.StringType(), False),
    T.StructField("content_hash", T.StringType(), False),  # sha256 of the rounded emitted values
    T.StructField("cdm_created", T.TimestampType(), False),  # the CDM's CREATION_DATE (the emitting run's screen start)
    T.StructField("cdm_file", T.StringType(), False),  # file names in settings.outbox
    T.StructField("json_file", T.StringType(), False),
    T.StructField("run_id", T.StringType(), False),  # the run that emitted this version
    # a fused object's full 6x6 covariance at TCA in its RTN frame (m-units, row-major; null: modelled)
    T.StructField("p_cov_rtn", T.ArrayType(T.DoubleType(), False)),
    T.StructField("s_cov_rtn", T.ArrayType(T.DoubleType(), False)),
    # the object has a manoeuvre in gold manoeuvres burnt at or before cdm_created: the CDM says MANEUVERABLE
    # = YES (else N/A); null in rows from before the column, read as false (sda.alerts.content)
    T.StructField("p_maneuverable", T.BooleanType()),
    T.StructField("s_maneuverable", T.BooleanType()),
]

ALERT = T.StructType(_ALERT_STATE + [T.StructField("first_run_id", T.StringType(), False)])

ALERT_EVENTS = T.StructType(list(_ALERT_STATE))

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
