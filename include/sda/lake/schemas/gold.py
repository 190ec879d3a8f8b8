"""Gold schemas: what the stages derive, per object and per pair -- the catalogue's element sets, the
correlated and uncorrelated observations with their residuals, per-object state windows and passes (correlate),
fused orbits and manoeuvres (fuse), provisional objects (acquire), conjunctions and alerts (conjunction)."""

from __future__ import annotations

from pyspark.sql import types as T

from sda.lake.schemas.silver import DEDUPED

# --- the catalogue and correlation (catalog, correlate) ----------------------------------------------

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

# --- orbit determination and new objects (fuse, acquire) --------------------------------------------

_KINDS = ("radar", "optical", "isl")

# One object's fused orbit per event-time arc window (settings.fusion_arc_h): the state at ``epoch``
# (TEME, km and km/s, as the pipeline's states), its 7x7 covariance with the ballistic coefficient
# (TEME, m, m/s, m^2/kg; row-major), what was fitted and how the fit ended, and the SGP4 element set
# the screening propagates for it (null when the fit did not converge: the catalogue's is used).
FUSED_ORBITS = T.StructType(
    [
        T.StructField("norad_id", T.LongType(), False),
        T.StructField("window_start", T.TimestampType(), False),
        T.StructField("window_end", T.TimestampType(), False),
        T.StructField("epoch", T.TimestampType(), False),  # the arc's last observation: where the state is
        T.StructField("epoch_unix", T.DoubleType(), False),
        T.StructField("fit_start", T.TimestampType(), False),  # the arc's first observation
        T.StructField("fit_start_unix", T.DoubleType(), False),
    ]
    + [T.StructField(c, T.DoubleType()) for c in ("x_km", "y_km", "z_km", "vx_kms", "vy_kms", "vz_kms", "b_m2_kg")]
    + [
        T.StructField("covariance", T.ArrayType(T.DoubleType(), False)),
        # 1-sigma position uncertainty in the state's RTN frame at the epoch (m): what the run report shows
        T.StructField("sigma_r_m", T.DoubleType()),
        T.StructField("sigma_t_m", T.DoubleType()),
        T.StructField("sigma_n_m", T.DoubleType()),
    ]
    + [T.StructField(f"n_{k}", T.LongType(), False) for k in _KINDS]  # observations in the arc, per kind
    + [T.StructField(f"used_{k}", T.LongType(), False) for k in _KINDS]  # of those, kept by outlier editing
    + [
        T.StructField("observations", T.LongType(), False),
        T.StructField("outliers", T.LongType(), False),
        T.StructField("rms", T.DoubleType()),  # weighted residual RMS (near 1 when the noise model holds)
        T.StructField("iterations", T.LongType(), False),
        T.StructField("status", T.StringType(), False),  # converged | not_converged | diverged | failed | too_few
        T.StructField("reason", T.StringType()),
        T.StructField("source", T.StringType(), False),  # fused | catalogue (the fit is not used)
        T.StructField("prior_source", T.StringType(), False),  # fused (the previous arc's) | catalogue
        T.StructField("regime", T.StringType()),  # LEO | MEO | GEO | HEO (sda.orbit.uncertainty.orbit_regime)
        T.StructField("obs_digest", T.StringType(), False),  # sha256 of the sorted obs_ids fitted
        T.StructField("fused_id", T.StringType(), False),  # names this fit: (norad_id, window, obs_digest)
        T.StructField("model", T.StringType(), False),  # the estimator's force model
        T.StructField("line1", T.StringType()),  # the screening element set (sda.orbit.screening.fitted_elements)
        T.StructField("line2", T.StringType()),
        T.StructField("lines_rms_m", T.DoubleType()),  # the element set against the fused prediction
        T.StructField("lines_max_m", T.DoubleType()),
        T.StructField("run_id", T.StringType(), False),
        # a well-determined fit's per-sensor residual normal equations, what the window's sensor calibration sums
        # (JSON, sda.orbit.estimation.calibration.contribution; null when its residuals do not calibrate)
        T.StructField("calibration_json", T.StringType()),
    ]
)

