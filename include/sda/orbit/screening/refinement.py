"""Filter (c), the refinement of candidate pairs: a pair's candidate (part, step)s become windows
``[t_k - h/2, t_k + h/2]`` (consecutive steps and the border of two parts joined), sub-sampled to
bracket the range-rate's sign changes, whose roots are the closest approaches (:mod:`.tca`); a pair
within the threshold for a step at an edge of the interval is worked out whole instead
(:mod:`.persistent`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import pandas as pd
from sgp4.api import Satrec

from sda.orbit.screening.grid import PART_SHIFT, Part
from sda.orbit.screening.persistent import NO_EVENT, edge_within, no_event_row, pair_events
from sda.orbit.screening.tca import Approach, approach_frame, refine_window

# Sub-samples per step inside refinement windows to bracket range-rate sign changes.
REFINE_SUBSAMPLES = 6


def step_windows(steps: Iterable[int], grid_start: float, step_s: float, start: float,
                 end: float) -> list[tuple[float, float]]:
    """Merge candidate steps into windows [t_k - h/2, t_k + h/2] (consecutive steps joined), clipped
    to the screening interval."""
    windows: list[list[int]] = []
    for k in sorted(set(int(s) for s in steps)):
        if windows and k == windows[-1][1] + 1:
            windows[-1][1] = k
        else:
            windows.append([k, k])
    out = []
    for k0, k1 in windows:
        lo = max(grid_start + (k0 - 0.5) * step_s, start)
        hi = min(grid_start + (k1 + 0.5) * step_s, end)
        if hi > lo:
            out.append((lo, hi))
    return out


def part_windows(codes: Iterable[int], parts: Sequence[Part]) -> list[tuple[float, float]]:
    """The refinement windows of one pair from its candidate (part, step) codes: each part's windows
    (:func:`step_windows`, clipped to the part), then merged across parts -- a window that runs over
    the border of two parts is one window, so a range-rate root at that border is still bracketed."""
    by_part: dict[int, list[int]] = {}
    for c in codes:
        by_part.setdefault(int(c) >> PART_SHIFT, []).append(int(c) & ((1 << PART_SHIFT) - 1))
    spans = sorted(w for k, steps in by_part.items()
                   for w in step_windows(steps, parts[k].start, parts[k].step_s, parts[k].start, parts[k].end))
    merged: list[list[float]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def refine_pairs(pairs: pd.DataFrame, satrecs: dict[int, Satrec], grid_start: float, step_s: float,
                 start: float, end: float, threshold_km: float, parts: Sequence[Part] | None = None) -> pd.DataFrame:
    """``pairs`` has primary_id, secondary_id, steps (list of candidate steps; with ``parts``, codes
    part << PART_SHIFT | step). Returns the closest approaches with miss < threshold and TCA in
    [start, end), columns of :data:`APPROACH_COLUMNS`, plus ``flag`` (None: a range-rate root; else
    persistent proximity, :func:`pair_events`) and ``exact`` (the pair's events over the whole of
    [start, end) were worked out by :func:`pair_events`: they replace any other of the pair's).

    A pair whose windows touch ``start`` or ``end`` may be a persistent proximity (closest at the
    edge, or within the threshold throughout): when it is within the threshold there for a whole
    step (two grid times), its events are those of :func:`pair_events` over the whole interval."""
    parts = list(parts) if parts is not None else [Part(grid_start, end, step_s)]
    rows: list[Approach] = []
    flags: list[str | None] = []
    exact: list[bool] = []
    cache: dict = {}
    for p, s, steps in zip(pairs["primary_id"], pairs["secondary_id"], pairs["steps"]):
        sat1, sat2 = satrecs.get(int(p)), satrecs.get(int(s))
        if sat1 is None or sat2 is None:
            continue
        # clipped to [start, end): a part's grid may begin before start (the focus grid, anchored)
        windows = [(max(lo, start), min(hi, end)) for lo, hi in part_windows(steps, parts) if hi > start and lo < end]
        if windows and (windows[0][0] <= start or windows[-1][1] >= end) and \
                edge_within(sat1, sat2, start, end, threshold_km, step_s):
            found = pair_events(int(p), int(s), sat1, sat2, start, end, threshold_km, step_s, cache)
            rows.extend(a for a, _ in found)
            flags.extend(f for _, f in found)
            exact.extend([True] * len(found))
            if not found:  # remember that the pair was worked out whole: no event is also an answer
                rows.append(no_event_row(int(p), int(s)))
                flags.append(NO_EVENT)
                exact.append(True)
            continue
        for lo, hi in windows:
            n_sub = max(2, int(math.ceil((hi - lo) / step_s * REFINE_SUBSAMPLES)))
            for a in refine_window(p, s, sat1, sat2, lo, hi, n_sub):
                if a.miss_km < threshold_km and start <= a.tca_unix < end:
                    rows.append(a)
                    flags.append(None)
                    exact.append(False)
    return approach_frame(rows, flags, exact)
