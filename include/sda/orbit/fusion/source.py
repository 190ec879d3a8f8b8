"""Fused orbits as an :class:`sda.orbit.ndm.OrbitSource`: what ``sda export`` writes for an object the pipeline
has fused, the catalogue's element set for the others.

For each object with a usable fused orbit (gold ``fused_orbits``, the newest picked as the screening picks it:
:func:`sda.lake.orbits.usable_fused` with :data:`COLUMNS`):

* **ephemeris**: the fit's state propagated by the estimator's numerical force model with its covariance and
  process noise (:func:`sda.orbit.estimation.predict.predict`: what the alerts' refinement and Pc use), the
  covariance resolved on each state's R/T/N axes; for times before the fit's epoch (the propagator runs
  forward only) the whole ephemeris falls back to the catalogue;
* **element set** (OMM): the SGP4 element set fitted to the fused orbit (``line1``/``line2``, the screening's).

Every message says in a COMMENT which orbit it came from (the fused orbit's ``fused_id``, or the catalogue).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence

import numpy as np

from sda.orbit import ndm
from sda.orbit.estimation.measurements import rtn_covariance
from sda.orbit.estimation.predict import predict
from sda.orbit.fusion.arcs import result_from_row

#: the columns of a gold fused_orbits row the source reads (with norad_id)
COLUMNS = ("epoch_unix", "fit_start_unix", "x_km", "y_km", "z_km", "vx_kms", "vy_kms", "vz_kms", "b_m2_kg",
           "covariance", "rms", "iterations", "status", "fused_id", "regime", "line1", "line2")


def _iso(unix_s: float) -> str:
    return dt.datetime.fromtimestamp(unix_s, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class FusedSource:
    """The fused orbits ``rows`` (dicts or Spark Rows with norad_id and :data:`COLUMNS`) in front of
    ``catalogue``, which serves every object without one and names the objects."""

    def __init__(self, rows: Iterable, catalogue: ndm.TleSource):
        self.catalogue = catalogue
        self.rows = {}
        for row in rows:
            rec = row.asDict() if hasattr(row, "asDict") else dict(row)
            self.rows[int(rec["norad_id"])] = rec

    def _names(self, norad_id: int, line1: str) -> tuple[str, str]:
        known = self.catalogue.rows.get(norad_id)
        name = (known.name if known else None) or str(norad_id)
        return name, ndm.object_id(known.line1 if known else line1)

    def _fit(self, rec: dict) -> str:
        return (f"fused orbit {rec['fused_id']} ({rec.get('regime') or 'unknown'} regime, fitted to observations "
                f"{_iso(rec['fit_start_unix'])} .. {_iso(rec['epoch_unix'])}, jobs/fuse.py)")

    def element_sets(self) -> list[ndm.ElementSet]:
        out = {es.norad_id: es for es in self.catalogue.element_sets()}
        for norad, rec in self.rows.items():
            name, _ = self._names(norad, rec["line1"])
            es = ndm.element_set(norad, name, rec["line1"], rec["line2"])
            out[norad] = dataclasses.replace(es, comments=(f"element set: SGP4 fitted to the {self._fit(rec)}",))
        return [out[n] for n in sorted(out)]

    def ephemeris(self, norad_id: int, times: Sequence[dt.datetime]) -> ndm.Ephemeris:
        rec = self.rows.get(norad_id)
        unix = np.array([t.timestamp() for t in times])
        if rec is None or unix.min() < float(rec["epoch_unix"]) - 1e-6:
            eph = self.catalogue.ephemeris(norad_id, times)
            why = ("no usable fused orbit" if rec is None else
                   f"the times start before the epoch of {self._fit(rec)}, which is propagated forward only")
            return dataclasses.replace(eph, comments=(f"the catalogue's orbit: {why}", *eph.comments))
        pred = predict(result_from_row(rec), unix)
        cov = rtn_covariance(pred.r_km, pred.v_kms, pred.covariance) * 1e-6  # m -> km units
        name, object_id = self._names(norad_id, rec["line1"])
        comment = (f"states: the {self._fit(rec)}, propagated by the estimator's numerical force model; "
                   "covariance: the fit's, propagated with process noise (sda.orbit.estimation.predict), in RTN")
        return ndm.Ephemeris(norad_id, name, object_id, list(times), pred.r_km, pred.v_kms,
                             0.5 * (cov + np.swapaxes(cov, 1, 2)), (comment,))
