"""The data-quality suites: what a space-domain-awareness analyst expects of each table, declared once.

A suite is a list of :class:`Check`. Each check carries

* a stable ``name`` (unique in its suite: the ``expectation`` column of ``ops/data_quality``),
* our own ``severity``:

  - ``warn``: recorded (table + Data Docs), nothing else happens;
  - ``quarantine``: the rows that break it are removed from the frame passed on and written to
    ``ops/quarantine`` with the check as reason (per-row checks only);
  - ``fail``: the batch as a whole is unusable -- the gate fails and the caller must not publish;

* the Great Expectations expectation (class + kwargs) that decides success and counts the
  unexpected rows, with the severity mapped to GX's ``FailureSeverity`` (fail -> critical,
  quarantine -> warning, warn -> info) and repeated in ``meta`` so Data Docs shows both;
* for ``quarantine`` checks, ``row_ok``: the same condition as a Spark column, used to *select*
  the failing rows (GX only counts them; collecting unexpected ids through GX would pull them all
  to the driver). GX ignores nulls in column-map expectations, and so does ``row_ok``.

Some checks compare a row with something that is not a column of the table (the site's elevation
mask, ingest time + clock skew, the size of the batch...). :func:`derive` adds those as ``_q_*``
helper columns before validation; they never leave :mod:`sda.quality.gates`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sda.lake.tables import TABLES
from sda.transforms import envelope

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

    from sda.config.settings import Settings

SEVERITIES = ("warn", "quarantine", "fail")
GX_SEVERITY = {"fail": "critical", "quarantine": "warning", "warn": "info"}  # FailureSeverity values

# Below this share of correlated observations in a batch, the catalogue (or the sensors' calibration)
# is likely stale: recorded as a warning, the data itself is not wrong.
MIN_CORRELATED_FRACTION = 0.8
EARTH_RADIUS_M = envelope.MIN_ORBIT_RADIUS_KM * 1000.0
MAX_ORBIT_RADIUS_M = envelope.MAX_RANGE_KM * 1000.0
MAX_RANGE_RATE_MS = envelope.MAX_RANGE_RATE_KM_S * 1000.0
# radians round-trip through degrees: an elevation exactly on the mask must not hinge on the last bit
EL_MASK_EPS_RAD = 1e-9

HELPER_PREFIX = "_q_"


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    severity: str
    gx_type: str  # GX expectation class name in great_expectations.expectations
    kwargs: dict[str, Any]
    description: str
    column: str | None = None
    row_ok: Callable[[], "Column"] | None = None  # quarantine checks: True (or null) where the row passes

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"check {self.name}: severity {self.severity!r} not in {SEVERITIES}")
        if self.severity == "quarantine" and self.row_ok is None:
            raise ValueError(f"check {self.name}: a quarantine check needs a per-row predicate")

    def expectation(self):
        """The GX expectation object (severity + our metadata attached)."""
        import great_expectations as gx
        from great_expectations.expectations.metadata_types import FailureSeverity

        cls = getattr(gx.expectations, self.gx_type)
        return cls(
            **self.kwargs,
            severity=FailureSeverity(GX_SEVERITY[self.severity]),
            meta={"sda_check": self.name, "sda_severity": self.severity, "gx_severity": GX_SEVERITY[self.severity],
                  "description": self.description},
            notes=f"[{self.severity}] {self.description}",
        )


# --- check builders (GX kwargs and Spark predicate from the same parameters) ----------------------

def _F():
    from pyspark.sql import functions as F

    return F


def between(name: str, column: str, severity: str, description: str, min_value: float | None = None,
            max_value: float | None = None, strict_min: bool = False, strict_max: bool = False) -> Check:
    kwargs: dict[str, Any] = {"column": column}
    if min_value is not None:
        kwargs.update(min_value=min_value, strict_min=strict_min)
    if max_value is not None:
        kwargs.update(max_value=max_value, strict_max=strict_max)

    def ok():
        c = _F().col(column)
        cond = _F().lit(True)
        if min_value is not None:
            cond = cond & ((c > min_value) if strict_min else (c >= min_value))
        if max_value is not None:
            cond = cond & ((c < max_value) if strict_max else (c <= max_value))
        return c.isNull() | cond

    return Check(name, severity, "ExpectColumnValuesToBeBetween", kwargs, description, column, ok)


def in_set(name: str, column: str, values: list[str], severity: str, description: str) -> Check:
    def ok():
        c = _F().col(column)
        return c.isNull() | c.isin(*values)

    return Check(name, severity, "ExpectColumnValuesToBeInSet", {"column": column, "value_set": list(values)},
                 description, column, ok)


def a_at_least_b(name: str, a: str, b: str, severity: str, description: str) -> Check:
    def ok():
        F = _F()
        return F.col(a).isNull() | F.col(b).isNull() | (F.col(a) >= F.col(b))

    return Check(name, severity, "ExpectColumnPairValuesAToBeGreaterThanB",
                 {"column_A": a, "column_B": b, "or_equal": True, "ignore_row_if": "either_value_is_missing"},
                 description, a, ok)


def non_empty(name: str, column: str, severity: str, description: str) -> Check:
    def ok():
        c = _F().col(column)
        return c.isNull() | (_F().length(c) >= 1)

    return Check(name, severity, "ExpectColumnValueLengthsToBeBetween", {"column": column, "min_value": 1},
                 description, column, ok)


def not_null(columns: list[str], severity: str = "fail") -> list[Check]:
    return [Check(f"{c}_not_null", severity, "ExpectColumnValuesToNotBeNull", {"column": c},
                  f"{c} is never null", c) for c in columns]


def unique(column: str, severity: str, description: str) -> Check:
    return Check(f"{column}_unique", severity, "ExpectColumnValuesToBeUnique", {"column": column}, description, column)


def schema_checks(table: str) -> list[Check]:
    """Columns present (extra helper columns allowed) and each with its declared Spark type."""
    schema = TABLES[table].schema
    checks = [Check("schema_columns_present", "fail", "ExpectTableColumnsToMatchSet",
                    {"column_set": [f.name for f in schema.fields], "exact_match": False},
                    f"every column of the {table} schema is present")]
    checks += [Check(f"{f.name}_type", "fail", "ExpectColumnValuesToBeOfType",
                     {"column": f.name, "type_": type(f.dataType).__name__},
                     f"{f.name} is a {type(f.dataType).__name__}", f.name) for f in schema.fields]
    return checks


# --- suites ---------------------------------------------------------------------------------------

def _bronze(table: str, kind: str) -> list[Check]:
    return [
        *schema_checks(table),
        *not_null(["bronze_id", "sensor_kind", "source_file", "record_no", "payload", "ingest_time", "run_id"]),
        # a row of another kind in this table is an ingest routing bug: every count downstream is suspect
        in_set("sensor_kind_matches_table", "sensor_kind", [kind], "fail", f"only {kind} records in {table}"),
        # a space-weather file's blank lines are records too (bronze keeps the whole file, line by line)
        *([] if kind == "space_weather" else
          [non_empty("payload_non_empty", "payload", "quarantine", "the raw record has at least one character")]),
        # bronze_id is sha256(file, record no): a repeat means a file was appended twice. normalize
        # collapses copies (same obs_id), so the data stays right: record it, do not stop the run.
        unique("bronze_id", "warn", "each landed record is appended once"),
    ]


def _observation_checks(table: str, settings: "Settings") -> list[Check]:
    return [
        *schema_checks(table),
        *not_null(["obs_id", "sensor_id", "sensor_kind", "event_time", "event_date", "ingest_time", "bronze_id",
                   "run_id"]),
        # obs_id is the table's MERGE key (a content hash): a repeat means the idempotent write broke
        unique("obs_id", "fail", "one row per observation (the table's key)"),
        in_set("sensor_kind_known", "sensor_kind", ["radar", "optical", "isl"], "quarantine", "a known sensor kind"),
        between("range_m_positive", "range_m", "quarantine", "radar range is positive", min_value=0.0, strict_min=True),
        a_at_least_b("el_above_site_mask", "el_rad", "_q_min_el_rad", "quarantine",
                     "radar elevation at or above the reporting site's elevation mask"),
        between("range_rate_physical", "range_rate_ms", "quarantine",
                f"|range rate| below {MAX_RANGE_RATE_MS:.0f} m/s (Earth escape speed at LEO)",
                min_value=-MAX_RANGE_RATE_MS, max_value=MAX_RANGE_RATE_MS, strict_min=True, strict_max=True),
        between("dec_in_range", "dec_rad", "quarantine", "declination in [-pi/2, pi/2]",
                min_value=-math.pi / 2, max_value=math.pi / 2),
        between("ra_in_range", "ra_rad", "quarantine", "right ascension in [0, 2pi)",
                min_value=0.0, max_value=2 * math.pi, strict_max=True),
        between("isl_radius_physical", "_q_isl_radius_m", "quarantine",
                "ISL state vector radius between the Earth's surface (6,378 km) and 100,000 km",
                min_value=EARTH_RADIUS_M, max_value=MAX_ORBIT_RADIUS_M),
        between("event_time_not_future", "_q_event_lead_s", "quarantine",
                f"event time at most clock_skew_s={settings.clock_skew_s:g} s after ingest time",
                max_value=settings.clock_skew_s),
    ]


def _space_weather() -> list[Check]:
    return [
        *schema_checks("space_weather"),
        *not_null(["interval_start", "kp", "ap", "observed", "issued", "source_file", "run_id"]),
        unique("interval_start", "fail", "one row per 3-hour interval (the table's key)"),
        between("kp_in_range", "kp", "quarantine", "Kp in [0, 9]", min_value=0.0, max_value=9.0),
        between("ap_in_range", "ap", "quarantine", "ap in [0, 400]", min_value=0, max_value=400),
        between("f107_obs_non_negative", "f107_obs", "quarantine", "the observed solar flux is not negative",
                min_value=0.0),
        in_set("section_daily", "section", ["OBSERVED", "DAILY_PREDICTED"], "quarantine",
               "intervals come from the daily sections"),
        between("observed_as_issued", "_q_observed_mismatch", "quarantine",
                "observed exactly when the interval had ended by the issue time", max_value=0),
    ]


def _correlated(settings: "Settings") -> list[Check]:
    return [
        *schema_checks("correlated"),
        *not_null(["obs_id", "sensor_id", "event_time", "norad_id", "residual_m", "correlate_run_id"]),
        unique("obs_id", "fail", "one association per observation (the table's key)"),
        between("residual_m_non_negative", "residual_m", "quarantine", "a position residual is a distance (>= 0)",
                min_value=0.0),
        between("residual_inside_gate", "residual_m", "warn",
                f"residual inside the correlation gate ({settings.correlation_gate_km:g} km)",
                max_value=settings.correlation_gate_km * 1000.0),
        between("candidates_positive", "candidates", "quarantine", "at least the associated object is a candidate",
                min_value=1),
        Check("correlated_fraction", "warn", "ExpectColumnMinToBeBetween",
              {"column": "_q_correlated_fraction", "min_value": MIN_CORRELATED_FRACTION},
              f"correlated / (correlated + uncorrelated) of the batch >= {MIN_CORRELATED_FRACTION:g}",
              "_q_correlated_fraction"),
    ]


def _uncorrelated() -> list[Check]:
    return [
        *schema_checks("uncorrelated"),
        *not_null(["obs_id", "sensor_id", "event_time", "reason", "correlate_run_id"]),
        unique("obs_id", "fail", "one row per observation (the table's key)"),
        between("nearest_residual_non_negative", "nearest_residual_m", "quarantine", "a residual is a distance",
                min_value=0.0),
    ]


def _conjunction_checks(table: str, settings: "Settings") -> list[Check]:
    horizon_s = settings.screening_horizon_h * 3600.0
    return [
        *schema_checks(table),
        *not_null(["event_id", "primary_id", "secondary_id", "screen_start", "tca", "miss_m", "run_id"]),
        between("miss_m_within_threshold", "miss_m", "quarantine",
                f"miss distance in [0, screening threshold {settings.screening_threshold_km:g} km]",
                min_value=0.0, max_value=settings.screening_threshold_km * 1000.0),
        between("tca_in_screening_window", "_q_tca_offset_s", "quarantine",
                f"TCA inside [screen_start, screen_start + {settings.screening_horizon_h:g} h]",
                min_value=0.0, max_value=horizon_s),
        between("rel_speed_non_negative", "rel_speed_ms", "quarantine", "relative speed is a magnitude (>= 0)",
                min_value=0.0),
        # Pc (sda.alerts.assessment): null where the 2-D method is invalid (GX and row_ok ignore nulls)
        between("pc_is_probability", "pc", "quarantine", "Pc in [0, 1]", min_value=0.0, max_value=1.0),
        *not_null(["pc_valid", "level"]),
    ]


def _alert_checks(table: str, settings: "Settings", key: Check, level_description: str) -> list[Check]:
    """gold alerts and alert_events: the conjunction's checks, the alert's columns, its key, level and status."""
    return [
        *_conjunction_checks(table, settings),
        *not_null(["alert_id", "version", "status", "content_hash", "cdm_file", "json_file"]),
        key,
        in_set("level_known", "level", ["red", "yellow", "none"], "quarantine", level_description),
        in_set("status_known", "status", ["new", "updated", "closed"], "quarantine",
               "alert status is new, updated or closed"),
        between("version_positive", "version", "quarantine", "versions count from 1", min_value=1),
    ]


def suite_checks(table: str, settings: "Settings", columns: list[str] | None = None) -> list[Check]:
    """The checks of ``table``'s suite. ``columns`` (the frame's columns) switches on optional ones."""
    columns = columns or []
    bronze_kinds = {"radar_frames": "radar", "optical_tracks": "optical", "isl_beacons": "isl", "tdm_messages": "tdm",
                    "space_weather_lines": "space_weather"}
    if table in bronze_kinds:
        checks = _bronze(table, bronze_kinds[table])
    elif table == "observations":
        checks = _observation_checks(table, settings)
    elif table == "observations_dedup":
        checks = _observation_checks(table, settings) + [
            between("copies_positive", "copies", "quarantine", "an observation stands for at least itself", min_value=1)
        ]
    elif table == "space_weather":
        checks = _space_weather()
    elif table == "correlated":
        checks = _correlated(settings)
    elif table == "uncorrelated":
        checks = _uncorrelated()
    elif table == "conjunctions":
        checks = [
            *_conjunction_checks(table, settings),
            unique("event_id", "fail", "one row per event (the key)"),
            in_set("level_known", "level", ["red", "yellow", "none"], "quarantine", "level is red, yellow or none"),
        ]
    elif table == "alerts":
        # screen_start is that of the screening the row's values come from (kept when an alert is closed
        # after its TCA or not found again), so the TCA-in-window check holds for closed alerts too
        checks = _alert_checks(table, settings, unique("alert_id", "fail", "one row per alert (the key)"),
                               "alert level is red or yellow (none only once closed)")
    elif table == "alert_events":
        # one row per emitted change (key alert_id + version; GX has no two-column uniqueness check here)
        checks = _alert_checks(table, settings, unique("cdm_file", "fail", "one row per emitted CDM (each (alert_id, "
                                                       "version) has its own file)"),
                               "alert level is red, yellow or none")
    else:
        raise KeyError(f"no data-quality suite for table {table!r}; suites exist for {', '.join(SUITE_TABLES)}")
    names = [c.name for c in checks]
    assert len(names) == len(set(names)), f"duplicate check names in {table}"
    return checks


SUITE_TABLES = ("radar_frames", "optical_tracks", "isl_beacons", "tdm_messages", "space_weather_lines", "observations",
                "observations_dedup", "space_weather", "correlated", "uncorrelated", "conjunctions", "alerts",
                "alert_events")


# --- helper columns -------------------------------------------------------------------------------

def derive(spark: "SparkSession", settings: "Settings", table: str, df: "DataFrame",
           uncorrelated_count: int | None = None) -> "DataFrame":
    """``df`` plus the ``_q_*`` columns its suite compares against.

    * ``_q_min_el_rad``: the reporting site's elevation mask (sensor registry, broadcast join on
      sensor_id). A sensor missing from the registry falls back to 0 rad -- the geometric horizon, below
      which no ground sensor sees anything -- rather than to the lowest mask of the network, which
      would let a Cape Cod detection at 1.5 deg pass because Eglin's mask is 1 deg.
    * ``_q_event_lead_s``: event time minus ingest time, seconds (late data is fine, future is not).
    * ``_q_isl_radius_m``: |r| of ISL state vectors (null for other kinds).
    * ``_q_tca_offset_s``: TCA minus screening start, seconds.
    * ``_q_correlated_fraction``: the batch's correlated share, one value on every row.
    * ``_q_observed_mismatch``: 1 where a space-weather interval's ``observed`` disagrees with its end
      and issue time (observed = ended by the issue), else 0.
    """
    from pyspark.sql import functions as F

    c = F.col
    cols = set(df.columns)
    if {"el_rad", "sensor_id"} <= cols:
        from sda.transforms.envelope import sensors_frame

        masks = sensors_frame(spark).select("sensor_id", F.radians(c("min_el_deg")).alias("_q_site_mask"))
        df = (df.join(F.broadcast(masks), on="sensor_id", how="left")
              .withColumn("_q_min_el_rad", F.coalesce(c("_q_site_mask"), F.lit(0.0)) - F.lit(EL_MASK_EPS_RAD))
              .drop("_q_site_mask"))
    if {"event_time", "ingest_time"} <= cols:
        df = df.withColumn("_q_event_lead_s", (F.unix_micros(c("event_time")) - F.unix_micros(c("ingest_time"))) / 1e6)
    if {"x_m", "y_m", "z_m", "sensor_kind"} <= cols:
        df = df.withColumn("_q_isl_radius_m", F.when(
            c("sensor_kind") == "isl", F.sqrt(c("x_m") ** 2 + c("y_m") ** 2 + c("z_m") ** 2)))
    if {"tca", "screen_start"} <= cols:
        df = df.withColumn("_q_tca_offset_s", (F.unix_micros(c("tca")) - F.unix_micros(c("screen_start"))) / 1e6)
    if {"interval_end", "issued", "observed"} <= cols:
        df = df.withColumn("_q_observed_mismatch", ((c("interval_end") <= c("issued")) != c("observed")).cast("int"))
    if table == "correlated":
        n = df.count()
        total = n + (uncorrelated_count or 0)
        df = df.withColumn("_q_correlated_fraction", F.lit(n / total if total else 1.0).cast("double"))
    return df
