"""The catalogue as the grid needs it, and its propagation over the grid: the objects' bounds
(:class:`ScreeningObjects`), the cell edges of the two grids (:class:`Grids`), the element sets as
they travel to Spark's executors (:class:`CatalogueLines`, parsed once per worker), and SGP4 over a
block of grid steps with one ``SatrecArray`` a chunk of steps at a time."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from sgp4.api import Satrec

from sda.orbit.frames import unix_to_jd
from sda.orbit.screening.bounds import SPEED_MARGIN, accel_bound_km_s2, altitude_band_pair_count, perigee_speed_km_s
from sda.orbit.screening.elements import satrecs_from_lines

# Objects no faster than this (every near-circular orbit, all of LEO but its eccentric members) share
# a grid whose cells are sized to their own speed; the few faster ones (GTO, Molniya, HEO perigees at
# up to ~11 km/s) are compared with everything on a second, coarser grid. One grid sized to the
# fastest object would hold ~2x the candidate pairs in the crowded LEO shells.
SLOW_SPEED_KM_S = 8.2


@dataclasses.dataclass(frozen=True)
class Grids:
    """Cell edges: a pair's relative motion in half a step is at most (V1 + V2) h / 2, so two objects
    within ``threshold`` at some instant are within ``threshold + Vmax h`` at the nearest grid time."""

    slow: np.ndarray  # mask of the objects on the fine grid
    slow_cell_km: float  # threshold + V_slow h: slow-slow pairs
    fast_cell_km: float  # threshold + V_max h: pairs with a fast object


@dataclasses.dataclass(frozen=True)
class ScreeningObjects:
    """The catalogue as the grid needs it: ids, SatrecArray, padded bands and acceleration bounds."""

    norad_ids: np.ndarray
    satrecs: list
    perigee_km: np.ndarray
    apogee_km: np.ndarray
    accel_km_s2: np.ndarray
    speed_km_s: np.ndarray  # bound on each object's speed: perigee speed x SPEED_MARGIN

    @classmethod
    def from_satrecs(cls, norad_ids: Sequence[int], satrecs: Sequence[Satrec]) -> "ScreeningObjects":
        perigee = np.array([s.a * s.radiusearthkm * (1 - s.ecco) - s.radiusearthkm for s in satrecs], dtype=float)
        apogee = np.array([s.a * s.radiusearthkm * (1 + s.ecco) - s.radiusearthkm for s in satrecs], dtype=float)
        speed = np.array([SPEED_MARGIN * perigee_speed_km_s(s) for s in satrecs], dtype=float)
        return cls(np.asarray(norad_ids, dtype=np.int64), list(satrecs), perigee, apogee,
                   accel_bound_km_s2(perigee), speed)

    @property
    def vmax_km_s(self) -> float:
        return max((perigee_speed_km_s(s) for s in self.satrecs), default=0.0)

    def grids(self, threshold_km: float, step_s: float) -> Grids:
        slow = self.speed_km_s <= SLOW_SPEED_KM_S
        v_slow = float(self.speed_km_s[slow].max()) if slow.any() else 0.0
        v_all = float(self.speed_km_s.max()) if len(self.speed_km_s) else 0.0
        return Grids(slow, float(threshold_km + v_slow * step_s), float(threshold_km + v_all * step_s))

    def figures(self, threshold_km: float, step_s: float) -> dict[str, Any]:
        """The catalogue's figures in a screening's metrics: the two grids' cells, the fast objects,
        all pairs and those the altitude bands (a) keep."""
        grids = self.grids(threshold_km, step_s)
        n = len(self.norad_ids)
        return {"cell_km": grids.slow_cell_km, "cell_fast_km": grids.fast_cell_km,
                "fast_objects": int((~grids.slow).sum()), "objects": n, "pairs_all": n * (n - 1) // 2,
                "pairs_altitude": altitude_band_pair_count(self.perigee_km, self.apogee_km, threshold_km)}


@dataclasses.dataclass(frozen=True)
class CatalogueLines:
    """What travels to the executors: the element sets as text (picklable, ~150 bytes an object)."""

    norad_ids: tuple[int, ...]
    line1: tuple[str, ...]
    line2: tuple[str, ...]

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for n, l1, l2 in zip(self.norad_ids, self.line1, self.line2):
            h.update(f"{n}|{l1}|{l2}\n".encode())
        return h.hexdigest()


_WORKER_OBJECTS: dict[str, tuple[ScreeningObjects, object]] = {}


def worker_objects(catalogue: CatalogueLines) -> tuple[ScreeningObjects, object]:
    """The catalogue's Satrecs and SatrecArray, built once per Python process (Spark reuses its
    Python workers across tasks, so a run parses each element set once per worker, not per task)."""
    from sgp4.api import SatrecArray

    key = catalogue.digest
    if key not in _WORKER_OBJECTS:
        _WORKER_OBJECTS.clear()  # one catalogue at a time: a new run's replaces the last
        objects = ScreeningObjects.from_satrecs(catalogue.norad_ids,
                                                satrecs_from_lines(catalogue.line1, catalogue.line2))
        _WORKER_OBJECTS[key] = (objects, SatrecArray(objects.satrecs) if objects.satrecs else None)
    return _WORKER_OBJECTS[key]


PROPAGATION_CHUNK_STEPS = 32  # steps propagated at once: n x 32 x 6 doubles (~20 MB for 13k objects)


def propagated_steps(arr, times: np.ndarray, ids: np.ndarray, first_step: int,
                      errors: dict[int, tuple[int, int]], ephemeris=None, reuse: bool = False):
    """Propagate with ``arr`` (a ``SatrecArray``) a chunk of steps at a time and yield, per step,
    (grid step ``first_step + k``, rows SGP4 propagated, positions, velocities); an object's first
    SGP4 error goes to ``errors`` (norad id -> (step, error code)). With ``ephemeris`` (an
    :class:`.ephemeris.Ephemeris` of the same objects), the states at its grid times are stored, and
    with ``reuse`` taken from it where it has them (the same doubles)."""
    times = np.asarray(times, dtype=float)
    for c0 in range(0, len(times), PROPAGATION_CHUNK_STEPS):
        chunk = times[c0:c0 + PROPAGATION_CHUNK_STEPS]
        if ephemeris is not None:
            err, r, v = ephemeris.states(arr, chunk, reuse)
        else:
            err, r, v = arr.sgp4(*unix_to_jd(chunk))
        for row in np.flatnonzero((err != 0).any(axis=1)):
            k = int(np.argmax(err[row] != 0))
            errors.setdefault(int(ids[row]), (first_step + c0 + k, int(err[row, k])))
        for k in range(err.shape[1]):
            yield first_step + c0 + k, err[:, k] == 0, np.ascontiguousarray(r[:, k, :]), v[:, k, :]
