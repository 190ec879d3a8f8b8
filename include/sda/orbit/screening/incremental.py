"""Incremental screening: what to screen, what to keep.

A screening records its state (sda.lake.tables ``screening_state``, ``screening_events``): the horizon it
covered, the element-set epoch it screened per object, threshold, step and code version
(:func:`code_version`), and its open events. The next screening of [start, end) then screens only what
changed (:func:`plan_increment`):

* the newly opened slice [previous end, end): every object against every object;
* [start, previous end) for the objects whose element set changed (a new epoch, or new in the
  catalogue) against every object (:func:`sda.orbit.screening.focus_block_candidates`; the slice
  already holds the rest of their horizon);
* the pairs whose events ended before ``start`` (dropped: their TCA passed) and the persistent pairs
  are worked out whole (:func:`recheck_pairs`): a pair closest at the new start edge shows there.

Events of pairs of unchanged objects with TCA in [start, previous end) are kept as they are. A
change of threshold, step or code version, a start before the recorded one, a horizon not reaching
past the recorded one, or a request, make it a full screening: one part, all against all.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Iterable

import pandas as pd
from sgp4.api import Satrec

from sda.orbit.screening.events import empty_events
from sda.orbit.screening.grid import Part
from sda.orbit.screening.persistent import NO_EVENT, edge_within, is_persistent, no_event_row, pair_events
from sda.orbit.screening.tca import approach_frame

#: the focus part (changed objects against all) uses a grid this many times coarser than the
#: screening step: its cost is the propagation of the whole catalogue over the horizon, which the
#: coarser grid divides; the bounds still hold (their pads grow with h), and the second-order bound
#: (b'') keeps the pairs to refine as few as on the fine grid
FOCUS_STEP_FACTOR = 6
#: above this fraction of changed element sets a full screening costs no more than the increment
FULL_IF_CHANGED_FRACTION = 0.25


def focus_grid_start(start: float, step_s: float) -> float:
    """The focus grid's first time: the multiple of its step at or before ``start`` (whole seconds),
    so that every screening samples the same instants and :mod:`.ephemeris` can keep them; the
    refinement keeps only approaches from ``start`` on."""
    every = step_s * FOCUS_STEP_FACTOR
    return math.floor(start / every) * every if every == int(every) and start == int(start) else start


def code_version() -> str:
    """Digest of the screening package's source (every module of :mod:`sda.orbit.screening`, in name
    order): a new screening code makes the next screening a full one."""
    import importlib
    import inspect
    import pkgutil
    import sys

    package = sys.modules[__package__]
    try:
        names = sorted(m.name for m in pkgutil.iter_modules(package.__path__))
        modules = [package, *(importlib.import_module(f"{__package__}.{name}") for name in names)]
        text = "".join(inspect.getsource(m) for m in modules)
    except (OSError, TypeError):  # pragma: no cover - no source (a frozen build): the package's own name
        text = __package__
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclasses.dataclass
class ScreeningState:
    """What the last screening recorded: horizon [start, end), its parameters, the element-set epoch
    (unix seconds) it screened per object, and its open events (:data:`EVENT_COLUMNS`)."""

    start: float
    end: float
    threshold_km: float
    step_s: float
    code_version: str
    epochs: dict[int, float]
    events: pd.DataFrame


@dataclasses.dataclass
class IncrementPlan:
    full: bool
    reason: str
    parts: list[Part]
    changed: set[int]
    kept: pd.DataFrame  # open events kept as they are
    recheck: set[tuple[int, int]]  # pairs worked out whole (pair_events) on the driver
    dropped: int = 0  # open events whose TCA passed

    @property
    def focus_ids(self) -> set[int]:
        return {n for part in self.parts if part.focus for n in part.focus}


def _full_reason(previous: ScreeningState, start: float, end: float, threshold_km: float, step_s: float,
                 version: str) -> str | None:
    """Why the recorded screening cannot be continued (a full screening), or None."""
    for name, old, new in (("threshold_km", previous.threshold_km, threshold_km), ("step_s", previous.step_s, step_s)):
        if not math.isclose(old, new, rel_tol=0, abs_tol=1e-9):
            return f"{name} changed ({old:g} -> {new:g})"
    if previous.code_version != version:
        return f"screening code changed ({previous.code_version} -> {version})"
    if start < previous.start:
        return "screening start before the recorded one"
    if start >= previous.end or end < previous.end:
        return "horizon does not continue the recorded one"
    return None


def _triage(events: pd.DataFrame, changed: set[int], gone: set[int],
            start: float) -> tuple[pd.DataFrame, set[tuple[int, int]], int]:
    """The recorded open events sorted out: (those kept as they are, the pairs worked out whole --
    persistent ones, and those whose TCA passed --, how many passed). Events of changed objects are
    neither (their objects are screened again); those of objects gone from the catalogue go."""
    if not len(events):
        return empty_events(), set(), 0
    persistent = events["flag"].map(is_persistent).astype(bool)
    passed = (events["tca_unix"] < start) & ~persistent
    involved = events["primary_id"].isin(changed) | events["secondary_id"].isin(changed)
    kept = events[~persistent & ~passed & ~involved]
    recheck = {(int(p), int(s)) for p, s in zip(events.loc[persistent | passed, "primary_id"],
                                               events.loc[persistent | passed, "secondary_id"])}
    if gone:
        kept = kept[~kept["primary_id"].isin(gone) & ~kept["secondary_id"].isin(gone)]
        recheck = {pair for pair in recheck if not (set(pair) & gone)}
    return kept, recheck, int(passed.sum())


def plan_increment(previous: ScreeningState | None, epochs: dict[int, float], start: float, end: float,
                   threshold_km: float, step_s: float, version: str, full: bool = False) -> IncrementPlan:
    """What a screening of [start, end) has to do, given the recorded state (module docstring)."""
    def whole(reason: str) -> IncrementPlan:
        return IncrementPlan(True, reason, [Part(start, end, step_s)], set(epochs), empty_events(), set())

    if full:
        return whole("full screening requested")
    if previous is None:
        return whole("no screening recorded")
    reason = _full_reason(previous, start, end, threshold_km, step_s, version)
    if reason is not None:
        return whole(reason)
    changed = {n for n, e in epochs.items() if n not in previous.epochs or previous.epochs[n] != e}
    if len(changed) > FULL_IF_CHANGED_FRACTION * max(len(epochs), 1):
        return whole(f"{len(changed)} of {len(epochs)} element sets changed")
    events = previous.events if previous.events is not None else empty_events()
    gone = set(previous.epochs) - set(epochs)  # objects no longer in the catalogue: their events go
    kept, recheck, dropped = _triage(events, changed, gone, start)
    parts = []
    if end > previous.end:
        parts.append(Part(previous.end, end, step_s))
    if changed:
        parts.append(Part(focus_grid_start(start, step_s), previous.end, step_s * FOCUS_STEP_FACTOR,
                          tuple(sorted(changed))))
    return IncrementPlan(False, "incremental", parts, changed, kept.reset_index(drop=True), recheck, dropped)


def recheck_pairs(pairs: Iterable[tuple[int, int]], satrecs: dict[int, Satrec], start: float, end: float,
                  threshold_km: float, step_s: float) -> pd.DataFrame:
    """:func:`pair_events` of pairs the plan names (dropped or persistent ones) that are within the
    threshold for a step at an edge; the others are left as the chain finds them (exact False)."""
    rows, flags = [], []
    cache: dict = {}
    for p, s in sorted(pairs):
        sat1, sat2 = satrecs.get(int(p)), satrecs.get(int(s))
        if sat1 is None or sat2 is None or not edge_within(sat1, sat2, start, end, threshold_km, step_s):
            continue
        found = pair_events(int(p), int(s), sat1, sat2, start, end, threshold_km, step_s, cache)
        rows += [a for a, _ in found] or [no_event_row(int(p), int(s))]
        flags += [f for _, f in found] or [NO_EVENT]
    return approach_frame(rows, flags, [True] * len(rows))
