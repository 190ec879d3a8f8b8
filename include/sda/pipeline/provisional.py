"""The acquire stage's lake side: the pool of unexplained observations in, provisional objects out.

* **Pool** (:func:`pool`): gold ``uncorrelated`` rows held for want of a catalogue object inside the gate,
  over ``settings.acquire_lookback_h`` of event time up to the newest held row: what
  :func:`sda.orbit.acquisition.search.acquire` searches.
* **Numbers** (:func:`number_for`): a new object's provisional number comes from its founder (its
  earliest observation's ``obs_id``): ``80000 + sha256(founder) mod 10000``, the next free one on a
  collision. The same observations give the same number, whatever the run split; a founder already in
  the registry keeps its number (a retried run writes the same rows).
* **Acquisition** (:func:`acquired_rows`): the registry row (gold ``provisional_objects``), the catalogue
  element set (gold ``catalog``, ``source`` provisional; correlation and screening take it from the next
  stage on), and the fitted observations moved from ``uncorrelated`` to ``correlated`` under the new
  number (``correlate_run_id`` ``acquired:<the run that held it>``; :func:`sda.pipeline.manoeuvres.move_held`).
* **Retirement and merging** (:func:`retirements`, :func:`merges`): a provisional object not seen for
  ``settings.acquire_retire_h`` of event time is retired; one whose orbit a catalogued object's element set
  follows within ``settings.acquire_merge_km`` is merged into it, its correlated observations moved
  there (``correlate_run_id`` ``merged:<number>:<the run that correlated it>``). Both leave the registry row
  (the history); :func:`sda.lake.orbits.active_catalog` then keeps the number out of correlation and screening.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import TYPE_CHECKING

import numpy as np

from sda.lake.schemas import PROVISIONAL_OBJECTS
from sda.lake.tables import TABLES, table_exists
from sda.orbit.correlation import REASON_NO_CANDIDATE
from sda.orbit.times import as_utc, utc

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings

FIRST_NUMBER, NUMBERS = 80000, 10000
ACQUIRED, MERGED = "acquired:", "merged:"
FIELDS = PROVISIONAL_OBJECTS.fieldNames()


def number_for(founder: str, taken: set[int]) -> int:
    """The provisional number of a new object named by ``founder`` (module docstring)."""
    start = int(hashlib.sha256(founder.encode()).hexdigest()[:12], 16) % NUMBERS
    for step in range(NUMBERS):
        n = FIRST_NUMBER + (start + step) % NUMBERS
        if n not in taken:
            return n
    raise RuntimeError(f"the provisional range {FIRST_NUMBER}-{FIRST_NUMBER + NUMBERS - 1} is full")


def registry(spark: "SparkSession", settings: "Settings") -> list[dict]:
    """Every provisional object ever numbered (gold ``provisional_objects``), as dicts."""
    if not table_exists("provisional_objects", settings):
        return []
    return [r.asDict() for r in TABLES["provisional_objects"].read(spark, settings).collect()]


def pool(spark: "SparkSession", settings: "Settings", newest: dt.datetime, columns) -> "pd.DataFrame":
    """The held observations over the lookback up to ``newest`` (module docstring), ``columns`` and
    ``correlate_run_id``, sorted by event time and obs_id."""
    from pyspark.sql import functions as F

    lo = newest - dt.timedelta(hours=settings.acquire_lookback_h)
    rows = (TABLES["uncorrelated"].read(spark, settings).where(F.col("event_date") >= F.lit(lo.date()))
            .where((F.col("event_time") >= F.lit(lo)) & (F.col("event_time") <= F.lit(newest))
                   & (F.col("reason") == F.lit(REASON_NO_CANDIDATE)))
            .select(*[c for c in columns if c != "norad_id"]))
    out = rows.toPandas()
    return out.sort_values(["event_time", "obs_id"], kind="stable").reset_index(drop=True)


def registry_row(norad: int, obj, regime: str | None, last_seen: float, run_id: str,
                 status: str = "active", reason: str | None = None, merged_into: int | None = None) -> dict:
    """A registry row of a newly acquired ``obj`` (:class:`sda.orbit.acquisition.search.NewObject`)."""
    cov = np.asarray(obj.result.covariance)[:3, :3]
    return {"norad_id": int(norad), "founder": obj.founder, "status": status,
            "first_obs": utc(obj.first_obs), "acquired_epoch": utc(obj.result.epoch),
            "observations": len(obj.obs_ids), "passes": int(obj.passes), "rms": float(obj.result.rms),
            "sigma_pos_m": float(np.sqrt(max(np.trace(cov), 0.0))), "regime": regime,
            "last_seen": utc(last_seen), "merged_into": merged_into, "status_reason": reason,
            "acquired_run_id": run_id, "run_id": run_id}


def catalogue_row(norad: int, epoch_unix: float, lines: dict, perigee_km: float, apogee_km: float, run_id: str):
    """The gold ``catalog`` row of a provisional object's element set (CATALOG order)."""
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    return (int(norad), f"PROVISIONAL {norad}", utc(epoch_unix), lines["line1"], lines["line2"],
            float(perigee_km), float(apogee_km), "provisional", now, run_id)


