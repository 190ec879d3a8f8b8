"""bench/manoeuvres.py ``--correlate``: the association and fits the pipeline makes, arc window after arc window
(its docstring, 2-3).

Per 6-hour arc window ``k``, in event-time order, as the ``correlate`` and ``fuse`` stages do:

1. the window's observations decided by the correlate stage's code: with no fused orbit to decide against (the
   first windows) :func:`sda.sim.scoring.correlate` (``correlate_frame`` per 60 s bucket, element sets); else the
   fuse stage's re-association, :func:`sda.orbit.correlation.reassociation.retest`, against the window's basis:
   per object its newest converged fused orbit fitted over at least ``settings.fusion_min_span_s`` of windows
   ``k - 4 .. k - 1`` (:data:`sda.pipeline.reassociation.LOOKBACK_WINDOWS`), the wider pass included;
2. the objects with correlated rows in ``k`` fitted there (:func:`sda.orbit.fusion.arcs.fuse_object`, the prior
   their newest converged fused orbit of an earlier window, :data:`sda.orbit.fusion.arcs.PRIOR_MAX_AGE_ARCS` at
   most), with the rows held for want of an object inside the
   gate that name them as ``candidate`` rows (:func:`sda.pipeline.manoeuvres.held_observations`) and the rows after
   the prior's epoch no converged fit took (``waiting``, as jobs/fuse.py's ``waiting_rows`` reads them).

What it leaves out: arrival order (the windows are decided once, in order: the fixed point the split-run tests
check the stage reaches), the sensor calibrations, and the acquire stage.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd
from common import log

from sda.pipeline.reassociation import LOOKBACK_WINDOWS


def _fuse_window(job: tuple) -> tuple[int, list[dict], float]:
    from sda.orbit.fusion.arcs import ArcSettings, fuse_object

    norad, obs, previous, line1, line2, sigmas, min_span_s = job
    t = time.perf_counter()
    rows = fuse_object(norad, obs, previous, line1, line2, sigmas, ArcSettings(lines_min_span_s=min_span_s))
    return norad, rows, time.perf_counter() - t


def _basis(rows: dict[int, list[dict]], k: int, arc_s: float, min_span_s: float) -> dict[int, dict]:
    """Per object its fused orbit window ``k`` is decided against (module docstring, 1)."""
    out = {}
    for norad, fitted in rows.items():
        usable = [r for r in fitted if (k - LOOKBACK_WINDOWS) * arc_s <= r["window_start_unix"] < k * arc_s
                  and r["status"] == "converged" and r["epoch_unix"] - r["fit_start_unix"] >= min_span_s]
        if usable:
            out[norad] = max(usable, key=lambda r: r["window_start_unix"])
    return out


def _previous(fitted: list[dict], k: int, arc_s: float) -> dict | None:
    """The prior the fuse stage gives window ``k``: the newest converged row of the windows before it (``fuse_object``
    refuses one too old, as in the stage)."""
    earlier = [r for r in fitted if r["window_start_unix"] < k * arc_s and r["status"] == "converged"]
    return max(earlier, key=lambda r: r["window_start_unix"]) if earlier else None


def _waiting(own: dict[int, pd.DataFrame], previous: dict | None, k: int, arc_s: float) -> pd.DataFrame:
    """The rows the fuse stage reads as waiting (jobs/fuse.py, waiting_rows): the object's correlated rows after its
    prior's epoch in the windows before ``k``."""
    from sda.orbit.times import unix_seconds

    if previous is None:
        return pd.DataFrame()
    after = [w for w in own if previous["epoch_unix"] // arc_s <= w < k]
    if not after:
        return pd.DataFrame()
    rows = pd.concat([own[w] for w in sorted(after)], ignore_index=True)
    return rows[unix_seconds(rows["event_time"]) > previous["epoch_unix"]].assign(candidate=False, waiting=True)


def _decide(part: pd.DataFrame, k: int, cat: tuple, basis: dict, arc_s: float) -> pd.DataFrame:
    """Window ``k``'s observations with the association columns (module docstring, 1)."""
    from sda.orbit.correlation import OBSERVATION_COLUMNS, reassociation
    from sda.orbit.fusion.arcs import result_from_row
    from sda.sim import scoring

    ids, sats, model, sigmas, gate_km = cat
    if not basis:
        return scoring.correlate(part, ids, sats, gate_km, sigmas, model=model).assign(wide=False)
    fits = {n: result_from_row(r) for n, r in basis.items()}
    decided = reassociation.retest(part[OBSERVATION_COLUMNS], ids, sats, fits, k * arc_s, gate_km,
                                   sigmas, model=model)
    return part.merge(decided, on="obs_id", validate="one_to_one")


def _per_object(decided: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """Each object with correlated rows: those rows and the held rows that name it (``candidate``)."""
    from sda.orbit.correlation import REASON_NO_CANDIDATE

    own = decided[decided["status"] == "correlated"].assign(candidate=False)
    held = decided[(decided["status"] != "correlated") & (decided["reason"] == REASON_NO_CANDIDATE)
                   & decided["nearest_norad_id"].notna()]
    held = held.assign(norad_id=held["nearest_norad_id"], candidate=True)
    rows = pd.concat([own, held[held["nearest_norad_id"].isin(own["norad_id"])]], ignore_index=True)
    return {int(n): g for n, g in rows.groupby(rows["norad_id"].astype("int64"))}


def associate_and_fuse(obs: pd.DataFrame, ids: list, sats: list, lines: dict, workers: int) -> tuple[dict, dict]:
    """norad -> (its fused rows, seconds), window after window (module docstring), and the association's figures
    against the truth."""
    from sda.config.settings import Settings
    from sda.orbit import correlation
    from sda.orbit.estimation import registry_sigmas
    from sda.orbit.estimation.measurements import FIT_COLUMNS
    from sda.orbit.fusion.arcs import ArcSettings, window_index
    from sda.orbit.sensors import load_sensors, sensor_sigmas
    from sda.orbit.times import unix_seconds

    settings, arc_s = Settings(), ArcSettings().arc_s
    cat = (ids, sats, correlation.prediction_model(sats), sensor_sigmas(load_sensors()), settings.correlation_gate_km)
    fit_sigmas = registry_sigmas(load_sensors())
    k_of = window_index(unix_seconds(obs["event_time"]), arc_s)
    rows: dict[int, list[dict]] = defaultdict(list)
    own: dict[int, dict[int, pd.DataFrame]] = defaultdict(dict)  # per object and window, its correlated rows
    seconds: dict[int, float] = defaultdict(float)
    figures = {"windows": 0, "correlated": 0, "right": 0, "wrong": 0, "candidates": 0, "wider_pass": 0}
    spawn = multiprocessing.get_context("spawn")  # not forked (bench/correlation_tracking.py: held locks)
    with ProcessPoolExecutor(workers, mp_context=spawn) if workers > 1 else contextlib.nullcontext() as pool:
        for k in np.unique(k_of):
            t = time.perf_counter()
            decided = _decide(obs[k_of == k], int(k), cat, _basis(rows, int(k), arc_s, settings.fusion_min_span_s),
                              arc_s)
            groups = {n: g for n, g in _per_object(decided).items() if n in lines}
            _count(figures, decided, groups)
            jobs = []
            for n, g in groups.items():
                previous = _previous(rows[n], int(k), arc_s)
                own[n][int(k)] = g.loc[~g["candidate"].astype(bool), list(FIT_COLUMNS)]
                part = pd.concat([_waiting(own[n], previous, int(k), arc_s), g[list(FIT_COLUMNS) + ["candidate"]]
                                  .assign(waiting=False)], ignore_index=True)
                jobs.append((n, part, previous, *lines[n], fit_sigmas, settings.fusion_min_span_s))
            jobs.sort(key=lambda j: -len(j[1]))
            for norad, fitted, s in (pool.map if pool else map)(_fuse_window, jobs):
                rows[norad] += fitted
                seconds[norad] += s
            log(f"window {int(k)}: {len(decided)} observations decided, {len(jobs)} objects fitted in "
                f"{time.perf_counter() - t:.0f} s")
    return {n: (fitted, seconds[n]) for n, fitted in rows.items()}, figures


def _count(figures: dict, decided: pd.DataFrame, groups: dict) -> None:
    own = decided[decided["status"] == "correlated"]
    right = (own["norad_id"].astype("Int64") == own["true_id"]).fillna(False)
    figures["windows"] += 1
    figures["correlated"] += len(own)
    figures["right"] += int(right.sum())
    figures["wrong"] += int((~right).sum())
    figures["candidates"] += int(sum(g["candidate"].sum() for g in groups.values()))
    figures["wider_pass"] += int(decided["wide"].sum())
