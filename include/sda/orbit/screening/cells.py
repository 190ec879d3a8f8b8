"""Filter (b)'s spatial join: positions keyed by cubic cell, and the pairs in the same or adjacent
cells found by sorting the keys (a sort-merge join: binary searches, no all-pairs matrix)."""

from __future__ import annotations

import itertools

import numpy as np

# Cells of the grid (27 neighbours): only half of them are probed (lexicographically positive
# offsets plus the cell itself) so that every unordered pair is met exactly once.
HALF_NEIGHBOURS: tuple[tuple[int, int, int], ...] = tuple(
    o for o in itertools.product((-1, 0, 1), repeat=3) if o > (0, 0, 0) or o == (0, 0, 0)
)

# Cells are keyed by one int64: (cx, cy, cz) offset into [0, 2^21) each, z fastest, so the three
# cells of a column (cz - 1, cz, cz + 1) are one contiguous run of keys in sorted order.
_CELL_BITS = 21
_CELL_SPAN = 1 << _CELL_BITS
_CELL_OFFSET = _CELL_SPAN // 2
# The columns probed besides the object's own: lexicographically positive (dx, dy), so that with the
# own column's (0, 0, +1) and the cell itself every unordered pair of neighbouring cells is met once
# -- the 14 cells of HALF_NEIGHBOURS, probed with 9 binary searches instead of 28.
COLUMN_OFFSETS: tuple[tuple[int, int], ...] = ((0, 1), (1, -1), (1, 0), (1, 1))


def cell_keys(pos_km: np.ndarray, cell_km: float) -> np.ndarray:
    cells = np.floor(np.asarray(pos_km, float) / cell_km).astype(np.int64) + _CELL_OFFSET
    if cells.size and (cells.min() < 1 or cells.max() >= _CELL_SPAN - 1):
        raise ValueError(f"positions beyond the cell grid ({_CELL_SPAN} cells of {cell_km} km per axis)")
    return (cells[:, 0] * _CELL_SPAN + cells[:, 1]) * _CELL_SPAN + cells[:, 2]


def _expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each i, the indices j in [lo_i, hi_i): returned as flat (i, j) arrays."""
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    first = np.repeat(np.arange(len(lo)), counts)
    second = np.arange(total) - np.repeat(np.cumsum(counts) - counts - lo, counts)
    return first, second


def sorted_keys(pos_km: np.ndarray, cell_km: float) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``pos_km`` in cell-key order, and their keys in that order."""
    key = cell_keys(pos_km, cell_km)
    order = np.argsort(key)
    return order, key[order]


def half_neighbour_pairs(ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of positions (in sorted order) of sorted cell keys ``ks`` in the same or adjacent cells,
    each unordered pair once."""
    n = len(ks)
    firsts, seconds = [], []
    # own column: later rows of the same cell, then the cell above (key + 1)
    a, b = _expand(np.arange(1, n + 1), np.searchsorted(ks, ks + 1, side="right"))
    firsts.append(a)
    seconds.append(b)
    for dx, dy in COLUMN_OFFSETS:
        base = ks + (dx * _CELL_SPAN + dy) * _CELL_SPAN
        a, b = _expand(np.searchsorted(ks, base - 1, side="left"), np.searchsorted(ks, base + 1, side="right"))
        firsts.append(a)
        seconds.append(b)
    return np.concatenate(firsts), np.concatenate(seconds)


def all_neighbours(ks: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each key of ``query``, the positions in sorted ``ks`` of keys in the 27 surrounding cells:
    (query index, position) pairs."""
    firsts, seconds = [], []
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            base = query + (dx * _CELL_SPAN + dy) * _CELL_SPAN
            a, b = _expand(np.searchsorted(ks, base - 1, side="left"), np.searchsorted(ks, base + 1, side="right"))
            firsts.append(a)
            seconds.append(b)
    return np.concatenate(firsts), np.concatenate(seconds)


def neighbour_pairs(pos_km: np.ndarray, cell_km: float) -> tuple[np.ndarray, np.ndarray]:
    """Every unordered pair of rows of ``pos_km`` lying in the same or adjacent cubic cells of edge
    ``cell_km``, each once: a sort-merge join on the cell key (sort, then binary searches for the
    neighbouring columns), so the work grows with the pairs found, not with n^2."""
    order, ks = sorted_keys(pos_km, cell_km)
    first, second = half_neighbour_pairs(ks)
    return order[first], order[second]
