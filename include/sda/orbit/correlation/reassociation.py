"""Re-association: an arc window's observations decided again against the fused orbits of the windows
before it, and what changed.

The correlate stage decides each observation when it arrives, on the catalogue's element sets. The
``fuse`` stage then, window after window, decides the window's observations again with
:func:`retest`: the same correlator (:func:`sda.orbit.correlation.correlate_frame`, one call per
event-time bucket), each object with a usable fused orbit of an earlier window (its *basis*,
:func:`basis_digest`) predicted by it with its full covariance (:mod:`sda.orbit.correlation.tracks`), the
others by their element set. An observation's final association is therefore a function of the
observation, the catalogue and the fused orbits of the windows before its own, and those orbits are
functions of the earlier windows' final associations: processed in window order, there is one answer
whatever the file order or run split. :func:`compare` says which rows the new decision rewrites and
which of them *move* (another status or object), and why.

A **wider pass** then looks for the observations no gate took (not the held cross-tags) among the element
sets with their modelled sigmas times :data:`WIDE_SIGMA_SCALE` (the same correlator, the same position limit
``gate_km``, the same commit and ambiguity rules); an observation it associates is marked ``wide``. It finds
two kinds: an object never fused, whose element set the uncertainty model under-covers (its observations fell
outside the gate, so it was never correlated, so never fused), and an object that burned since its fused orbit
(outside that orbit's gate of tens of metres and, a few revolutions on, outside its element set's modelled
one), whose observations the manoeuvre test needs. Every object is a candidate there, so the likelier of an
observation's widened candidates takes it, or none when two are close.

The tracks are predicted on a grid anchored at the window's start, so a row decided again in another run
is measured on the same nodes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from sda.orbit.correlation.columns import OBSERVATION_COLUMNS, RESIDUAL_COLUMNS, RESULT_COLUMNS
from sda.orbit.correlation.correlate import BUCKET_S, correlate_frame
from sda.orbit.correlation.tracks import STEP_S, from_results
from sda.orbit.estimation.estimator import OdResult
from sda.orbit.times import unix_seconds

__all__ = ["OBSERVATION_COLUMNS", "RESIDUAL_COLUMNS", "PREFIX", "STORED", "basis_digest", "retest", "compare"]

#: ``correlate_run_id`` of a row re-association wrote: ``gated:<the run that first decided it>``
PREFIX = "gated:"
#: what each table stores of a decision (the rest of RESULT_COLUMNS is not kept there)
STORED = {
    "correlated": ("norad_id", "residual_m", "candidates", "ambiguous", "gate_d2", *RESIDUAL_COLUMNS),
    "uncorrelated": ("reason", "nearest_norad_id", "nearest_residual_m", "nearest_gate_d2"),
}
#: the wider pass's element-set sigmas, in the catalogue uncertainty model's (module docstring). Calibrated on
#: bench/correlation.py --tracking's development seed 1 (enriched subset): 3, 5 and 8 took 43, 149 and 183 of the
#: 185 observations outside every gate of never-fused objects (along-track errors up to 22 model sigmas: fresh,
#: low, high-drag objects), none wrongly; with the fused objects candidates too, the same 183, and on
#: bench/manoeuvres.py --correlate's development seed 3, 19 of 28 burns >= 0.5 m/s found within two passes
#: instead of 13. The figures on other seeds are in docs/performance.md
WIDE_SIGMA_SCALE = 8.0
#: numbers are compared to this relative tolerance (a track's nodes are predicted anew each run)
RTOL = 1e-6


def basis_digest(fits: Mapping[int, Mapping]) -> str:
    """Names the fused orbits a window is decided against (norad_id -> its fused-orbit row): their
    ``fused_id`` and state, so a refit of the same observations on another prior is another basis."""
    text = "\n".join(f"{n}:{r['fused_id']}:{r['epoch_unix']!r}:{r['x_km']!r}:{r['y_km']!r}:{r['z_km']!r}"
                     for n, r in sorted(fits.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def retest(obs: pd.DataFrame, norad_ids: Sequence[int], satrecs: Sequence, fits: Mapping[int, OdResult],
           window_start: float, gate_km: float, sigmas: Mapping, **kwargs) -> pd.DataFrame:
    """Decide the observations ``obs`` (one arc window's, from ``window_start`` unix seconds on) again: the
    objects of ``fits`` (norad_id -> fused orbit, each epoch before ``window_start``) predicted by them, the rest
    of the catalogue ``(norad_ids, satrecs)`` by its element sets. ``kwargs``: :func:`correlate_frame`'s
    (``model``, ``bodies``, ``light_time``). One row per observation, :data:`RESULT_COLUMNS` and ``wide``: the
    decision on the fused orbits, except where it finds no object and the element sets' decision associates one
    (that stands: after a burn the fused orbit no longer gates its object's observations, and the manoeuvre test
    needs them); then the wider pass (module docstring) over the rows no gate took."""
    if len(obs) == 0:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in (RESULT_COLUMNS | {"wide": "bool"}).items()})
    obs = obs.reset_index(drop=True)
    rows_of = {int(n): i for i, n in enumerate(norad_ids)}
    t = unix_seconds(obs["event_time"])
    bucket = np.floor(t / BUCKET_S).astype(np.int64)
    results = {rows_of[int(n)]: r for n, r in fits.items() if int(n) in rows_of}
    if results:  # predicted only for the objects some observation may be of (the correlator's prefilter)
        near = _candidates(obs, t, bucket, satrecs, gate_km, kwargs)
        results = {row: r for row, r in results.items() if row in near}
    tracks = None
    if results:  # nodes anchored at the window's start: the same whichever rows a run decides again
        first = window_start + STEP_S * np.floor((float(t.min()) - window_start) / STEP_S)
        end = window_start + STEP_S * (np.floor((float(t.max()) - window_start) / STEP_S) + 2)
        tracks = from_results(results, float(max(first, window_start)), float(end))
    groups = list(pd.Series(np.arange(len(obs))).groupby(bucket).groups.values())

    def decide(with_tracks) -> pd.DataFrame:
        return pd.concat([correlate_frame(obs.iloc[idx].reset_index(drop=True), norad_ids, satrecs, gate_km, sigmas,
                                          tracks=with_tracks, **kwargs) for idx in groups], ignore_index=True)

    decided = decide(None)
    if tracks is not None:
        fused = decide(tracks)
        # the element sets' association stands where the fused orbits find no object (a burn's observations)
        keep = ((fused["status"] != "correlated") & (decided["status"] == "correlated")).to_numpy()
        decided = pd.concat([fused[~keep], decided[keep]]).sort_index()
    return _wider(decided, obs, bucket, norad_ids, satrecs, gate_km, sigmas, kwargs)


def _wider(decided: pd.DataFrame, obs: pd.DataFrame, bucket: np.ndarray, norad_ids: Sequence[int],
           satrecs: Sequence, gate_km: float, sigmas: Mapping, kwargs: Mapping) -> pd.DataFrame:
    """``decided`` with the wider pass (module docstring) over its rows no gate took, and the ``wide`` column."""
    from sda.orbit.correlation.columns import REASON_NO_CANDIDATE
    from sda.orbit.correlation.correlate import prediction_model

    decided = decided.assign(wide=False)
    left = np.flatnonzero(((decided["status"] != "correlated") & (decided["reason"] == REASON_NO_CANDIDATE)).to_numpy())
    if len(left) == 0:
        return decided
    wide_kwargs = {**kwargs, "model": (kwargs.get("model") or prediction_model(satrecs)).widened(WIDE_SIGMA_SCALE)}
    where = pd.Index(obs["obs_id"]).get_indexer(decided["obs_id"].to_numpy()[left])  # decided is in bucket order
    sub = obs.iloc[where].reset_index(drop=True)
    parts = [correlate_frame(sub.iloc[idx].reset_index(drop=True), norad_ids, satrecs, gate_km, sigmas, **wide_kwargs)
             for idx in pd.Series(np.arange(len(sub))).groupby(bucket[where]).groups.values()]
    again = pd.concat(parts, ignore_index=True).set_index("obs_id").reindex(sub["obs_id"]).reset_index()
    took = (again["status"] == "correlated").to_numpy()
    if not took.any():
        return decided
    found = again[took].set_axis(left[took]).assign(wide=True)[list(decided.columns)]
    return pd.concat([decided.drop(index=left[took]), found]).sort_index().astype(RESULT_COLUMNS | {"wide": bool})


def _candidates(obs: pd.DataFrame, t: np.ndarray, bucket: np.ndarray, satrecs: Sequence, gate_km: float,
                kwargs: Mapping) -> set[int]:
    """Catalogue rows the correlator's spatial prefilter keeps for some observation of ``obs`` (per event-time
    bucket and sensor kind, on the element sets: a fused orbit lies inside its element set's error, which the
    prefilter's radius covers)."""
    from sda.orbit.correlation import association
    from sda.orbit.correlation.columns import REQUIRED
    from sda.orbit.correlation.correlate import _reference, prediction_model

    model = kwargs.get("model") or prediction_model(satrecs)
    bodies = kwargs.get("bodies")
    bodies = np.ones(len(satrecs), dtype=bool) if bodies is None else bodies
    kinds = obs["sensor_kind"].to_numpy(dtype=object)
    found: set[int] = set()
    for b in np.unique(bucket):
        in_bucket = bucket == b
        for kind, needed in REQUIRED.items():
            if not set(needed) <= set(obs.columns):
                continue
            rows = np.flatnonzero(in_bucket & (kinds == kind) & obs[list(needed)].notna().all(axis=1).to_numpy())
            if len(rows) == 0:
                continue
            ref = _reference(satrecs, t[rows], model, bodies, gate_km)
            if ref is not None:
                found.update(association.candidate_pairs(kind, obs.iloc[rows], t[rows], ref)[1].tolist())
    return found


def _same(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Per row: both null, or equal (floats to :data:`RTOL`)."""
    na, nb = a.isna().to_numpy(), b.isna().to_numpy()
    if pd.api.types.is_float_dtype(b):
        x, y = pd.to_numeric(a, errors="coerce").to_numpy(dtype=float), b.to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            close = np.abs(x - y) <= RTOL * np.maximum(np.abs(x), np.abs(y)) + 1e-12
        return (na & nb) | (~na & ~nb & close)
    x = a.astype(object).to_numpy()
    y = b.astype(object).to_numpy()
    eq = np.array([bool(u == v) for u, v in zip(x, y)], dtype=bool) if len(x) else np.zeros(0, dtype=bool)
    return (na & nb) | (~na & ~nb & eq)


def compare(current: pd.DataFrame, decided: pd.DataFrame) -> pd.DataFrame:
    """``decided`` (RESULT_COLUMNS) with, per observation, what the tables hold of it now (``current``:
    ``obs_id``, ``status`` and the :data:`STORED` columns of its table): ``rewrite`` (the row changes),
    ``move`` (its status or object changes), ``from_status`` / ``from_norad_id`` / ``from_nearest_norad_id``
    and the ``why`` of a move.
    A row is rewritten when its table's stored columns differ (numbers beyond :data:`RTOL`)."""
    new = decided.reset_index(drop=True)
    cur = current.set_index("obs_id").reindex(new["obs_id"]).reset_index(drop=True)
    move = ~(_same(cur["status"], new["status"]) & _same(cur["norad_id"], new["norad_id"].astype("Float64")))
    rewrite = move.copy()
    for status, columns in STORED.items():
        rows = (~move) & (new["status"] == status).to_numpy()
        for c in columns:
            rewrite[rows] |= ~_same(cur.loc[rows, c], new.loc[rows, c]) if c in cur else True
    out = new.copy()
    out["rewrite"], out["move"] = rewrite, move
    out["from_status"] = cur["status"].to_numpy()
    out["from_norad_id"] = pd.array(pd.to_numeric(cur["norad_id"], errors="coerce"), dtype="Int64")
    out["from_nearest_norad_id"] = pd.array(pd.to_numeric(cur.get("nearest_norad_id"), errors="coerce"), dtype="Int64")
    wide = out["wide"] if "wide" in out else pd.Series(False, index=out.index)
    out["why"] = [_why(*values) for values in zip(out["status"], out["reason"], out["from_status"], move, wide)]
    return out


def _why(status: str, reason, was, moved: bool, wide: bool = False) -> str | None:
    """A move's reason, as the move log records it (None: not a move)."""
    if not moved:
        return None
    if status == "correlated" and wide:
        return "inside the wider gate"
    if status == "correlated":
        return "another object likelier" if was == "correlated" else "inside a gate now"
    return str(reason)
