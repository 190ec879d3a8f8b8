"""The time grid a screening samples, and the parts a screening is cut into (each part one grid of
its own: a full screening is one part, an incremental one a few, :mod:`.incremental`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np


def time_grid(start_unix: float, end_unix: float, step_s: float) -> np.ndarray:
    """``start + k h`` up to the first grid time at or after ``end`` (so every instant is within h/2)."""
    n = int(math.ceil((end_unix - start_unix) / step_s - 1e-9))
    return start_unix + step_s * np.arange(n + 1, dtype=float)


MIN_STEPS_PER_BLOCK = 60  # a task screens a block of grid steps: at least this many (one SatrecArray build each)
BLOCKS_PER_CORE = 3  # a few blocks per core even out the tasks (LEO-crowded steps cost more)


def step_blocks(n_steps: int, cores: int, per_core: int = BLOCKS_PER_CORE) -> list[tuple[int, int]]:
    """[first, end) step ranges: about ``per_core`` per core, none under MIN_STEPS_PER_BLOCK."""
    count = max(1, min(cores * per_core, n_steps // MIN_STEPS_PER_BLOCK))
    edges = np.linspace(0, n_steps, count + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


# A candidate of an incremental screening names its part (one grid of its own) and its step in one
# int64: part << PART_SHIFT | step.
PART_SHIFT = 32


@dataclasses.dataclass(frozen=True)
class Part:
    """One piece of a screening: the grid ``start + k step_s`` over [start, end), all objects against
    all (``focus`` None) or only pairs with at least one object of ``focus`` (norad ids)."""

    start: float
    end: float
    step_s: float
    focus: tuple[int, ...] | None = None


def code_time(code: int, parts: list[Part] | tuple[Part, ...]) -> float:
    """The time of a candidate's (part, step) code: ``part << PART_SHIFT | step``."""
    part = parts[int(code) >> PART_SHIFT]
    return part.start + (int(code) & ((1 << PART_SHIFT) - 1)) * part.step_s
