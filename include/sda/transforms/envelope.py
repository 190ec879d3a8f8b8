"""The observation envelope: normalize's and dedup's pure transforms (``DataFrame -> DataFrame``).

normalize: :func:`sda.transforms.wire.parse_bronze` -> :func:`validate` (registry join, physical limits) ->
:func:`to_measurements` (the silver envelope: SI units, deterministic ``obs_id``; a refused row keeps its
reason and payload) -> the good rows to silver, the refused ones through :func:`to_quarantine`.

dedup: :func:`cluster` groups near-duplicate observations of one sensor (same measurement reported
twice: re-sent frames, overlapping archive files) and flags each group's representative (``is_rep``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sda.orbit.sensors import Sensor, load_sensors
from sda.transforms import wire

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from pyspark.sql import Column, DataFrame

# --- physical limits (wire units) -------------------------------------------------------------------
MAX_RANGE_KM = 100_000.0  # well beyond GEO (35,786 km): anything further is not an Earth orbiter
MAX_RANGE_RATE_KM_S = 12.0  # above Earth escape speed at LEO altitude
MIN_ORBIT_RADIUS_KM = 6_378.0  # inside the Earth
MAX_SPEED_KM_S = 12.0

# --- near-duplicates (dedup) ------------------------------------------------------------------------
# Radar frames come every 10 s and one pass yields many *genuine* detections of the same object a few
# seconds apart; a repeated report of one measurement differs only by timestamp rounding (ms) or
# re-stamping. 0.1 s is far below any frame/exposure cadence and far above rounding, so two reports
# of one sensor closer than this and within the tolerances below are the same measurement.
NEAR_DUP_MAX_DT_S = 0.1
# A few sigma of each sensor type's noise (radar ~20-30 m and 0.015 deg, GEODSS ~1 arcsec, ISL 50 m):
# two independent measurements hardly ever agree this closely *and* within 0.1 s.
RADAR_RANGE_TOL_M = 100.0
RADAR_ANGLE_TOL_RAD = math.radians(0.05)
OPTICAL_SEP_TOL_RAD = math.radians(5.0 / 3600.0)
ISL_POS_TOL_M = 500.0
# dedup clusters a sensor's observations an hour at a time, so Python holds one hour of one sensor, not
# a whole batch of it (a day of a radar: ~500,000 whole rows). Each hour also gets the minute either
# side: a group of near-duplicates across an hour boundary is then seen whole from both hours, and
# each row comes out of its own hour only. A chain of copies longer than that minute would already be
# cut by an incremental run's scope (one dedup window either side of the new rows).
CLUSTER_CHUNK_S = 3600
CLUSTER_HALO_S = 60

_SITE_COLUMNS = ("registered_kind", "site_lat_deg", "site_lon_deg", "site_alt_m", "min_el_deg")


def quarantine_id(stage: str, *parts: "Column") -> "Column":
    """sha256 of ``stage:part:part...`` -- the quarantine key (ingest computes the same in Python)."""
    from pyspark.sql import functions as F

    return F.sha2(F.concat_ws(":", F.lit(stage), *[F.coalesce(p.cast("string"), F.lit("-")) for p in parts]), 256)


def _first_error(checks: list[tuple["Column", "Column | str"]]) -> "Column":
    from pyspark.sql import functions as F

    out = F.lit(None).cast("string")
    for failed, message in reversed(checks):
        out = F.when(failed, message if not isinstance(message, str) else F.lit(message)).otherwise(out)
    return out


# --- normalize ----------------------------------------------------------------------------------------

def sensors_frame(spark, sensors: dict[str, Sensor] | None = None):
    """The registry as a small Spark DataFrame (for broadcast joins)."""
    import dataclasses

    from pyspark.sql import types as T

    sensors = sensors or load_sensors()
    schema = T.StructType(
        [T.StructField(f.name, T.StringType() if f.name in ("sensor_id", "kind", "name") else T.DoubleType())
         for f in dataclasses.fields(Sensor)]
    )
    rows = [tuple(getattr(s, f.name) for f in dataclasses.fields(Sensor)) for s in sensors.values()]
    return spark.createDataFrame(rows, schema)


def registry_columns(sensors: "DataFrame") -> "DataFrame":
    """The sensor registry as the few columns normalize joins (``sensors_frame`` -> join input)."""
    from pyspark.sql import functions as F

    return sensors.select(
        "sensor_id",
        F.col("kind").alias("registered_kind"),
        F.col("lat_deg").alias("site_lat_deg"),
        F.col("lon_deg").alias("site_lon_deg"),
        F.col("alt_m").alias("site_alt_m"),
        "min_el_deg",
    )


def validate(parsed: "DataFrame", sensors: "DataFrame", clock_skew_s: float,
             allowed_lateness_s: float | None = None) -> "DataFrame":
    """Parsed measurements + site columns + ``reason`` (null when the measurement is acceptable).

    ``sensors`` is :func:`registry_columns` output; it is a dozen rows, so it is broadcast.
    An event time more than ``clock_skew_s`` after its ingest time is from a wrong clock; one more than
    ``allowed_lateness_s`` before it (when given) arrived too late to be accepted.
    """
    from pyspark.sql import functions as F

    c = F.col
    rng_km = F.sqrt(c("x_m") ** 2 + c("y_m") ** 2 + c("z_m") ** 2) / 1000.0
    speed_km_s = F.sqrt(c("vx_ms") ** 2 + c("vy_ms") ** 2 + c("vz_ms") ** 2) / 1000.0
    radar, optical, isl = (c("sensor_kind") == k for k in ("radar", "optical", "isl"))
    checks = [
        (c("parse_error").isNotNull(), c("parse_error")),
        (c("registered_kind").isNull(), F.format_string("unknown sensor id %s", c("sensor_id"))),
        (c("registered_kind") != c("sensor_kind"),
         F.format_string("sensor %s is a %s sensor but reported in %s format",
                         c("sensor_id"), c("registered_kind"), c("sensor_kind"))),
        (radar & ((c("range_km") <= 0) | (c("range_km") > MAX_RANGE_KM)),
         F.format_string("range %s km outside (0, 100000]", c("range_km"))),
        (radar & ((c("el_deg") < -90) | (c("el_deg") > 90)),
         F.format_string("elevation %s deg outside [-90, 90]", c("el_deg"))),
        (radar & (c("el_deg") < c("min_el_deg")),
         F.format_string("elevation %s deg below the site minimum %s deg", c("el_deg"), c("min_el_deg"))),
        (radar & ((c("az_deg") < 0) | (c("az_deg") >= 360)),
         F.format_string("azimuth %s deg outside [0, 360)", c("az_deg"))),
        (radar & (F.abs(c("rr_km_s")) > MAX_RANGE_RATE_KM_S),
         F.format_string("range rate %s km/s beyond 12 km/s", c("rr_km_s"))),
        (optical & ((c("dec_deg") < -90) | (c("dec_deg") > 90)),
         F.format_string("declination %s deg outside [-90, 90]", c("dec_deg"))),
        (optical & ((c("ra_hours") < 0) | (c("ra_hours") >= 24)),
         F.format_string("right ascension %s h outside [0, 24)", c("ra_hours"))),
        (isl & ((rng_km < MIN_ORBIT_RADIUS_KM) | (rng_km > MAX_RANGE_KM)),
         F.format_string("position magnitude %.3f km outside [6378, 100000]", rng_km)),
        (isl & (speed_km_s > MAX_SPEED_KM_S), F.format_string("speed %.3f km/s beyond 12 km/s", speed_km_s)),
        (c("event_time") > c("ingest_time") + F.make_dt_interval(secs=F.lit(clock_skew_s)),
         F.format_string("event time %s is more than %s s after ingest time %s",
                         c("event_time").cast("string"), F.lit(clock_skew_s), c("ingest_time").cast("string"))),
    ]
    if allowed_lateness_s is not None:
        checks.append((
            c("event_time") < c("ingest_time") - F.make_dt_interval(secs=F.lit(allowed_lateness_s)),
            F.format_string("event time %s is more than the allowed lateness of %s s before ingest time %s",
                            c("event_time").cast("string"), F.lit(allowed_lateness_s), c("ingest_time").cast("string")),
        ))
    joined = parsed.join(F.broadcast(sensors), on="sensor_id", how="left")
    return joined.select(*parsed.columns, *_SITE_COLUMNS, _first_error(checks).alias("reason"))


def obs_id(sensor_id: "Column", kind: "Column", event_time: "Column", values: list["Column"]) -> "Column":
    """sha256(sensor, kind, event time in microseconds, the wire values): redelivered copies of one
    measurement -- the same frame sent twice, the same row in two archive files -- get the same id,
    whatever file, frame number or send time carried them. Wire values, not SI, so the id does not
    depend on how this code converts units."""
    from pyspark.sql import functions as F

    parts = [sensor_id, kind, F.unix_micros(event_time).cast("string")]
    parts += [F.coalesce(v.cast("string"), F.lit("")) for v in values]
    return F.sha2(F.concat_ws("|", *parts), 256)


def to_measurements(checked: "DataFrame", run_id: str) -> "DataFrame":
    """Every measurement of a ``validate`` output, accepted or not, in one frame: the silver envelope
    (SI units; obs_id null where refused) plus what :func:`to_quarantine` keeps of a refused one
    (``reason``, ``record_no``, ``item_no``, and ``payload``, which only a refused one keeps: a radar
    frame's payload would otherwise be carried once per detection). normalize caches this one frame
    instead of the validated rows and the observations both."""
    from pyspark.sql import functions as F

    c = F.col
    deg = math.pi / 180.0
    refused = c("reason").isNotNull()
    return checked.select(
        F.when(~refused, obs_id(c("sensor_id"), c("sensor_kind"), c("event_time"),
                                [c(m) for m in wire.MEASUREMENT_COLUMNS])).alias("obs_id"),
        "sensor_id",
        "sensor_kind",
        "event_time",
        F.to_date("event_time").alias("event_date"),
        "ingest_time",
        "ingest_batch",
        (c("range_km") * 1000.0).alias("range_m"),
        (c("az_deg") * deg).alias("az_rad"),
        (c("el_deg") * deg).alias("el_rad"),
        (c("rr_km_s") * 1000.0).alias("range_rate_ms"),
        (c("ra_hours") * (math.pi / 12.0)).alias("ra_rad"),
        (c("dec_deg") * deg).alias("dec_rad"),
        *[c(v) for v in ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms")],
        "site_lat_deg",
        "site_lon_deg",
        "site_alt_m",
        "bronze_id",
        "source_file",
        F.lit(run_id).alias("run_id"),
        "reason",
        "record_no",
        "item_no",
        F.when(refused, c("payload")).alias("payload"),
    )


def to_quarantine(refused: "DataFrame", stage: str, run_id: str) -> "DataFrame":
    """Refused measurements (:func:`to_measurements` rows with a ``reason``) -> quarantine rows.

    Keyed by (stage, bronze record, detection): one bad detection of a radar frame is one row, and a
    rerun writes the same keys again.
    """
    from pyspark.sql import functions as F

    return refused.select(
        quarantine_id(stage, F.col("bronze_id"), F.col("item_no")).alias("quarantine_id"),
        F.lit(stage).alias("stage"),
        "reason",
        "sensor_kind",
        "source_file",
        "record_no",
        "item_no",
        "bronze_id",
        F.col("payload").cast("binary").alias("raw"),
        F.current_timestamp().alias("quarantine_time"),
        F.lit(run_id).alias("run_id"),
    )


# --- dedup --------------------------------------------------------------------------------------------

def window_index(event_time: "Column", window_s: float) -> "Column":
    """Fixed event-time window number (``window_s`` wide, aligned on the unix epoch)."""
    from pyspark.sql import functions as F

    return F.floor(F.unix_micros(event_time) / F.lit(int(round(window_s * 1e6)))).cast("long")


def neighbour_windows(window_s: float) -> int:
    """How many windows either side can hold a near-duplicate of a row in a given window."""
    return max(1, math.ceil(NEAR_DUP_MAX_DT_S / window_s))


_CLUSTER_INPUT = ("obs_id", "sensor_id", "sensor_kind", "event_us", "range_m", "az_rad", "el_rad",
                  "ra_rad", "dec_rad", "x_m", "y_m", "z_m")
CLUSTER_VALUES = _CLUSTER_INPUT[4:]  # the measured values "same measurement" compares (missing ones never match)


def same_measurement(kind: str, a: dict, b: dict) -> "np.ndarray":
    """Whether observation pairs ``(a[k], b[k])`` of one sensor of ``kind`` report the same measurement
    (element-wise over arrays of the wire columns; a missing value never matches)."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        if kind == "radar":
            daz = np.abs(a["az_rad"] - b["az_rad"]) % (2 * math.pi)
            daz = np.minimum(daz, 2 * math.pi - daz)  # 359.99 deg and 0.01 deg are neighbours
            return ((np.abs(a["range_m"] - b["range_m"]) <= RADAR_RANGE_TOL_M) & (daz <= RADAR_ANGLE_TOL_RAD)
                    & (np.abs(a["el_rad"] - b["el_rad"]) <= RADAR_ANGLE_TOL_RAD))
        if kind == "optical":
            # haversine: well conditioned for the arcsecond separations compared here
            h = (np.sin((b["dec_rad"] - a["dec_rad"]) / 2) ** 2
                 + np.cos(a["dec_rad"]) * np.cos(b["dec_rad"]) * np.sin((b["ra_rad"] - a["ra_rad"]) / 2) ** 2)
            return 2 * np.arcsin(np.minimum(1.0, np.sqrt(h))) <= OPTICAL_SEP_TOL_RAD
        d2 = sum((a[c] - b[c]) ** 2 for c in ("x_m", "y_m", "z_m"))
        return d2 <= ISL_POS_TOL_M ** 2


def near_duplicate_pairs(kind: str, event_us: "np.ndarray", values: dict) -> tuple["np.ndarray", "np.ndarray"]:
    """Index pairs (i < j) of one sensor's observations, sorted by event time, that are closer than
    ``NEAR_DUP_MAX_DT_S`` and report the same measurement. Vectorised by offset: pass k compares
    every row with the row k places later, and stops at the first k with no pair close enough in time
    (the times are sorted, so no larger offset has one either)."""
    import numpy as np

    max_dt_us = int(round(NEAR_DUP_MAX_DT_S * 1e6))
    firsts, seconds = [], []
    for k in range(1, len(event_us)):
        i = np.flatnonzero(event_us[k:] - event_us[:-k] <= max_dt_us)
        if not len(i):
            break
        j = i + k
        same = same_measurement(kind, {c: v[i] for c, v in values.items()}, {c: v[j] for c, v in values.items()})
        firsts.append(i[same])
        seconds.append(j[same])
    if not firsts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(firsts), np.concatenate(seconds)


def _components(pdf) -> tuple["np.ndarray", "np.ndarray", "np.ndarray"]:
    """Connected components of "same measurement" among one sensor's observations (union-find over
    :func:`near_duplicate_pairs`); each component's representative is its earliest observation, ties
    broken by the smallest obs_id. Returns, per row of ``pdf`` in its own order, the position of its
    representative, its component's size, and whether to keep it: with a boolean ``touched`` column,
    only the components with a touched member are kept."""
    import numpy as np

    order = np.lexsort((pdf["obs_id"].to_numpy(), pdf["event_us"].to_numpy(np.int64)))  # (event time, obs_id)
    event_us = pdf["event_us"].to_numpy(np.int64)[order]
    values = {c: pdf[c].to_numpy(dtype=float, na_value=np.nan)[order] for c in CLUSTER_VALUES}
    kinds = pdf["sensor_kind"].to_numpy()[order]
    parent = np.arange(len(pdf))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    # a sensor reports in one format (normalize checks it against the registry); rows of different
    # kinds never share the measured values compared, so each kind is paired on its own
    for kind in np.unique(kinds):
        rows = np.flatnonzero(kinds == kind)
        firsts, seconds = near_duplicate_pairs(str(kind), event_us[rows], {c: v[rows] for c, v in values.items()})
        for i, j in zip(rows[firsts].tolist(), rows[seconds].tolist()):
            ri, rj = root(i), root(j)
            # the lower position is earlier in (event time, obs_id) order: it stays the root
            parent[max(ri, rj)] = min(ri, rj)
    while True:  # every chain to its root (a parent is never after its child): pointer jumping
        grand = parent[parent]
        if np.array_equal(grand, parent):
            break
        parent = grand
    sizes = np.bincount(parent, minlength=len(pdf))
    keep = np.ones(len(pdf), dtype=bool)
    if "touched" in pdf:  # only the groups with a member flagged touched
        touched = pdf["touched"].to_numpy(dtype=float)[order]
        keep = (np.bincount(parent, weights=touched, minlength=len(pdf)) > 0)[parent]
    # back from sorted positions to the rows of pdf
    rep, copies, kept = (np.empty(len(pdf), dtype=np.int64), np.empty(len(pdf), dtype=np.int64),
                         np.empty(len(pdf), dtype=bool))
    rep[order], copies[order], kept[order] = order[parent], sizes[parent], keep
    return rep, copies, kept


def representatives(pdf) -> "np.ndarray":
    """Per row of one sensor's observations (``pdf``: the columns :func:`_components` reads), whether dedup keeps it:
    it is its group's representative (the group's earliest row). Without Spark, as the dedup stage decides."""
    import numpy as np

    rep, _, _ = _components(pdf)
    return rep == np.arange(len(pdf))


def _cluster_one_sensor_arrow(table):
    """:func:`_components` of one sensor's observations of one hour and its halo (an Arrow table of whole
    rows): the hour's own rows kept, each with its ``rep_obs_id`` and ``copies`` appended. The other
    columns pass through untouched (no conversion to pandas, no join back by obs_id)."""
    import pyarrow as pa

    inputs = [c for c in (*_CLUSTER_INPUT, "touched") if c in table.column_names]
    rep, copies, keep = _components(table.select(inputs).to_pandas())
    keep &= table.column("own").to_numpy(zero_copy_only=False)  # the neighbouring hours' rows only informed
    table = table.append_column("rep_obs_id", table.column("obs_id").take(pa.array(rep)))
    return table.append_column("copies", pa.array(copies, type=pa.int64())).filter(pa.array(keep))


def cluster(observations: "DataFrame") -> "DataFrame":
    """Observations (silver envelope) + ``rep_obs_id``, ``copies`` (size of the group) and ``is_rep``.

    The groups are a function of the *set* of rows given, not of their order, so any arrival order
    of the same observations gives the same groups and representatives. Different sensors are never
    grouped: two sensors seeing one object are independent measurements. A sensor's rows are clustered an
    hour at a time with a minute's halo (:data:`CLUSTER_CHUNK_S`). When the observations carry
    a boolean ``touched``, only the groups with a touched member come out (decided with the groups,
    in the same pass).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    chunk_us, halo_us = CLUSTER_CHUNK_S * 1_000_000, CLUSTER_HALO_S * 1_000_000
    keyed = observations.withColumn("event_us", F.unix_micros("event_time"))
    hour = F.floor(F.col("event_us") / F.lit(chunk_us))
    offset = F.col("event_us") - hour * F.lit(chunk_us)
    # each row in its hour, and in the neighbouring hour whose halo it is in
    chunks = F.array(hour, F.when(offset < halo_us, hour - 1), F.when(offset >= chunk_us - halo_us, hour + 1))
    keyed = keyed.withColumn("chunk", F.explode(F.array_compact(chunks))).withColumn("own", F.col("chunk") == hour)
    schema = T.StructType([*keyed.schema.fields, T.StructField("rep_obs_id", T.StringType()),
                           T.StructField("copies", T.LongType())])
    return (
        keyed.groupBy("sensor_id", "chunk").applyInArrow(_cluster_one_sensor_arrow, schema=schema)
        .drop("event_us", "chunk", "own")
        .withColumn("is_rep", F.col("obs_id") == F.col("rep_obs_id"))
    )
