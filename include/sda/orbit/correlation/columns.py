"""What the correlator reads of an observation and writes of it: the columns, the residuals by
sensor kind, and the reasons an observation stays uncorrelated."""

from __future__ import annotations

REASON_NO_CANDIDATE = "no catalogue object inside the gate"
REASON_NOT_PROPAGATED = "no catalogue object could be propagated to the observation time"
REASON_INCOMPLETE = "measurement incomplete for its sensor kind"
REASON_UNKNOWN_KIND = "unknown sensor kind"
REASON_UNDECIDED = "cross-tag: the two likeliest catalogue objects within 10x of each other; not associated"

# What correlate_frame reads of an observation (``bronze_id``: a radar frame's detections are decided together).
OBSERVATION_COLUMNS = ["obs_id", "sensor_id", "sensor_kind", "event_time", "bronze_id", "range_m", "az_rad", "el_rad",
                       "range_rate_ms", "ra_rad", "dec_rad", "x_m", "y_m", "z_m", "site_lat_deg", "site_lon_deg",
                       "site_alt_m"]
REQUIRED = {
    "radar": ("range_m", "az_rad", "el_rad", "site_lat_deg", "site_lon_deg", "site_alt_m"),
    "optical": ("ra_rad", "dec_rad", "site_lat_deg", "site_lon_deg", "site_alt_m"),
    "isl": ("x_m", "y_m", "z_m"),
}

# Signed per-measurement residuals (observed - predicted) of the associated object, by sensor kind;
# null for the other kinds' measurements (and range-rate when the radar did not report one).
RESIDUALS = {
    "radar": ("residual_range_m", "residual_az_rad", "residual_el_rad", "residual_range_rate_ms"),
    "optical": ("residual_ra_rad", "residual_dec_rad"),
    "isl": ("residual_radial_m", "residual_along_m", "residual_cross_m"),
}
RESIDUAL_COLUMNS = tuple(c for cols in RESIDUALS.values() for c in cols)

RESULT_COLUMNS = {
    "obs_id": "object",
    "status": "object",  # correlated | uncorrelated
    "norad_id": "Int64",
    "residual_m": "float64",
    "candidates": "int32",
    "ambiguous": "bool",
    "reason": "object",
    "nearest_norad_id": "Int64",
    "nearest_residual_m": "float64",
    "gate_d2": "float64",  # the associated object's normalised statistic d2
    "nearest_gate_d2": "float64",  # the named near miss's d2
    **{c: "float64" for c in RESIDUAL_COLUMNS},
}
