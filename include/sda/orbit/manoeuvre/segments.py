"""One arc window fitted from a fused prior, burn by burn: the window's passes tested against the
prediction (:mod:`sda.orbit.manoeuvre.detection`), and at each confirmed burn the orbit re-fitted from the
passes after it, which then becomes the prediction the later passes are tested against.

:func:`fit_segments` returns the window's fit (its last segment's, with everything since the last
burn), the observations it stands for, the burns found (in time order) and the held observations
(uncorrelated, naming the object as nearest) that the fits explained: those are re-associated.

A detection that follows a burn inside the window first tries one burn for both (:func:`_one_burn`),
then the earlier run's other reading, the burn after its mildly failing first passes
(:func:`_later_reading`). Across windows neither is tried: the next window takes the earlier one's fit.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from sda.orbit.estimation.estimator import OdConfig, OdResult, fit
from sda.orbit.estimation.predict import Prediction, predict, prior_from_prediction, prior_from_result
from sda.orbit.manoeuvre import detection as mn

MERGE_RMS = 1.5  # weighted RMS at most this: one burn explains the passes after it
MERGE_OUTLIERS = (2, 0.03)  # and at most max(2, 3 %) of them edited out


@dataclasses.dataclass
class WindowFit:
    result: OdResult
    fitted: pd.DataFrame  # the observations the result stands for (since the last burn)
    manoeuvres: list[dict]
    reassociated: list[str]


def fit_segments(part: pd.DataFrame, tk: np.ndarray, held: np.ndarray, prev: OdResult, prev_id: str | None,
                 sigmas, config: OdConfig, ms: mn.ManoeuvreSettings) -> WindowFit | None:
    """The window's fit from the fused prior ``prev`` (module docstring); None when nothing is left to fit
    (only held observations, none explained)."""
    noise = config.noise
    passes = mn.pass_index(tk, part["sensor_id"].to_numpy(), ms.pass_gap_s, ms.max_pass_s)
    current, current_id, boundary, burn = prev, prev_id, -math.inf, None
    found: list[dict] = []
    reassociated: set[str] = set()
    since = np.zeros(len(tk), bool)  # the observations of the newest burn's re-fit
    while True:
        rest = tk > boundary
        sub, t_sub, held_sub = part[rest].reset_index(drop=True), tk[rest], held[rest]
        p_sub = np.unique(passes[rest], return_inverse=True)[1].reshape(-1)
        # one prediction of the current orbit: the prior at the first observation, the passes' tests
        starts = mn.pass_starts(t_sub, p_sub)
        predicted = predict(current, np.concatenate([[t_sub.min()], starts]), noise)
        prior = prior_from_prediction(current, predicted, 0)
        tests = mn.pass_tests(prior, current, sub, t_sub, p_sub, sigmas, noise, held_sub,
                              Prediction(*(getattr(predicted, f)[1:] for f in ("t", "r_km", "v_kms", "covariance"))),
                              config.light_time)
        opened = _opened(float(current.epoch), since, tk, passes, ms.max_pass_s)
        detection = mn.detect(tests, opened, ms)
        # a pass failing after a burn: one burn more, or the newest re-fit too short to predict? Asked at the
        # first failing pass (no confirmation needed: one burn explaining it declares nothing new)
        failing = mn.detect(tests, opened, dataclasses.replace(ms, confirm_passes=1)) if found else None
        if failing is not None:
            upto = np.zeros(len(tk), bool)
            upto[np.flatnonzero(rest)[p_sub <= failing.last]] = True
            merged = _one_burn(part, since | upto, held, burn, sigmas, config, ms)
            if merged is None and "_later" in found[-1]:  # the newest burn was after its run's first passes?
                merged, since, burn = _later_reading(found[-1], part, tk, since, burn, upto, held, sigmas, config, ms)
            if merged is not None:
                current, ids = merged
                reassociated |= ids
                since = since | upto
                _refine_dv(found[-1], current, config, keep_pre=True)
                boundary = float(current.epoch)
                if not (tk > boundary).any():
                    return WindowFit(current, part[since], found, sorted(reassociated))
                continue
        confirmed = None if detection is None else _confirm(detection, sub, t_sub, p_sub, held_sub, current, sigmas,
                                                             config, ms)
        if confirmed is None:
            return _last(sub, t_sub, held_sub, p_sub, tests, current, prior, part[since], found, reassociated, sigmas,
                         config, ms)
        post, manoeuvre, ids, use, burn = confirmed
        manoeuvre["prior_fused_id"] = current_id
        found.append(manoeuvre)
        reassociated |= ids
        since = np.zeros(len(tk), bool)
        since[np.flatnonzero(rest)[use]] = True
        later = mn.latest_run(tests, detection, opened, ms)
        if later is not None:  # the run's other reading, kept for the next detection in the window to decide
            rows = np.zeros(len(tk), bool)
            rows[np.flatnonzero(rest)[use & (p_sub >= later.first)]] = True
            manoeuvre["_later"] = (later, rows)
        current, current_id, boundary = post, None, float(post.epoch)
        if not (tk > boundary).any():
            return WindowFit(post, part[since], found, sorted(reassociated))


def _opened(epoch: float, since: np.ndarray, tk: np.ndarray, passes: np.ndarray, max_pass_s: float) -> float:
    """Where a burn after the current orbit can have happened: after the first observation of its last pass
    (a burn during that pass barely shows in it). For a burn's re-fit (``since``: its observations) that pass
    is known; for the window's prior (an earlier window's fit) it is not, and it began at most
    ``max_pass_s`` before the prior's epoch."""
    if not since.any():
        return epoch - max_pass_s
    last = passes[since][np.argmax(tk[since])]
    return min(epoch, float(tk[since & (passes == last)].min()))


