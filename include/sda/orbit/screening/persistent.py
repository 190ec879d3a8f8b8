"""Persistent proximity: two objects that stay close (formation flyers, docked or co-located objects,
a deployment) may have no range-rate root in the window -- closest at one of its edges -- or be within
the threshold all along. Such a pair is worked out whole (:func:`pair_events`) and reported once per
pair, at its smallest distance in the window, with a flag (:data:`PERSISTENT_FLAGS`); its event id is
the pair's (:func:`persistent_event_id`)."""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
from sgp4.api import Satrec

from sda.orbit.screening.tca import Approach, approach_at, roots_of, states_at

PERSISTENT_WHOLE = "persistent: within the threshold for the whole window"
PERSISTENT_START = "persistent: closest at the window start, no approach inside"
PERSISTENT_END = "persistent: closest at the window end, no approach inside"
NO_EVENT = "none"  # a pair worked out whole (exact) without any event: a marker row, dropped later
PERSISTENT_FLAGS = (PERSISTENT_WHOLE, PERSISTENT_START, PERSISTENT_END)


def is_persistent(flag) -> bool:
    return isinstance(flag, str) and flag.startswith("persistent")


def persistent_event_id(primary_id: int, secondary_id: int) -> str:
    """A persistent proximity is one event per pair, whatever its time: sha256 of the pair."""
    return hashlib.sha256(f"{int(primary_id)}|{int(secondary_id)}|persistent".encode()).hexdigest()


def no_event_row(p: int, s: int) -> Approach:
    """The marker row of a pair worked out whole without any event (flag :data:`NO_EVENT`)."""
    return Approach(p, s, *([float("nan")] * (len(dataclasses.fields(Approach)) - 2)))


def _distances(sat1: Satrec, sat2: Satrec, times: np.ndarray) -> np.ndarray | None:
    e1, r1, _ = states_at(sat1, times)
    e2, r2, _ = states_at(sat2, times)
    if e1.any() or e2.any():
        return None
    return np.linalg.norm(r1 - r2, axis=-1)


def edge_samples(start: float, end: float, step_s: float) -> np.ndarray:
    """The times a window's proximity is judged at: ``start + k h`` inside [start, end), and the end
    (1 ms before it: TCAs are in [start, end))."""
    ts = start + step_s * np.arange(int(math.ceil((end - start) / step_s - 1e-9)), dtype=float)
    return np.append(ts, end - 1e-3)


def edge_within(sat1: Satrec, sat2: Satrec, start: float, end: float, threshold_km: float, step_s: float) -> bool:
    """Within the threshold for a whole step at an edge of [start, end): at its first two or last two
    judging times (:func:`edge_samples`). A fast pair crossing the threshold at an edge is not."""
    ts = edge_samples(start, end, step_s)
    if len(ts) < 2:
        return False
    d = _distances(sat1, sat2, np.array([ts[0], ts[1], ts[-2], ts[-1]]))
    if d is None:
        return False
    return bool((d[0] < threshold_km and d[1] < threshold_km) or (d[2] < threshold_km and d[3] < threshold_km))


def _edge_event(p: int, s: int, sat1: Satrec, sat2: Satrec, ts: np.ndarray, inside: np.ndarray,
                roots: list[Approach]) -> tuple[Approach, str] | None:
    """The pair's persistent proximity at an edge, or None: within the threshold at the first two
    judging times with no root before the distance first reaches it -> :data:`PERSISTENT_START` at
    the start (the same at the end); the closer edge if both."""
    edges = []
    if inside[0] and inside[1]:
        first_out = ts[int(np.argmin(inside))]
        if not any(a.tca_unix <= first_out for a in roots):
            edges.append((ts[0], PERSISTENT_START))
    if inside[-1] and inside[-2]:
        last_out = ts[len(ts) - 1 - int(np.argmin(inside[::-1]))]
        if not any(a.tca_unix >= last_out for a in roots):
            edges.append((ts[-1], PERSISTENT_END))
    found = [(a, flag) for t, flag in edges if (a := approach_at(p, s, sat1, sat2, t)) is not None]
    return min(found, key=lambda x: x[0].miss_km) if found else None


def pair_events(p: int, s: int, sat1: Satrec, sat2: Satrec, start: float, end: float, threshold_km: float,
                step_s: float, cache: dict | None = None) -> list[tuple[Approach, str | None]]:
    """Every event of one pair over [start, end), worked out on the pair alone: the range-rate roots
    with miss < threshold (brackets from samples one step apart over the whole interval: the pairs
    worked out whole move slowly relative to each other, their roots are a large part of an orbit
    apart), and persistent proximity judged at :func:`edge_samples`. ``cache`` (a dict) keeps each
    object's samples for the next pair of the same call (:func:`sda.orbit.screening.recheck_pairs`):

    * within the threshold at every judging time -> one event, flag :data:`PERSISTENT_WHOLE`, at the
      smallest distance (a root or an edge); its roots are not reported apart;
    * else within it at the first two judging times with no root under the threshold before the
      distance first reaches it -> :data:`PERSISTENT_START` at the start (the same at the end); one
      event per pair, the closer edge if both; the roots elsewhere are reported as usual.
    """
    ts = edge_samples(start, end, step_s)
    cache = {} if cache is None else cache

    def sampled(n: int, sat: Satrec):
        key = (n, start, end, step_s)
        if key not in cache:
            cache[key] = states_at(sat, ts)
        return cache[key]

    (e1, r1, v1), (e2, r2, v2) = sampled(p, sat1), sampled(s, sat2)
    ok = not (e1.any() or e2.any())
    d = np.linalg.norm(r1 - r2, axis=-1) if ok else None
    f = np.einsum("ij,ij->i", r1 - r2, v1 - v2) if ok else None
    roots = [a for a in roots_of(p, s, sat1, sat2, ts, f) if a.miss_km < threshold_km and start <= a.tca_unix < end]
    if d is None or len(ts) < 2:
        return [(a, None) for a in roots]
    inside = d < threshold_km
    if inside.all():
        edges = (approach_at(p, s, sat1, sat2, ts[0]), approach_at(p, s, sat1, sat2, ts[-1]))
        best = min(roots + [a for a in edges if a], key=lambda a: a.miss_km)
        return [(best, PERSISTENT_WHOLE)]
    out: list[tuple[Approach, str | None]] = [(a, None) for a in roots]
    edge = _edge_event(p, s, sat1, sat2, ts, inside, roots)
    if edge is not None:
        out.append(edge)
    return out
