"""The whole chain without Spark, in one process (tests, benchmarks): the same functions
``jobs/conjunction.py`` runs on Spark -- the candidates of each part, their refinement, the rechecks
of an incremental plan and the combination into open events."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from sgp4.api import Satrec

from sda.orbit.screening.blocks import screen_block
from sda.orbit.screening.events import combine, empty_events
from sda.orbit.screening.grid import PART_SHIFT, Part, time_grid
from sda.orbit.screening.incremental import IncrementPlan, ScreeningState, code_version, plan_increment, recheck_pairs
from sda.orbit.screening.persistent import is_persistent
from sda.orbit.screening.propagation import ScreeningObjects
from sda.orbit.screening.refinement import refine_pairs


def _part_candidates(objects: ScreeningObjects, k: int, part: Part, threshold_km: float):
    """(a)+(b)+(b') of part ``k``: the candidates' primary ids, secondary ids and (part, step) codes --
    those before either object's first SGP4 failure --, the (a)+(b) pair-steps, and per object SGP4
    refused, the time of its first failure."""
    block = screen_block(objects, part, time_grid(part.start, part.end, part.step_s), 0, threshold_km)
    fail = {n: part.start + st * part.step_s for n, (st, _) in block.errors.items()}
    t = part.start + block.step * part.step_s
    ok = np.array([t_ < min(fail.get(int(a), np.inf), fail.get(int(b), np.inf))
                   for a, b, t_ in zip(block.primary_id, block.secondary_id, t)], dtype=bool)
    codes = (np.int64(k) << PART_SHIFT) | block.step[ok]
    return block.primary_id[ok], block.secondary_id[ok], codes, block.pair_steps_grid, fail


def screen_parts(objects: ScreeningObjects, parts: Sequence[Part], start: float, end: float, threshold_km: float,
                 step_s: float) -> tuple[pd.DataFrame, dict[str, int]]:
    """(a)-(c) of every part in one process: the refine_pairs rows (flag, exact) and filter counts."""
    by_id = dict(zip(objects.norad_ids.tolist(), objects.satrecs))
    codes_p, codes_s, codes = [], [], []
    grid = 0
    errors: dict[int, float] = {}
    for k, part in enumerate(parts):
        primary, secondary, code, grid_count, fail = _part_candidates(objects, k, part, threshold_km)
        grid += grid_count
        for n, t_fail in fail.items():
            errors[n] = min(errors.get(n, np.inf), t_fail)
        codes_p.append(primary)
        codes_s.append(secondary)
        codes.append(code)
    cat = lambda xs: np.concatenate(xs) if xs else np.empty(0, dtype=np.int64)  # noqa: E731
    linear = pd.DataFrame({"primary_id": cat(codes_p), "secondary_id": cat(codes_s), "step": cat(codes)})
    if len(linear):
        pairs = (linear.groupby(["primary_id", "secondary_id"], as_index=False)["step"].agg(list)
                 .rename(columns={"step": "steps"}))
    else:
        pairs = pd.DataFrame({"primary_id": [], "secondary_id": [], "steps": []})
    found = refine_pairs(pairs, by_id, start, step_s, start, end, threshold_km, parts)
    return found, {"pair_steps_grid": grid, "pair_steps_linear": len(linear), "pairs_linear": len(pairs),
                   "sgp4_errors": len(errors)}


def screen(norad_ids: Sequence[int], satrecs: Sequence[Satrec], start: float, end: float,
           threshold_km: float, step_s: float) -> tuple[pd.DataFrame, dict[str, int]]:
    """Screen a catalogue with the same chain as the Spark job, in one process (tests, benchmarks):
    the open events (:data:`EVENT_COLUMNS`, persistent proximities flagged) and the filter counts."""
    objects = ScreeningObjects.from_satrecs(norad_ids, satrecs)
    found, counts = screen_parts(objects, [Part(start, end, step_s)], start, end, threshold_km, step_s)
    events = combine(empty_events(), found)
    metrics = {
        "objects": len(objects.norad_ids),
        "steps": len(time_grid(start, end, step_s)),
        **objects.figures(threshold_km, step_s),  # cells, fast objects, pairs_all, pairs_altitude
        **counts,
        "events": len(events),
        "persistent": int(events["flag"].map(is_persistent).sum()) if len(events) else 0,
    }
    return events, metrics


def screen_increment(norad_ids: Sequence[int], satrecs: Sequence[Satrec], epochs: dict[int, float],
                     previous: ScreeningState | None, start: float, end: float, threshold_km: float, step_s: float,
                     version: str | None = None,
                     full: bool = False) -> tuple[pd.DataFrame, IncrementPlan, dict[str, int]]:
    """One screening in one process, incremental on ``previous`` where it can be (tests, benchmarks):
    the open events, the plan it followed and the filter counts. ``jobs/conjunction.py`` runs the same
    plan with the parts on Spark."""
    plan = plan_increment(previous, epochs, start, end, threshold_km, step_s, version or code_version(), full)
    objects = ScreeningObjects.from_satrecs(norad_ids, satrecs)
    found, counts = screen_parts(objects, plan.parts, start, end, threshold_km, step_s)
    by_id = dict(zip(objects.norad_ids.tolist(), objects.satrecs))
    rechecked = recheck_pairs(plan.recheck, by_id, start, end, threshold_km, step_s)
    return combine(plan.kept, found, rechecked), plan, counts
