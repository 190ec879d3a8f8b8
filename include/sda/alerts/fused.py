"""What the assessment takes from fused orbits (gold ``fused_orbits``, jobs/fuse.py) where it has one.

For an event whose primary or secondary has a usable fused orbit (:func:`sda.lake.tables.newest_fused_orbits`),
the TCA, miss distance, relative geometry and both states at TCA come from the numerical refinement of
:mod:`sda.orbit.od.refine`, and the fused object's covariance at TCA is the orbit determination's,
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

from sda.orbit.od.arcs import result_from_row
from sda.orbit.od.estimator import OdResult
from sda.orbit.od.prior import rtn_to_teme6
from sda.orbit.od.refine import Refined, refine

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


def with_fused_lines(spark: "SparkSession", settings: "Settings", rows: list, screen_start: dt.datetime
                     ) -> tuple[list[dict], int]:
    """The catalogue's newest element sets (``rows``) with, for each object that has a usable fused orbit,
    the element set fitted to it instead; its ``epoch`` is the fit's ``screen_epoch``, which changes only
    when the set is renewed (:mod:`sda.orbit.od.arcs`), so an unrenewed object is not screened again.
    Returns (rows as dicts, how many are fused)."""
    fused = {int(r["norad_id"]): r for r in usable_fused(spark, settings, screen_start, None, "line1", "line2",
                                                          "screen_epoch")}
    out = []
    for r in rows:
        row = r.asDict() if hasattr(r, "asDict") else dict(r)
        f = fused.get(int(row["norad_id"]))
        if f is not None:
            row.update(line1=f["line1"], line2=f["line2"], epoch=f["screen_epoch"])
        out.append(row)
    return out, sum(1 for r in out if int(r["norad_id"]) in fused)