def last_seen(spark: "SparkSession", settings: "Settings", ids: list[int],
              since: dt.datetime) -> dict[int, dt.datetime]:
    """The newest correlated observation of each of ``ids`` since ``since``."""
    from pyspark.sql import functions as F

    if not ids:
        return {}
    rows = (TABLES["correlated"].read(spark, settings).where(F.col("event_date") >= F.lit(since.date()))
            .where(F.col("norad_id").isin(ids)).groupBy("norad_id").agg(F.max("event_time").alias("t")).collect())
    return {int(r["norad_id"]): as_utc(r["t"]) for r in rows}


def retirements(active: list[dict], seen: dict[int, dt.datetime], newest: dt.datetime, retire_h: float,
                run_id: str) -> list[dict]:
    """The active rows to retire: not seen for ``retire_h`` hours of event time before ``newest``."""
    out = []
    for row in active:
        last = max(as_utc(row["last_seen"]), seen.get(int(row["norad_id"]), as_utc(row["last_seen"])))
        if (newest - last).total_seconds() > retire_h * 3600.0:
            out.append({**row, "status": "retired", "last_seen": last, "run_id": run_id,
                        "status_reason": f"no observation for {retire_h:g} h of event time after {last.isoformat()}"})
    return out


def merges(active: list[dict], sets: dict[int, tuple[str, str]], catalogue: dict[int, tuple[str, str]],
           merge_km: float, run_id: str, distinct: set[frozenset] = frozenset()) -> list[dict]:
    """The active rows whose element set another object's follows within ``merge_km`` over one orbit from its
    newest observation, merged into the nearest such object: a catalogued (not provisional) one, or an active
    provisional one acquired before it (the same body found twice). Never into one it was seen beside
    (``distinct``, :func:`co_observed`): a fresh launch flies a few kilometres apart, closer than the gate."""
    from sgp4.api import WGS72, Satrec

    elder = {int(r["norad_id"]): (as_utc(r["acquired_epoch"]), r["founder"]) for r in active}
    fixed = [n for n in sorted(catalogue) if not FIRST_NUMBER <= n < FIRST_NUMBER + NUMBERS]
    out, gone = [], set()
    for row in sorted(active, key=lambda r: (as_utc(r["acquired_epoch"]), r["founder"])):
        norad = int(row["norad_id"])
        lines = sets.get(norad)
        if lines is None:
            continue
        older = [n for n in elder if n != norad and n not in gone and n in sets and elder[n] < elder[norad]]
        others = [n for n in fixed + older if frozenset((norad, n)) not in distinct]
        if not others:
            continue
        sats = [Satrec.twoline2rv(*(catalogue.get(n) or sets[n]), WGS72) for n in others]
        miss = _orbit_miss(Satrec.twoline2rv(*lines, WGS72), sats, as_utc(row["last_seen"]).timestamp())
        best = int(np.argmin(miss))
        if miss[best] <= merge_km:
            gone.add(norad)
            out.append({**row, "status": "merged", "merged_into": others[best], "run_id": run_id,
                        "status_reason": f"follows {others[best]} within {miss[best]:.1f} km over an orbit"})
    return out


