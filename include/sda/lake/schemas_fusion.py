"""Schemas of the fusion stage's gold table (``fused_orbits``, jobs/fuse.py, sda.orbit.fusion.arcs)."""

from __future__ import annotations

from pyspark.sql import types as T

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

# One row per provisional object: an object in no catalogue that uncorrelated observations revealed, numbered in
# the analyst range (sda.pipeline.provisional; docs/orbital.md, "New objects"). ``status``: active (in the
# catalogue: correlated and screened), retired (no observation for a while: out of both), merged (found to be the
# catalogued ``merged_into``: its observations moved there). Every row stays: the history of what was acquired.
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
