"""What the assessment takes from fused orbits (gold ``fused_orbits``, jobs/fuse.py) where it has one.

For an event whose primary or secondary has a usable fused orbit (:func:`sda.lake.tables.newest_fused_orbits`),
the TCA, miss distance, relative geometry and both states at TCA come from the numerical refinement of
:mod:`sda.orbit.screening.fused_refinement`, and the fused object's covariance at TCA is the orbit determination's,
propagated there with process noise (full 6x6, in the object's RTN frame): the CDM says
``COVARIANCE_METHOD = CALCULATED`` for it. An object without one keeps the element set and the
uncertainty model (``DEFAULT``), as before.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sda.orbit.estimation.estimator import OdResult
from sda.orbit.estimation.prior import rtn_to_teme6
from sda.orbit.fusion.arcs import result_from_row
from sda.orbit.screening.fused_refinement import Refined, refine

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings

#: the columns of a fused_orbits row the assessment reads
FUSED_COLUMNS = ("epoch_unix", "fit_start_unix", "x_km", "y_km", "z_km", "vx_kms", "vy_kms", "vz_kms", "b_m2_kg",
                 "covariance", "rms", "iterations", "status", "fused_id", "regime", "line1", "line2")


@dataclasses.dataclass(frozen=True)
class FusedOrbit:
    result: OdResult
    fused_id: str
    regime: str

    @property
    def label(self) -> str:
        """The covariance source an alert records: names the fused orbit (``sda trace`` follows it)."""
        return f"fused/{self.regime}/{self.fused_id}"


def fused_orbits(rows) -> dict[int, FusedOrbit]:
    """norad_id -> :class:`FusedOrbit`, from rows (dicts or Spark Rows) with norad_id and :data:`FUSED_COLUMNS`."""
    out = {}
    for row in rows or ():
        rec = row.asDict() if hasattr(row, "asDict") else dict(row)
        out[int(rec["norad_id"])] = FusedOrbit(result_from_row(rec), rec["fused_id"], rec.get("regime") or "unknown")
    return out


def refinements(events: pd.DataFrame, fused: dict[int, FusedOrbit], catalog: dict[int, dict]) -> list[Refined | None]:
    """Per event, its refinement on the fused orbits (None where neither object has one)."""
    if not fused or events is None or len(events) == 0:
        return [None] * (0 if events is None else len(events))
    lines = {n: (c["line1"], c["line2"]) for n, c in catalog.items() if c.get("line1") and c.get("line2")}
    return refine(events, {n: f.result for n, f in fused.items()}, lines)


def covariance_rtn(cov_teme: np.ndarray, state_m: np.ndarray) -> np.ndarray:
    """A 6x6 TEME covariance (m-units) in the RTN frame of ``state_m`` (TEME, m and m/s)."""
    big = rtn_to_teme6(state_m[:3], state_m[3:])
    out = big.T @ np.asarray(cov_teme, float) @ big
    return 0.5 * (out + out.T)


def usable_fused(spark: "SparkSession", settings: "Settings", screen_start: dt.datetime, ids: list[int] | None,
                 *columns: str) -> list:
    """Each object's usable fused orbit (:func:`sda.lake.tables.newest_fused_orbits`, at most
    :data:`~sda.lake.tables.FUSED_MAX_AGE_H` older than ``screen_start``): rows of norad_id and ``columns``,
    for the objects ``ids`` (None: all)."""
    from pyspark.sql import functions as F

    from sda.lake.tables import FUSED_MAX_AGE_H, TABLES, newest_fused_orbits, table_exists

    if not table_exists("fused_orbits", settings):
        return []
    since = (screen_start - dt.timedelta(hours=FUSED_MAX_AGE_H)).astimezone(dt.timezone.utc).replace(tzinfo=None)
    table = TABLES["fused_orbits"].read(spark, settings)
    if ids is not None:
        table = table.where(F.col("norad_id").isin(list(ids)))
    return newest_fused_orbits(table, since, *columns).collect()


@dataclasses.dataclass(frozen=True)
class Screened:
    """What the screening propagates per object: ``rows`` (norad_id, line1, line2, epoch, ...), and how many
    are fused, renewed this run (their new element set screened) or kept (the one screened before)."""

    rows: list[dict]
    fused: int
    renewed: int
    kept: int


def strays_m(old: tuple[str, str], new: tuple[str, str], start: float, end: float, step_s: float = 600.0) -> float:
    """The largest distance (m) between two element sets' positions over [start, end]."""
    from sgp4.api import WGS72, Satrec

    from sda.orbit.frames import propagate

    times = np.arange(start, end + 1.0, step_s)
    _, r, _ = propagate([Satrec.twoline2rv(*old, WGS72), Satrec.twoline2rv(*new, WGS72)], times)
    d = np.linalg.norm(r[0] - r[1], axis=-1) * 1000.0
    return float(d.max()) if np.isfinite(d).all() else float("inf")


def with_fused_lines(spark: "SparkSession", settings: "Settings", rows: list, screen_start: dt.datetime,
                     screened: dict[int, tuple[str, str, float]] | None = None) -> Screened:
    """The catalogue's newest element sets (``rows``) with, for each object that has a usable fused orbit,
    the element set fitted to it instead, its ``epoch`` the fit's. **Renewal**: where the recorded screening
    (``screened``: norad_id -> (line1, line2, epoch unix) it propagated) holds an element set of the object,
    that set and its epoch are kept -- the object is not screened again -- while it stays within
    ``settings.fusion_renew_m`` beyond the new set's own fit error (``lines_max_m``) of the new set over the
    horizon; the new set is screened otherwise."""
    screened = screened or {}
    start = screen_start.timestamp()
    end = start + settings.screening_horizon_h * 3600.0
    fused = {int(r["norad_id"]): r for r in usable_fused(spark, settings, screen_start, None, "line1", "line2",
                                                          "epoch", "lines_max_m")}
    out, renewed, kept = [], 0, 0
    for r in rows:
        row = r.asDict() if hasattr(r, "asDict") else dict(r)
        f = fused.get(int(row["norad_id"]))
        if f is not None:
            row.update(line1=f["line1"], line2=f["line2"], epoch=f["epoch"])
            old = screened.get(int(row["norad_id"]))
            if old is not None and (old[0], old[1]) != (f["line1"], f["line2"]):
                if strays_m(old[:2], (f["line1"], f["line2"]), start, end) <= (
                        float(f["lines_max_m"] or 0.0) + settings.fusion_renew_m):
                    row.update(line1=old[0], line2=old[1], epoch=dt.datetime.fromtimestamp(old[2], dt.timezone.utc))
                    kept += 1
                else:
                    renewed += 1
        out.append(row)
    return Screened(out, sum(1 for r in out if int(r["norad_id"]) in fused), renewed, kept)