def _later_reading(manoeuvre: dict, part, tk: np.ndarray, since: np.ndarray, burn, upto: np.ndarray,
                   held: np.ndarray, sigmas, config: OdConfig, ms):
    """When a detection follows a burn whose run began with mildly failing passes and one burn cannot explain
    both, the run's other reading (:func:`sda.orbit.manoeuvre.detection.latest_run`): the burn after those passes,
    just before the loud one. If one burn so placed explains the loud pass and the new ones
    (:func:`_one_burn`), the manoeuvre takes that reading's bracket and test. A re-fit that took a pre-burn
    pass for a post-burn one fits its two passes (the burn's prior frees the state) but predicts the
    next ones badly (bench/manoeuvres.py's 70017: a 0.55 m/s burn read as 1.3 m/s one pass early, then a
    second, false, detection). Returns (merged or None, the newest burn's rows, its burn prior): ``since`` and
    ``burn`` as they were when it does not. Its burn prior is the pre-burn orbit (``_pre``) carried to the
    reading's first observation."""
    later, rows = manoeuvre.pop("_later")
    prior = mn.burn_prior(prior_from_result(manoeuvre["_pre"], float(tk[rows].min()), config.noise),
                          later.burn_after, ms)
    merged = _one_burn(part, rows | upto, held, prior, sigmas, config, ms)
    if merged is None:
        return None, since, burn
    manoeuvre.update(burn_after_unix=later.burn_after, burn_before_unix=later.burn_before, statistic=later.statistic,
                     dof=later.dof, log10_p=later.log10_p, passes=later.passes)
    if later.passes < ms.confirm_passes:  # this reading is confirmed by the passes that now fail too
        manoeuvre["detected_at_unix"] = max(manoeuvre["detected_at_unix"], float(tk[upto].max()))
    return merged, rows, prior


def _one_burn(part, rows: np.ndarray, held: np.ndarray, burn, sigmas, config: OdConfig, ms):
    """The newest burn's re-fit over ``rows`` (its own and the passes that now fail against it), when one
    burn explains them all: converged, fitting as the noise says (:data:`MERGE_RMS`), hardly any edited
    out (:data:`MERGE_OUTLIERS`: a 4-sigma edit removes well under 1 % of Gaussian noise; a fit that
    absorbs a second burn edits its passes out instead, 8-17 % on the bench's cases). Without this, a
    re-fit over one pass, whose covariance does not cover how badly it predicts hours on, would
    report a second burn that is not there."""
    merged = fit(part[rows], burn, sigmas, config)
    edited = max(MERGE_OUTLIERS[0], MERGE_OUTLIERS[1] * int(rows.sum()))
    if not merged.converged or not merged.rms <= MERGE_RMS or merged.outliers > edited:
        return None
    return merged, set(part["obs_id"][rows & held].astype(str)) & set(merged.accepted_ids)


