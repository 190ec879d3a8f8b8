"""The fused orbits as the assessment uses them (gold ``fused_orbits``, jobs/fuse.py): no Spark, no table.

For an event whose primary or secondary has a usable fused orbit (its row read by
:func:`sda.lake.orbits.usable_fused` with :data:`FUSED_COLUMNS`, made a :class:`FusedOrbit` by :func:`fused_orbits`),
the TCA, miss distance, relative geometry and both states at TCA come from the numerical refinement of
:mod:`sda.orbit.screening.fused_refinement` (:func:`refinements`), and the fused object's covariance at TCA is the
orbit determination's, propagated there with process noise (full 6x6, in the object's RTN frame): the CDM says
``COVARIANCE_METHOD = CALCULATED`` for it, and the alert names the fit (:attr:`FusedOrbit.label`). An object
without one keeps the element set and the uncertainty model (``DEFAULT``).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from sda.orbit.estimation.estimator import OdResult
from sda.orbit.estimation.noise import ProcessNoise
from sda.orbit.fusion.arcs import result_from_row
from sda.orbit.screening.fused_refinement import Refined, refine

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


def refinements(events: pd.DataFrame, fused: dict[int, FusedOrbit], catalog: dict[int, dict],
                noise: ProcessNoise | None = None) -> list[Refined | None]:
    """Per event, its refinement on the fused orbits (None where neither object has one); ``noise``: the
    predictions' model error (:func:`sda.pipeline.space_weather.process_noise`; None: quiet)."""
    if not fused or events is None or len(events) == 0:
        return [None] * (0 if events is None else len(events))
    lines = {n: (c["line1"], c["line2"]) for n, c in catalog.items() if c.get("line1") and c.get("line2")}
    return refine(events, {n: f.result for n, f in fused.items()}, lines, noise or ProcessNoise())
