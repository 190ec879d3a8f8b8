"""SGP4 health: for each object, the first of a set of times at which SGP4 fails (its error codes
1-6), so that callers flag and skip that object instead of failing."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

import numpy as np
from sgp4.api import Satrec

from sda.orbit.catalog.entries import CatalogEntry
from sda.orbit.frames import propagate

# SGP4's error codes (Vallado's SGP4.cpp; ``sgp4.api.SGP4_ERRORS`` words them for programmers).
SGP4_ERRORS = {
    1: "mean eccentricity out of range (not 0 <= e < 1)",
    2: "mean motion below zero",
    3: "perturbed eccentricity out of range (not 0 <= e <= 1)",
    4: "semi-latus rectum below zero",
    5: "epoch elements are sub-orbital (no longer raised by modern SGP4)",
    6: "satellite has decayed (orbit radius below one Earth radius)",
}


def sgp4_error_meaning(code: int) -> str:
    return SGP4_ERRORS.get(int(code), f"unknown SGP4 error {int(code)}")


@dataclasses.dataclass(frozen=True)
class PropagationHealth:
    """How one object fares with SGP4 over the times asked: ``error`` 0 when it propagates at all of
    them, else SGP4's code at the earliest failing time ``first_failure_unix``."""

    norad_id: int
    error: int
    first_failure_unix: float | None
    meaning: str

    @property
    def ok(self) -> bool:
        return self.error == 0

    @property
    def first_failure(self) -> dt.datetime | None:
        if self.first_failure_unix is None:
            return None
        return dt.datetime.fromtimestamp(self.first_failure_unix, dt.timezone.utc)


def propagation_health(objects: Sequence[CatalogEntry | Satrec], times_unix,
                       chunk_cells: int = 1_000_000) -> list[PropagationHealth]:
    """Per object (in the order given): the first of ``times_unix`` at which SGP4 fails, its error
    code and what the code means; ``error == 0`` (``ok``) when it never fails.

    ``objects`` are :class:`CatalogEntry` or ``Satrec``; ``times_unix`` (UTC unix seconds) is 1-D,
    shared by all objects, or 2-D with one row per object, as in :func:`sda.orbit.frames.propagate`.
    "First" is the earliest failing time, whatever the order of the times. SGP4 judges each time on
    its own and its failures are not monotonic (Vallado's 28872 is lost 50-55 min after its epoch yet
    propagates "fine" at 100 min), so treat an object as unusable from its first failure on, and use
    a grid fine enough for the question. Objects are propagated in chunks of about ``chunk_cells``
    (object x time) so that a whole catalogue fits in memory.
    """
    sats = [o.satrec if isinstance(o, CatalogEntry) else o for o in objects]
    ids = [int(o.norad_id) if isinstance(o, CatalogEntry) else int(o.satnum) for o in objects]
    times = np.asarray(times_unix, dtype=float)
    if times.ndim not in (1, 2) or (times.ndim == 2 and times.shape[0] != len(sats)):
        raise ValueError("times_unix must be 1-D, or 2-D with one row per object")
    n_times = times.shape[-1]
    out: list[PropagationHealth] = []
    if n_times == 0:
        return [PropagationHealth(i, 0, None, "ok") for i in ids]
    step = max(1, chunk_cells // n_times)
    for lo in range(0, len(sats), step):
        chunk = slice(lo, lo + step)
        chunk_times = times if times.ndim == 1 else times[chunk]
        err, _, _ = propagate(sats[chunk], chunk_times)
        for k, row in enumerate(err):
            row_times = chunk_times if chunk_times.ndim == 1 else chunk_times[k]
            failing = np.flatnonzero(row != 0)
            if failing.size == 0:
                out.append(PropagationHealth(ids[lo + k], 0, None, "ok"))
                continue
            first = failing[np.argmin(row_times[failing])]
            code = int(row[first])
            out.append(PropagationHealth(ids[lo + k], code, float(row_times[first]), sgp4_error_meaning(code)))
    return out
