"""One task of the candidates stage: a block of grid steps of one part screened
(:func:`screen_block`), what it reports as rows (:func:`block_frame`), and what the driver reads
back from the rows that are not candidates (:func:`summarise`).

A block's rows (columns :data:`BLOCK_COLUMNS`), by ``kind``:

* ``pair`` -- a candidate (pair, step) passing (a)+(b)+(b'), ``step`` = part << PART_SHIFT | step;
* ``count`` -- the block's (a)+(b) pair-steps, in ``count``;
* ``rows`` -- its ``pair`` rows, in ``count`` (they size the refinement);
* ``read`` -- the object-steps it read from the ephemeris cache (:mod:`.ephemeris`), in ``count``;
* ``error`` -- an object SGP4 refused from ``step`` on, its error code in ``count``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from sda.orbit.screening.candidates import BlockResult, block_candidates, focus_block_candidates
from sda.orbit.screening.grid import PART_SHIFT, Part, code_time
from sda.orbit.screening.propagation import ScreeningObjects

BLOCK_COLUMNS = ("kind", "primary_id", "secondary_id", "step", "count")


def screen_block(objects: ScreeningObjects, part: Part, times: np.ndarray, first_step: int, threshold_km: float,
                 satrec_array=None, ephemeris=None) -> BlockResult:
    """(a)+(b)+(b') of the steps ``first_step + k`` at ``times`` of ``part``: all against all, or
    its focus objects against all."""
    if part.focus is None:
        return block_candidates(objects, times, first_step, threshold_km, part.step_s, satrec_array, ephemeris)
    mask = np.isin(objects.norad_ids, np.asarray(part.focus, dtype=np.int64))
    return focus_block_candidates(objects, times, first_step, threshold_km, part.step_s, mask, satrec_array,
                                  ephemeris=ephemeris)


def block_frame(res: BlockResult, part_index: int, first_step: int, read: int = 0) -> pd.DataFrame:
    """The rows of one block of part ``part_index`` from its first step ``first_step``."""
    errors = sorted(res.errors.items())
    code = np.int64(part_index) << PART_SHIFT
    side = [("count", res.pair_steps_grid), ("rows", len(res.step)), ("read", read)]
    return pd.DataFrame({
        "kind": ["pair"] * len(res.step) + [kind for kind, _ in side] + ["error"] * len(errors),
        "primary_id": np.concatenate([res.primary_id, [-1] * len(side), [n for n, _ in errors]]).astype(np.int64),
        "secondary_id": np.concatenate([res.secondary_id, [-1] * (len(side) + len(errors))]).astype(np.int64),
        "step": code | np.concatenate([res.step, [first_step] * len(side),
                                       [st for _, (st, _) in errors]]).astype(np.int64),
        "count": np.concatenate([np.zeros(len(res.step)), [n for _, n in side],
                                 [c for _, (_, c) in errors]]).astype(np.int64),
    })


@dataclasses.dataclass
class BlockSummary:
    """The blocks' side rows added up: (a)+(b) pair-steps, candidate rows, object-steps read from
    the cache, and per object SGP4 refused, (time of its first failure, error code)."""

    pair_steps_grid: int
    candidate_rows: int
    ephemeris_read: int
    first_error: dict[int, tuple[float, int]]


def summarise(rows: Iterable[Mapping], parts: list[Part] | tuple[Part, ...]) -> BlockSummary:
    """:class:`BlockSummary` of the side rows (any but ``pair``) of the blocks of ``parts``."""
    totals = {"count": 0, "rows": 0, "read": 0}
    first_error: dict[int, tuple[float, int]] = {}
    for r in rows:
        if r["kind"] in totals:
            totals[r["kind"]] += int(r["count"])
        elif r["kind"] == "error":
            t = code_time(r["step"], parts)
            if r["primary_id"] not in first_error or t < first_error[r["primary_id"]][0]:
                first_error[int(r["primary_id"])] = (t, int(r["count"]))
    return BlockSummary(totals["count"], totals["rows"], totals["read"], first_error)