# One sensor's bias in one quantity as estimated from the well-determined fits of an event-time arc window
# (sda.orbit.estimation.calibration; the fuse stage applies it to the windows after): range_m (m), az_deg, el_deg
# (deg), ra_arcsec (on the sky), dec_arcsec, time_ms (the sensor measured at t + bias and reported t).
SENSOR_CALIBRATIONS = T.StructType(
    [
        T.StructField("sensor_id", T.StringType(), False),
        T.StructField("window_start", T.TimestampType(), False),
        T.StructField("window_end", T.TimestampType(), False),
        T.StructField("quantity", T.StringType(), False),
        T.StructField("bias", T.DoubleType(), False),  # measured - true, in the quantity's unit
        T.StructField("sigma", T.DoubleType(), False),  # its standard error
        T.StructField("n_obs", T.LongType(), False),
        T.StructField("n_objects", T.LongType(), False),
        T.StructField("run_id", T.StringType(), False),
        T.StructField("updated_at", T.TimestampType(), False),
    ]
)

#: what :func:`sda.orbit.fusion.arcs.fuse_object` returns per row (the timestamps are derived from the *_unix)
UDF_FIELDS = [f for f in FUSED_ORBITS.fields if f.name not in ("window_start", "window_end", "epoch", "fit_start",
                                                                "run_id")] + [
    T.StructField("window_start_unix", T.DoubleType(), False), T.StructField("window_end_unix", T.DoubleType(), False)]

# One detected manoeuvre per (object, event-time arc window whose fit detected it, burn in that window): the
# bracket of the burn time, the estimated impulsive delta-v on the pre-burn orbit's radial / along-track /
# cross-track axes (m/s), the test that detected it, and the fused orbit re-fitted from the observations after it
# (sda.orbit.manoeuvre.detection; docs/orbital.md, "Manoeuvres").
MANOEUVRES = T.StructType(
    [
        T.StructField("norad_id", T.LongType(), False),
        T.StructField("window_start", T.TimestampType(), False),
        T.StructField("seq", T.LongType(), False),  # the window's burns in time order: 0, 1, ...
        # names the detection: (norad_id, window, seq, bracket); a refit with later passes keeps it
        T.StructField("manoeuvre_id", T.StringType(), False),
        T.StructField("burn_after", T.TimestampType(), False),  # the bracket: the burn is after this ...
        T.StructField("burn_before", T.TimestampType(), False),  # ... and not after this
        T.StructField("burn_time", T.TimestampType(), False),  # the estimate, inside the bracket
    ]
    + [T.StructField(c, T.DoubleType()) for c in ("dv_r_ms", "dv_t_ms", "dv_n_ms", "dv_ms", "dv_sigma_ms")]
    + [
        T.StructField("statistic", T.DoubleType(), False),  # the passes' summed normalised innovations d^2
        T.StructField("dof", T.LongType(), False),  # its degrees of freedom (measurement components)
        T.StructField("log10_p", T.DoubleType(), False),  # log10 of its chi-square tail probability
        T.StructField("passes", T.LongType(), False),  # passes accumulated to detect it (1: one was enough)
        T.StructField("detected_at", T.TimestampType(), False),  # the last observation of the deciding pass
        T.StructField("observations_after", T.LongType(), False),  # fitted after the burn
        T.StructField("reassociated", T.LongType(), False),  # of those, held uncorrelated before
        T.StructField("fused_id", T.StringType(), False),  # the re-fitted orbit (gold fused_orbits)
        T.StructField("prior_fused_id", T.StringType()),  # the orbit the observations departed from
        T.StructField("regime", T.StringType()),
        T.StructField("run_id", T.StringType(), False),
    ]
)

