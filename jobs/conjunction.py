"""Stage ``conjunction``: gold ``catalog`` -> gold ``conjunctions``, ``alerts`` and the outbox.

    spark-submit jobs/conjunction.py --start ISO --end ISO --run-id ID [--screen-start ISO] [--horizon-h H]

Screens the newest element set of every object over ``[screen_start, screen_start + horizon)``
(default: from ``--end`` for ``settings.screening_horizon_h``) for approaches closer than
``settings.screening_threshold_km``, with the filter chain of :mod:`sda.screening` (the module
docstring argues why no approach under the threshold is lost):

(a) altitude bands -- a row predicate on the joined pairs (and counted on the driver);
(b) positions on the time grid -- ``mapInPandas`` over catalogue partitions, ``SatrecArray``;
    then a keyed join on (step, grid cell) with half of the 27 neighbour cells probed, cell edge
    ``threshold + Vmax * step``; (b') the straight-line + curvature bound per (pair, step);
(c) refinement -- per candidate pair (``mapInPandas``), TCA from the range-rate root, miss distance,
    relative speed, RTN.

Writes: ``conjunctions`` upserted on event_id = sha256(primary, secondary, TCA to the minute);
``alerts`` (miss < ``settings.alert_distance_km``) upserted on alert_id = event_id; one JSON file per
alert in ``settings.outbox``, written atomically (temp file + ``os.replace``) and only when absent or
different, so a rerun emits nothing twice.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import functions as F, types as T

from sda import runtime, schemas, screening
from sda.tables import TABLES

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from sda.settings import Settings

STAGE = "conjunction"
OBJECTS_PER_PARTITION = 100  # positions UDF: ~100 objects x 1,441 steps per task
JOIN_ROWS_PER_PARTITION = 500_000  # grid join: probe rows per partition (fits a 2 GB local driver)

POSITIONS = T.StructType(
    [
        T.StructField("step", T.LongType(), False),
        T.StructField("norad_id", T.LongType(), False),
        *[T.StructField(c, T.DoubleType(), False) for c in ("x", "y", "z", "vx", "vy", "vz")],
        T.StructField("perigee_km", T.DoubleType(), False),
        T.StructField("apogee_km", T.DoubleType(), False),
        T.StructField("accel_km_s2", T.DoubleType(), False),
    ]
)
APPROACHES = T.StructType(
    [T.StructField(name, T.LongType() if kind == "int64" else T.DoubleType(), False)
     for name, kind in screening.APPROACH_COLUMNS.items()]
)


def screening_catalogue(catalog: "DataFrame") -> "DataFrame":
    """Newest element set per object."""
    newest = F.max_by(F.struct("line1", "line2", "perigee_km", "apogee_km"), "epoch")
    return catalog.groupBy("norad_id").agg(newest.alias("e")).select(
        "norad_id", "e.line1", "e.line2", "e.perigee_km", "e.apogee_km"
    )


def grid_positions(catalogue: "DataFrame", times: np.ndarray, partitions: int) -> "DataFrame":
    """(b) every object at every grid step, computed by catalogue partition with ``SatrecArray``."""
    times = np.asarray(times, dtype=float)

    def propagate_partition(batches):
        for pdf in batches:
            sats = screening.satrecs_from_lines(pdf["line1"], pdf["line2"])
            pos = screening.grid_positions(pdf["norad_id"].to_numpy(), sats, times)
            bands = pdf[["norad_id", "perigee_km", "apogee_km"]]
            pos = pos.merge(bands, on="norad_id", how="inner")
            pos["accel_km_s2"] = screening.accel_bound_km_s2(pos["perigee_km"].to_numpy())
            for lo in range(0, len(pos), 200_000):
                yield pos.iloc[lo:lo + 200_000]

    return catalogue.repartition(partitions).mapInPandas(propagate_partition, schema=POSITIONS)


def _with_cells(pos: "DataFrame", cell_km: float) -> "DataFrame":
    return pos.select("*", *[F.floor(F.col(a) / F.lit(cell_km)).cast("long").alias("c" + a) for a in "xyz"])


def grid_pairs(pos: "DataFrame", threshold_km: float, step_s: float, cell_km: float, partitions: int) -> "DataFrame":
    """(a)+(b)+(b'): (primary_id, secondary_id, step, linear) for pairs in neighbouring cells at a
    step, within one cell edge of each other, with overlapping altitude bands; ``linear`` says
    whether the pair also passes the straight-line + curvature bound."""
    cells = _with_cells(pos, cell_km)
    home = cells.select("step", "cx", "cy", "cz", *[F.col(c).alias("a_" + c) for c in POSITIONS.fieldNames()[1:]])
    offsets = F.array(*[F.struct(F.lit(dx).alias("dx"), F.lit(dy).alias("dy"), F.lit(dz).alias("dz"))
                        for dx, dy, dz in screening.HALF_NEIGHBOURS])
    probe = cells.select("*", F.explode(offsets).alias("o")).select(
        "step",
        (F.col("cx") + F.col("o.dx")).alias("cx"),
        (F.col("cy") + F.col("o.dy")).alias("cy"),
        (F.col("cz") + F.col("o.dz")).alias("cz"),
        ((F.col("o.dx") == 0) & (F.col("o.dy") == 0) & (F.col("o.dz") == 0)).alias("same_cell"),
        *[F.col(c).alias("b_" + c) for c in POSITIONS.fieldNames()[1:]],
    )
    # The probe side is 14x the positions: size the join's partitions to it, not to the default
    # shuffle width (both sides hash-partitioned alike, so the join itself adds no shuffle).
    key = ["step", "cx", "cy", "cz"]
    home, probe = home.repartition(partitions, *key), probe.repartition(partitions, *key)
    joined = home.join(probe, on=key, how="inner").where(
        (F.col("a_norad_id") != F.col("b_norad_id"))
        & (~F.col("same_cell") | (F.col("a_norad_id") < F.col("b_norad_id")))
    )
    return _relative_motion_filters(joined, threshold_km, step_s, cell_km)


def _relative_motion_filters(joined: "DataFrame", threshold_km: float, step_s: float, cell_km: float) -> "DataFrame":
    d = {a: F.col("a_" + a) - F.col("b_" + a) for a in ("x", "y", "z", "vx", "vy", "vz")}
    dr2 = d["x"] ** 2 + d["y"] ** 2 + d["z"] ** 2
    dv2 = d["vx"] ** 2 + d["vy"] ** 2 + d["vz"] ** 2
    drdv = d["x"] * d["vx"] + d["y"] * d["vy"] + d["z"] * d["vz"]
    half = step_s / 2.0
    tau = F.greatest(F.lit(-half), F.least(F.lit(half), F.when(dv2 > 0, -drdv / dv2).otherwise(F.lit(0.0))))
    # |dr + dv tau|^2 expanded, floored at 0 against rounding
    lin2 = F.greatest(F.lit(0.0), dr2 + 2.0 * tau * drdv + tau * tau * dv2)
    bound = F.lit(threshold_km) + screening.curvature_pad_km(F.col("a_accel_km_s2") + F.col("b_accel_km_s2"), step_s)
    bands = screening.bands_overlap(F.col("a_perigee_km"), F.col("a_apogee_km"), F.col("b_perigee_km"),
                                    F.col("b_apogee_km"), threshold_km)
    return joined.where((dr2 < cell_km * cell_km) & bands).select(
        F.least("a_norad_id", "b_norad_id").alias("primary_id"),
        F.greatest("a_norad_id", "b_norad_id").alias("secondary_id"),
        "step",
        (lin2 < bound * bound).alias("linear"),
    )


def refine(pairs: "DataFrame", lines: dict[int, tuple[str, str]], grid_start: float, step_s: float,
           start: float, end: float, threshold_km: float) -> "DataFrame":
    """(c) closest approaches of the candidate pairs (primary_id, secondary_id, steps)."""

    def refine_partition(batches):
        cache: dict[int, Any] = {}
        for pdf in batches:
            needed = set(pdf["primary_id"]).union(pdf["secondary_id"]) - cache.keys()
            for norad_id in needed:
                l1, l2 = lines[int(norad_id)]
                cache[int(norad_id)] = screening.satrecs_from_lines([l1], [l2])[0]
            yield screening.refine_pairs(pdf, cache, grid_start, step_s, start, end, threshold_km)

    return pairs.mapInPandas(refine_partition, schema=APPROACHES)


def conjunction_frame(events: pd.DataFrame, screen_start: dt.datetime, run_id: str) -> list[tuple]:
    """Approaches -> CONJUNCTION rows (metres), one per event id (the closest if two share a minute)."""
    rows: dict[str, tuple] = {}
    for ev in events.sort_values(["miss_km", "primary_id", "secondary_id", "tca_unix"]).itertuples():
        eid = screening.event_id(ev.primary_id, ev.secondary_id, ev.tca_unix)
        if eid in rows:
            continue
        rows[eid] = (
            eid, int(ev.primary_id), int(ev.secondary_id), screen_start,
            dt.datetime.fromtimestamp(ev.tca_unix, tz=dt.timezone.utc),
            ev.miss_km * 1000.0, ev.rel_speed_km_s * 1000.0, ev.r_km * 1000.0, ev.t_km * 1000.0, ev.n_km * 1000.0,
            run_id,
        )
    return sorted(rows.values(), key=lambda r: (r[4], r[1], r[2]))


def alert_level(miss_m: float, alert_km: float) -> tuple[str, str]:
    red_m = alert_km * 1000.0 / 5.0
    if miss_m < red_m:
        return "red", f"predicted miss {miss_m:.0f} m is under {red_m:.0f} m (a fifth of the {alert_km * 1000:.0f} m alert distance)"
    return "yellow", f"predicted miss {miss_m:.0f} m is under the {alert_km * 1000:.0f} m alert distance"


def alert_message(row: dict[str, Any]) -> str:
    """The outbox message: the event's physics and level only (no run id, no write time), rounded, so
    the same event screened again produces the same bytes and is not re-emitted."""
    body = {
        "alert_id": row["alert_id"],
        "level": row["level"],
        "reason": row["reason"],
        "primary_id": row["primary_id"],
        "secondary_id": row["secondary_id"],
        "tca": row["tca"].astimezone(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "miss_m": round(row["miss_m"], 1),
        "rel_speed_ms": round(row["rel_speed_ms"], 1),
        "rtn_m": [round(row["r_m"], 1), round(row["t_m"], 1), round(row["n_m"], 1)],
    }
    return json.dumps(body, sort_keys=True, indent=2) + "\n"


def write_outbox_file(path: Path, text: str) -> bool:
    """Atomically write ``text`` to ``path`` unless it already holds exactly that; True if written."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return True


def run(spark: "SparkSession", settings: "Settings", args: argparse.Namespace) -> dict[str, Any]:
    args = _validate(args)
    screen_start = args.screen_start or args.end
    horizon_h = args.horizon_h or settings.screening_horizon_h
    start = screen_start.timestamp()
    end = start + horizon_h * 3600.0
    threshold_km, step_s = settings.screening_threshold_km, settings.screening_step_s

    catalogue_df = screening_catalogue(TABLES["catalog"].read(spark, settings))
    catalogue = catalogue_df.collect()
    lines = {int(r["norad_id"]): (r["line1"], r["line2"]) for r in catalogue}
    perigee = np.array([r["perigee_km"] for r in catalogue], dtype=float)
    apogee = np.array([r["apogee_km"] for r in catalogue], dtype=float)
    sats = screening.satrecs_from_lines([l1 for l1, _ in lines.values()], [l2 for _, l2 in lines.values()])
    vmax = max((screening.perigee_speed_km_s(s) for s in sats), default=0.0)
    cell_km = screening.cell_size_km(threshold_km, step_s, vmax)
    times = screening.time_grid(start, end, step_s)
    metrics: dict[str, Any] = {
        "screen_start": screen_start.isoformat(),
        "horizon_h": horizon_h,
        "steps": len(times),
        "cell_km": round(cell_km, 1),
        "objects": len(catalogue),
        "pairs_all": len(catalogue) * (len(catalogue) - 1) // 2,
        "pairs_altitude": screening.altitude_band_pair_count(perigee, apogee, threshold_km),
    }

    events = pd.DataFrame(columns=list(screening.APPROACH_COLUMNS))
    if len(catalogue) >= 2:
        partitions = max(1, min(64, -(-len(catalogue) // OBJECTS_PER_PARTITION)))
        pos = grid_positions(catalogue_df, times, partitions).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            join_partitions = max(settings.shuffle_partitions,
                                  -(-len(catalogue) * len(times) * len(screening.HALF_NEIGHBOURS) // JOIN_ROWS_PER_PARTITION))
            candidates = grid_pairs(pos, threshold_km, step_s, cell_km, join_partitions)
            per_pair = (
                candidates.groupBy("primary_id", "secondary_id")
                .agg(
                    F.count(F.lit(1)).alias("grid_steps"),
                    F.sort_array(F.collect_list(F.when(F.col("linear"), F.col("step")))).alias("steps"),
                )
                .persist(StorageLevel.MEMORY_AND_DISK)
            )
            summary = per_pair.agg(
                F.count(F.lit(1)).alias("pairs_grid"),
                F.coalesce(F.sum("grid_steps"), F.lit(0)).alias("pair_steps_grid"),
                F.count(F.when(F.size("steps") > 0, 1)).alias("pairs_linear"),
                F.coalesce(F.sum(F.size("steps")), F.lit(0)).alias("pair_steps_linear"),
            ).first()
            metrics.update({k: int(summary[k]) for k in ("pairs_grid", "pair_steps_grid", "pairs_linear", "pair_steps_linear")})
            survivors = per_pair.where(F.size("steps") > 0).select("primary_id", "secondary_id", "steps")
            events = refine(survivors, lines, start, step_s, start, end, threshold_km).toPandas()
            per_pair.unpersist()
        finally:
            pos.unpersist()

    rows = conjunction_frame(events, screen_start, args.run_id)
    metrics["events"] = len(rows)
    if rows:
        runtime.upsert(spark, spark.createDataFrame(rows, schemas.CONJUNCTION), "conjunctions", settings)

    alert_rows, written = [], 0
    for row in rows:
        event = dict(zip(schemas.CONJUNCTION.fieldNames(), row))
        if event["miss_m"] >= settings.alert_distance_km * 1000.0:
            continue
        level, reason = alert_level(event["miss_m"], settings.alert_distance_km)
        path = settings.outbox / f"alert-{event['event_id']}.json"
        alert = {**event, "alert_id": event["event_id"], "level": level, "reason": reason, "outbox_file": str(path)}
        written += write_outbox_file(path, alert_message(alert))
        alert_rows.append(tuple(alert[name] for name in schemas.ALERT.fieldNames()))
    if alert_rows:
        runtime.upsert(spark, spark.createDataFrame(alert_rows, schemas.ALERT), "alerts", settings)
    metrics.update({"alerts": len(alert_rows), "outbox_written": written, "outbox_unchanged": len(alert_rows) - written})
    # conservation over the catalogue objects: every object in the snapshot is screened
    metrics.update({"records_in": len(catalogue), "records_out": len(sats), "quarantined": len(catalogue) - len(sats),
                    "duplicates": 0})
    return metrics


def parser() -> argparse.ArgumentParser:
    p = runtime.stage_parser(STAGE, "Screen the catalogue for close approaches and raise alerts.")
    p.add_argument("--screen-start", default=None, help="start of the screening interval (ISO-8601); default --end")
    p.add_argument("--horizon-h", type=float, default=None, help="screening horizon in hours; default settings")
    return p


def _validate(args: argparse.Namespace) -> argparse.Namespace:
    args.screen_start = getattr(args, "screen_start", None)
    args.horizon_h = getattr(args, "horizon_h", None)
    if args.screen_start is not None and not isinstance(args.screen_start, dt.datetime):
        args.screen_start = runtime.parse_instant("screen-start", args.screen_start)
    if args.horizon_h is not None and not (0 < args.horizon_h <= 24 * 14):
        raise runtime.StageArgumentError(f"--horizon-h {args.horizon_h}: expected hours in (0, 336]")
    return args


def main(argv: list[str] | None = None, settings: "Settings | None" = None, spark: "SparkSession | None" = None) -> dict[str, Any]:
    return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)


if __name__ == "__main__":
    main(sys.argv[1:])