def _orbit_miss(own, sats: list, t0: float) -> np.ndarray:
    """The largest distance (km) between ``own`` and each of ``sats`` at 7 times over one orbit of ``own`` from
    ``t0`` (inf where SGP4 fails)."""
    from sgp4.api import SatrecArray

    from sda.orbit import frames

    t = t0 + np.linspace(0.0, 2 * np.pi / own.no_kozai * 60.0, 7)
    jd, fr = frames.unix_to_jd(t)
    e1, r1, _ = own.sgp4_array(jd, fr)
    if (e1 != 0).any():
        return np.full(len(sats), np.inf)
    e2, r2, _ = SatrecArray(sats).sgp4(jd, fr)
    return np.where((e2 != 0).any(axis=1), np.inf, np.linalg.norm(r2 - r1[None], axis=2).max(axis=1))


def relabel(spark: "SparkSession", settings: "Settings", pairs: list[tuple[int, int]], since: dt.datetime) -> int:
    """Move the correlated observations of each merged provisional object to the catalogued one it was found
    to be (``pairs``: provisional, catalogued): one upsert on obs_id, ``correlate_run_id``
    ``merged:<provisional>:<as it was>``. Returns how many moved."""
    from pyspark.sql import functions as F

    from sda.pipeline import sinks

    if not pairs:
        return 0
    to = spark.createDataFrame(pairs, "norad_id long, merged_into long")
    rows = (TABLES["correlated"].read(spark, settings).where(F.col("event_date") >= F.lit(since.date()))
            .join(F.broadcast(to), on="norad_id"))
    columns = TABLES["correlated"].schema.fieldNames()
    moved = rows.select(*[
        F.col("merged_into").alias(c) if c == "norad_id"
        else F.concat(F.lit(MERGED), F.col("norad_id").cast("string"), F.lit(":"), F.col(c)).alias(c)
        if c == "correlate_run_id" else F.col(c) for c in columns]).localCheckpoint()
    n = moved.count()
    if n:
        sinks.upsert(spark, moved, "correlated", settings, unique=True)
    return n


def co_observed(spark: "SparkSession", settings: "Settings", ids: list[int], since: dt.datetime) -> set[frozenset]:
    """Pairs (as frozensets) of an object of ``ids`` and another object that one sensor observed in the same
    frame (the same second: its detections differ by milliseconds; one detection per body per frame)."""
    from pyspark.sql import functions as F

    if not ids:
        return set()
    rows = TABLES["correlated"].read(spark, settings).where(F.col("event_date") >= F.lit(since.date()))
    frame = F.round(F.unix_micros("event_time") / F.lit(1e6)).cast("long").alias("frame")  # a sensor's frame
    mine = rows.where(F.col("norad_id").isin(ids)).select("sensor_id", frame, F.col("norad_id").alias("a"))
    pairs = (mine.join(rows.select("sensor_id", frame, F.col("norad_id").alias("b")), on=["sensor_id", "frame"])
             .where(F.col("a") != F.col("b")).select("a", "b").distinct())
    return {frozenset((int(r["a"]), int(r["b"]))) for r in pairs.collect()}


def co_observed_rows(rows: "pd.DataFrame", ids) -> set[frozenset]:
    """:func:`co_observed` of a frame of assigned observations (sensor_id, event_time as unix seconds,
    norad_id)."""
    ids = set(int(n) for n in ids)
    out: set[frozenset] = set()
    rows = rows.assign(frame=np.round(rows["event_time"].astype(float)).astype(np.int64))
    for group in rows.groupby(["sensor_id", "frame"])["norad_id"]:
        norads = {int(n) for n in group[1]}
        if len(norads) > 1 and norads & ids:
            out |= {frozenset((a, b)) for a in norads & ids for b in norads if a != b}
    return out