# One row per move of an observation by the fuse stage's re-association (sda.pipeline.reassociation): decided
# again against the fused orbits of the windows before its own, it changed status or object. Keyed by a hash of
# (obs_id, from, to, basis), so a retried run logs nothing twice; ``round`` is the window's place in the run.
REASSOCIATIONS = T.StructType(
    [
        T.StructField("move_id", T.StringType(), False),
        T.StructField("obs_id", T.StringType(), False),
        T.StructField("window_start", T.TimestampType(), False),  # the observation's arc window
        T.StructField("from_status", T.StringType(), False),  # correlated | uncorrelated
        T.StructField("from_norad_id", T.LongType()),
        T.StructField("to_status", T.StringType(), False),
        T.StructField("to_norad_id", T.LongType()),
        T.StructField("reason", T.StringType(), False),
        T.StructField("round", T.LongType(), False),  # 1 for the run's first window decided again, 2 ...
        T.StructField("basis", T.StringType(), False),  # digest of the fused orbits it was decided against
        T.StructField("run_id", T.StringType(), False),
        T.StructField("event_time", T.TimestampType(), False),
        T.StructField("event_date", T.DateType(), False),
    ]
)

# One row per provisional object: an object in no catalogue that uncorrelated observations revealed, numbered in
# the analyst range (sda.pipeline.provisional; docs/acquisition.md, "What a new object becomes"). ``status``:
# active (in the catalogue: correlated and screened), retired (no observation for a while: out of both), merged
# (found to be the catalogued ``merged_into``: its observations moved there). Every row stays: the history of
# what was acquired.
PROVISIONAL_OBJECTS = T.StructType(
    [
        T.StructField("norad_id", T.LongType(), False),  # 80000-89999
        T.StructField("founder", T.StringType(), False),  # its earliest observation's obs_id: the number's seed
        T.StructField("status", T.StringType(), False),
        T.StructField("first_obs", T.TimestampType(), False),
        T.StructField("acquired_epoch", T.TimestampType(), False),  # the acquisition fit's epoch (last observation)
        T.StructField("observations", T.LongType(), False),  # what the acquisition fit kept
        T.StructField("passes", T.LongType(), False),
        T.StructField("rms", T.DoubleType(), False),
        T.StructField("sigma_pos_m", T.DoubleType()),  # 3-D position sigma of the acquisition fit at its epoch
        T.StructField("regime", T.StringType()),
        T.StructField("last_seen", T.TimestampType(), False),  # newest observation correlated to it
        T.StructField("merged_into", T.LongType()),
        T.StructField("status_reason", T.StringType()),
        T.StructField("acquired_run_id", T.StringType(), False),
        T.StructField("run_id", T.StringType(), False),  # the run that last changed the row
    ]
)

# --- conjunctions and alerts (conjunction) ----------------------------------------------------------

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
        # the probability that the miss is under settings.alert_distance_km (the pair's covariance) and the alert
        # rules that fired: pc, miss_distance, miss_probability, comma-separated (sda.alerts.assessment.judge;
        # null: none fired, or a row from before the columns)
        T.StructField("miss_probability", T.DoubleType()),
        T.StructField("alert_rule", T.StringType()),
    ]
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
    # as in conjunctions; null in rows from before the columns
    T.StructField("miss_probability", T.DoubleType()),
    T.StructField("alert_rule", T.StringType()),
    # a fused object's density-forecast terms at TCA (CARA's DCP, the CDM's "COMMENT DCP ..." lines): the relative
    # 1-sigma density forecast error and the state's sensitivity to it on its RTN axes (m, m/s; 6 values); null
    # for an object without a fused orbit. Both present: the Pc is on the pair's covariance (sda.orbit.pair_covariance)
    T.StructField("p_dcp_sigma", T.DoubleType()),
    T.StructField("p_dcp_rtn", T.ArrayType(T.DoubleType(), False)),
    T.StructField("s_dcp_sigma", T.DoubleType()),
    T.StructField("s_dcp_rtn", T.ArrayType(T.DoubleType(), False)),
]

ALERT = T.StructType(_ALERT_STATE + [T.StructField("first_run_id", T.StringType(), False)])

ALERT_EVENTS = T.StructType(list(_ALERT_STATE))