def _last(sub, t_sub, held_sub, p_sub, tests, current: OdResult, prior, since: pd.DataFrame, found, reassociated,
          sigmas, config: OdConfig, ms) -> WindowFit | None:
    """The window's last segment: the object's own observations and the held ones of passes the
    prediction explains, fitted from ``current``; with the newest burn's re-fit observations before them. A
    trailing pass that fails loudly on its own (:func:`sda.orbit.manoeuvre.detection.pending`) is left out."""
    explained = np.array([tests[k].log10_p > math.log10(ms.consistent_p) for k in p_sub], bool)
    keep = ~held_sub | explained
    waiting = mn.pending(tests, ms)
    if waiting is not None:  # a burn's first pass, or a bad one: the next pass decides, so it is not fitted
        keep &= ~np.isin(p_sub, mn.held_back(tests, waiting))
    if not keep.any():
        if found:  # the newest burn's re-fit stands
            return WindowFit(current, since, found, sorted(reassociated))
        return None
    first = float(t_sub[keep].min())
    start = prior if first == float(t_sub.min()) else prior_from_result(current, first, config.noise)
    if found:  # the newest burn's re-fit carried on: still the post-burn orbit the screening must take
        start = dataclasses.replace(start, source="manoeuvre")
    result = fit(sub[keep], start, sigmas, config)
    ids = set(sub["obs_id"][held_sub & keep].astype(str)) & set(result.accepted_ids)
    if found and result.converged:  # the newest burn's delta-v from everything since it
        _refine_dv(found[-1], result, config)
    fitted = pd.concat([since, sub[keep]], ignore_index=True)
    return WindowFit(result, fitted, found, sorted(reassociated | ids))


def _refine_dv(manoeuvre: dict, result: OdResult, config: OdConfig, keep_pre: bool = False) -> None:
    pre = manoeuvre["_pre"] if keep_pre else manoeuvre.pop("_pre")
    dv = mn.estimate_dv(pre, result, manoeuvre["burn_after_unix"], manoeuvre["burn_before_unix"], config.noise)
    manoeuvre.update(_dv_fields(dv))


def _dv_fields(dv: mn.DeltaV) -> dict:
    return {"burn_time_unix": dv.t_burn, **dict(zip(("dv_r_ms", "dv_t_ms", "dv_n_ms"), map(float, dv.dv_rtn_ms))),
            "dv_ms": float(np.linalg.norm(dv.dv_rtn_ms)), "dv_sigma_ms": dv.sigma_ms}


def _confirm(detection: mn.Detection, sub, t_sub, p_sub, held_sub, current: OdResult, sigmas, config: OdConfig,
             ms: mn.ManoeuvreSettings):
    """The re-fit of the detection's passes (then, if that cannot be fitted or is too weak to show the burn,
    of every pass from its first on) from the pre-burn prediction widened by a burn
    (:func:`sda.orbit.manoeuvre.detection.burn_prior`): (re-fit, the manoeuvre's fields, the held observations it
    fitted, which rows it fitted), or None when the re-fit does not confirm a burn."""
    t0 = float(t_sub[p_sub == detection.first].min())
    prior = mn.burn_prior(prior_from_result(current, t0, config.noise), detection.burn_after, ms)
    for upto in dict.fromkeys((detection.last, int(p_sub.max()))):
        use = (p_sub >= detection.first) & (p_sub <= upto)
        post = fit(sub[use], prior, sigmas, config)
        if not post.converged or not post.rms <= ms.max_refit_rms:
            continue  # e.g. a deciding pass of fewer observations than a fit takes: every later pass then
        dv = mn.estimate_dv(current, post, detection.burn_after, detection.burn_before, config.noise)
        if dv.d2 >= ms.min_dv_d2:
            break
    else:
        return None
    size = float(np.linalg.norm(dv.dv_rtn_ms))
    accepted = set(post.accepted_ids)
    held_ids = set(sub["obs_id"][use & held_sub].astype(str))
    used_passes = {int(p) for p, i in zip(p_sub[use], sub["obs_id"][use].astype(str)) if i in accepted}
    if size > ms.max_dv_ms or (not (accepted - held_ids) and len(used_passes) < 2):
        return None  # held observations alone: one pass of them may be another object's
    manoeuvre = {"burn_after_unix": detection.burn_after, "burn_before_unix": detection.burn_before, **_dv_fields(dv),
                 "statistic": detection.statistic, "dof": detection.dof, "log10_p": detection.log10_p,
                 "passes": detection.passes, "detected_at_unix": detection.detected_at,
                 "observations_after": len(accepted), "reassociated": len(accepted & held_ids), "_pre": current}
    return post, manoeuvre, accepted & held_ids, use, prior
