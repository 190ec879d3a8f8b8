"""The renewal rule: which element set the screening propagates for an object that has a fused orbit.

Each usable fused orbit brings the element set fitted to it (:mod:`sda.orbit.screening.fitted_elements`), with the
largest distance from the fused prediction it was fitted to (``lines_max_m``). Where the recorded screening
already propagated an element set of the object, that set and its epoch are kept -- the object is not screened
again -- while it stays within ``renew_m`` beyond the new set's own fit error of the new set over the horizon;
the new set is screened otherwise (it is *renewed*). An object without a usable fused orbit keeps the
catalogue's newest element set.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np


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


def renew(rows: Iterable[Any], fused: Mapping[int, Mapping[str, Any]], screened: Mapping[int, tuple[str, str, float]],
          start: float, end: float, renew_m: float) -> Screened:
    """The catalogue's newest element sets (``rows``: dicts or Spark Rows with norad_id, line1, line2, epoch)
    with, for each object in ``fused`` (norad_id -> its usable fused orbit's line1, line2, epoch, lines_max_m),
    the element set fitted to it instead, its ``epoch`` the fit's -- or, by the rule above, the one the recorded
    screening propagated (``screened``: norad_id -> (line1, line2, epoch unix)) over the horizon [start, end]."""
    out, renewed, kept = [], 0, 0
    for r in rows:
        row = r.asDict() if hasattr(r, "asDict") else dict(r)
        f = fused.get(int(row["norad_id"]))
        if f is not None:
            row.update(line1=f["line1"], line2=f["line2"], epoch=f["epoch"])
            old = screened.get(int(row["norad_id"]))
            if old is not None and (old[0], old[1]) != (f["line1"], f["line2"]):
                if strays_m(old[:2], (f["line1"], f["line2"]), start, end) <= (
                        float(f["lines_max_m"] or 0.0) + renew_m):
                    row.update(line1=old[0], line2=old[1], epoch=dt.datetime.fromtimestamp(old[2], dt.timezone.utc))
                    kept += 1
                else:
                    renewed += 1
        out.append(row)
    return Screened(out, sum(1 for r in out if int(r["norad_id"]) in fused), renewed, kept)
