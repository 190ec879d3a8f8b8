"""Observation-to-object association (numpy): predict each observation's measurement from the
catalogue, gate it with the sensor's noise plus the prediction's uncertainty, keep the nearest.

A batch of observations (in the job: one event-time bucket) is handled at once, as array
arithmetic in blocks that bound the memory (observations x objects):

1. the whole catalogue is propagated once (``SatrecArray``) at the batch's reference time;
2. spatial prefilter (the spatial join that yields the candidates): an (observation, object) pair
   is kept only if the object, at the reference time, is within ``REPORT_GATES * gate_km`` (or
   :data:`PREFILTER_SIGMAS` of its predicted 3-D error, if more) of the
   observation plus the distance the object can cover in ``|t - t_ref|`` (its speed plus a gravity
   bound). For radar the observation is the measured point, for ISL the reported position, for an
   optical track (no range) the line of sight: the distance is the object's distance to that ray
   (a k-d tree finds a point's candidates: :func:`sda.orbit.correlation.association.candidate_pairs`);
3. each kept pair's object is propagated to its observation's time, the predicted
   measurement is formed for each candidate and compared with the observed one.

Predicted measurements and signed residuals (observed - predicted), per sensor kind (:mod:`sda.orbit.correlation.gate`):

* radar -- range (m), azimuth (rad, wrapped to [-pi, pi]), elevation (rad) and, when reported,
  range-rate (m/s), from :func:`sda.orbit.frames.razel` of the predicted ECEF state at the site;
* optical -- topocentric right ascension (rad, wrapped to [-pi, pi]; *not* multiplied by cos dec)
  and declination (rad) from :func:`sda.orbit.frames.radec`;
* ISL -- position, resolved on the predicted orbit's radial / along-track / cross-track axes (m)
  (R = r/|r|, N = r x v/|r x v|, T = N x R).

``residual_m`` stays the position-space miss: the distance between the observed radar point and the
predicted position, the ISL position miss, or for optical the line-of-sight angle times the
predicted range (the cross-track miss at the object).

Gate (Mahalanobis distance under the predicted covariance). Each candidate's prediction has its own
uncertainty, from :mod:`sda.orbit.uncertainty` (:func:`prediction_model`): the element set's orbit regime
(perigee / apogee of its mean elements) and its age at the observation time (``|t - epoch|``) give
the position sigmas ``(sR, sT, sN)`` on the predicted orbit's radial / along-track / cross-track axes
(along-track dominant, growing by km per day in LEO). The velocity error that comes with them: an
along-track error is a time shift along the orbit, so it carries ``-n dT`` of radial velocity (``n``
= |v| / |r|), fully correlated; the radial and cross-track errors (eccentricity and plane errors)
carry ``n sR``, ``2 n sR``, ``n sN`` of R, T, N velocity, taken as independent. With ``J`` the
Jacobian of the measurements with respect to that state error (computed in closed form for the
predicted state and the site)::

    S  = J C J^T + diag(sigma_sensor^2)        (C: the 6x6 RTN covariance just described)
    d2 = y^T S^-1 y                            (y: the residuals; Cholesky of S, batched)

=================  ==================================================================================
kind               y and J
=================  ==================================================================================
radar              range, azimuth, elevation, range-rate (when reported; else 3 components), all four
                   against position, range-rate against velocity too (``v_ecef = R3 (v - omega x r)``)
optical            RA cos(dec) and Dec (sensor sigma on both) against position
ISL                the position residual on the R, T, N axes: ``S = diag(s^2) + sigma_pos^2``, diagonal
=================  ==================================================================================

so the correlation between along-track error and azimuth / elevation / range-rate is kept (a
per-component sum would miss it and mis-gate). The statistic is chi-square when the model holds
(``tests/include/orbit/correlation/test_gate.py`` checks it against Monte-Carlo draws).

``prediction_sigma_m`` (``SDA_CORRELATION_PREDICTION_SIGMA_M``) overrides the model with one fixed,
isotropic sigma for every object (and :data:`PREDICTION_SIGMA_RANGE_RATE_MS` added to range-rate,
with no position term there): the former gate, whose statistic has the closed forms ``range:
sigma_range^2 + sigma_p^2``, ``azimuth: sigma_angle^2 + (sigma_p / (rho cos el))^2``, ``elevation,
RA cos(dec), Dec: sigma_angle^2 + (sigma_p / rho)^2``, ``ISL: sigma_pos^2 + sigma_p^2`` per component.

The sensor sigmas come from the sensor registry (:mod:`sda.orbit.sensors`, ``data/sensors.csv``) by
``sensor_id``; a sensor missing there (or a sigma left blank) gets :data:`sda.orbit.sensors.DEFAULT_SIGMAS` of its kind.
A candidate is *inside the gate* when ``d2 <= chi2_k(1 - GATE_TAIL)`` -- the chi-square quantile for
the ``k`` components used (radar 4, or 3 without range-rate; optical 2; ISL 3), so a correct
association falls outside with probability :data:`sda.orbit.correlation.gate.GATE_TAIL` -- *and* its position-space miss
``residual_m`` is at most ``gate_km`` (``settings.correlation_gate_km``: the largest miss that may
still correlate, whatever the uncertainties).

Decision: the best candidate is the likeliest in-gate one, the smallest ``d2 + ln det S`` (-2 ln of
its Gaussian likelihood, up to a constant shared by the observation's candidates: once candidates
have different covariances, ``d2`` alone would favour the least certain). It is *ambiguous* when the
runner-up is inside the gate too and not clearly less likely: its ``d2 + ln det S`` is less than
``2 ln(AMBIGUITY_LIKELIHOOD_RATIO)`` above the best's. Policy: an ambiguous observation is associated
with the best candidate and flagged (``ambiguous``), so downstream consumers may drop it -- unless it is
a near coin toss, the best less than ``COMMIT_LIKELIHOOD_RATIO`` times likelier than the runner-up (its
posterior under 10/11 with equal priors): such a cross-tag (two objects flying closer together than
their element sets' errors) is held uncorrelated, flagged, reason
:data:`sda.orbit.correlation.columns.REASON_UNDECIDED`, its nearest in-gate candidate (by ``d2``) named as
``nearest_*``: on the real catalogue with element sets 0.5 to 3 days old (``bench/correlation.py``) the
wrong associations the gate lets through are such near coin tosses. Observations with no candidate inside
the gate are kept as uncorrelated; when the
best candidate is within ``REPORT_GATES * gate_km`` it is named (``nearest_*``). Objects that SGP4
cannot evaluate at a time (non-zero error code) are simply not candidates there.

Three refinements live in :mod:`sda.orbit.correlation.association`: one candidate per element set (a docked
stack's numbers are one body), the spatial prefilter's geometry, and one object per radar frame.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sgp4.api import Satrec

from sda.orbit.correlation import association
from sda.orbit.correlation.columns import (
    REASON_INCOMPLETE,
    REASON_NO_CANDIDATE,
    REASON_NOT_PROPAGATED,
    REASON_UNDECIDED,
    REASON_UNKNOWN_KIND,
    REQUIRED,
    RESULT_COLUMNS,
)
from sda.orbit.correlation.gate import GATE_D2, measure
from sda.orbit.frames import UNIX_EPOCH_JD, perigee_apogee_km, propagate, propagate_pairs
from sda.orbit.sensors import SIGMA_COLUMNS, observation_sigmas, sensor_sigmas
from sda.orbit.times import unix_seconds
from sda.orbit.uncertainty import CatalogueModel, catalogue_model, fixed_model

# The former single prediction sigma (per axis, every object, whatever its regime or age), kept as the
# value the tests and the bench give the isotropic override (``prediction_sigma_m``): with element
# sets days old it is far too tight in LEO along track and too loose elsewhere.
PREDICTION_SIGMA_M = 2000.0
# The override's range-rate sigma: ~ mean motion x position error (~2 m/s in LEO), padded.
PREDICTION_SIGMA_RANGE_RATE_MS = 5.0
# The best candidate must be this many times likelier than an in-gate runner-up, else "ambiguous".
AMBIGUITY_LIKELIHOOD_RATIO = 100.0
AMBIGUITY_DELTA_D2 = 2.0 * math.log(AMBIGUITY_LIKELIHOOD_RATIO)
# ... and at least this many times likelier to be associated at all (else held: a cross-tag).
COMMIT_LIKELIHOOD_RATIO = 10.0
COMMIT_DELTA_D2 = 2.0 * math.log(COMMIT_LIKELIHOOD_RATIO)
BUCKET_S = 60  # event-time bucket: one catalogue propagation serves all observations in a bucket
BLOCK_ELEMENTS = 2_000_000  # observations x objects per block
# Uncorrelated observations name their nearest object when it lies within this many gates.
REPORT_GATES = 3.0
# The spatial prefilter's radius also covers this many 3-D sigmas of each object's predicted error.
PREFILTER_SIGMAS = 6.0

def prediction_model(satrecs: Sequence[Satrec]) -> CatalogueModel:
    """Each element set's uncertainty model (:func:`sda.orbit.uncertainty.catalogue_model`): its epoch
    (``jdsatepoch``) and its regime from the perigee / apogee of its mean elements."""
    epochs = np.array([(s.jdsatepoch + s.jdsatepochF - UNIX_EPOCH_JD) * 86400.0 for s in satrecs], dtype=float)
    heights = np.array([perigee_apogee_km(s) for s in satrecs], dtype=float).reshape(-1, 2)
    return catalogue_model(epochs, heights[:, 0], heights[:, 1])


def correlate_frame(obs: pd.DataFrame, norad_ids: Sequence[int], satrecs: Sequence[Satrec], gate_km: float,
                    sigmas: Mapping[str, Mapping[str, float]] | None = None,
                    prediction_sigma_m: float | None = None,
                    prediction_sigma_rr_ms: float = PREDICTION_SIGMA_RANGE_RATE_MS,
                    model: CatalogueModel | None = None, bodies: np.ndarray | None = None,
                    tracks: Any = None, light_time: bool = False) -> pd.DataFrame:
    """Associate each observation of ``obs`` (OBSERVATION envelope columns; ``event_time`` as
    timestamps) with the catalogue ``(norad_ids, satrecs)``. ``sigmas`` is :func:`sda.orbit.sensors.sensor_sigmas`
    output (default: the embedded registry). The prediction's uncertainty is ``model`` (default:
    :func:`prediction_model` of ``satrecs``: regime and element-set age), or, when
    ``prediction_sigma_m`` is given, the isotropic override of the module docstring. ``bodies``: which
    catalogue rows are candidates (default :func:`sda.orbit.correlation.association.distinct_bodies`: one number
    per element set). ``tracks`` (:class:`sda.orbit.correlation.tracks.Tracks`): the objects predicted by their fused
    orbits instead (state and full covariance). ``light_time``: whether the measurements carry it
    (:func:`sda.orbit.estimation.measurements.models`). Returns one row per observation with :data:`RESULT_COLUMNS`."""
    out = _unassociated(obs)
    if len(obs) == 0:
        return _result_frame(out)
    ids = np.asarray(norad_ids, dtype=np.int64)
    t_all = unix_seconds(obs["event_time"])
    kinds = obs["sensor_kind"].to_numpy(dtype=object)
    complete = _complete_rows(obs, kinds, out)
    if not complete.any():
        return _result_frame(out)
    if len(ids) == 0:
        out["reason"][complete] = REASON_NOT_PROPAGATED
        return _result_frame(out)
    sig_all = observation_sigmas(obs, sensor_sigmas(None) if sigmas is None else sigmas)
    fixed_rr = None
    if prediction_sigma_m is not None:
        model, fixed_rr = fixed_model(len(ids), prediction_sigma_m), prediction_sigma_rr_ms
    elif model is None:
        model = prediction_model(satrecs)
    bodies = association.distinct_bodies(ids, satrecs) if bodies is None else bodies
    ref = _reference(satrecs, t_all[complete], model, bodies, gate_km, tracks)
    if ref is None:
        out["reason"][complete] = REASON_NOT_PROPAGATED
        return _result_frame(out)
    rows = np.flatnonzero(complete)
    block = max(1, BLOCK_ELEMENTS // max(len(ids), 1))
    frames = association.frame_codes(obs, kinds)
    for kind in REQUIRED:
        kind_rows = rows[kinds[rows] == kind]
        if frames is not None:  # a frame's detections in one block, so they are decided together
            kind_rows = kind_rows[np.argsort(frames[kind_rows], kind="stable")]
        for lo in range(0, len(kind_rows), block):
            sel = kind_rows[lo:lo + block]
            sig = {c: sig_all[c][sel] for c in SIGMA_COLUMNS}
            cols, d2, miss, pair, residuals, dof, logdet = _score_block(kind, obs.iloc[sel], t_all[sel], sig,
                                                                        satrecs, model, ref, fixed_rr, tracks,
                                                                        light_time)
            _decide(out, sel, ids[cols], d2, miss, pair, residuals, dof, gate_km, logdet,
                    None if frames is None else frames[sel])
    return _result_frame(out)


def _unassociated(obs: pd.DataFrame) -> dict[str, np.ndarray]:
    """The result columns before any association, as numpy arrays the blocks write into (pandas'
    ``.loc`` cost a tenth of the association): every observation uncorrelated, of an unknown kind.
    Object ids are floats here (NaN: none; exact below 2**53), Int64 in the frame."""
    n = len(obs)
    out = {c: np.full(n, np.nan) for c, dtype in RESULT_COLUMNS.items() if dtype in ("float64", "Int64")}
    return {**out, "obs_id": obs["obs_id"].to_numpy(dtype=object), "status": np.full(n, "uncorrelated", dtype=object),
            "candidates": np.zeros(n, dtype=np.int32), "ambiguous": np.zeros(n, dtype=bool),
            "reason": np.full(n, REASON_UNKNOWN_KIND, dtype=object)}


def _result_frame(out: dict[str, np.ndarray]) -> pd.DataFrame:
    """The columns of :func:`_unassociated` as the frame of :data:`RESULT_COLUMNS`."""
    columns = {c: pd.array(out[c], dtype="Int64") if dtype == "Int64" else out[c]
               for c, dtype in RESULT_COLUMNS.items()}
    frame = pd.DataFrame(columns, copy=False)
    # the arrays are built in their final dtypes: a frame-wide astype would only copy them
    return frame if all(frame.dtypes == pd.Series(RESULT_COLUMNS)) else frame.astype(RESULT_COLUMNS)


def _complete_rows(obs: pd.DataFrame, kinds: np.ndarray, out: dict[str, np.ndarray]) -> np.ndarray:
    """Which observations carry every measurement their kind needs; the others of a known kind are
    marked :data:`REASON_INCOMPLETE` in ``out``."""
    n = len(obs)
    complete = np.zeros(n, dtype=bool)
    for kind, needed in REQUIRED.items():
        is_kind = kinds == kind
        present = np.ones(n, dtype=bool)
        for name in needed:
            present &= obs[name].notna().to_numpy() if name in obs else False
        out["reason"][is_kind & ~present] = REASON_INCOMPLETE
        complete |= is_kind & present
    return complete


def _reference(satrecs: Sequence[Satrec], t: np.ndarray, model: CatalogueModel, bodies: np.ndarray,
               gate_km: float, tracks: Any = None) -> association.Reference | None:
    """The whole catalogue propagated once, at the middle of the observation times ``t``, with each
    object's prefilter radius (:func:`sda.orbit.correlation.association.candidate_pairs` uses them); None when SGP4
    could evaluate no object there. The rows that are not ``bodies`` get no position, so the prefilter
    never keeps them."""
    t_ref = 0.5 * (t.min() + t.max())
    _, r_ref, v_ref = propagate(satrecs, np.array([t_ref]))
    r_ref, speed_ref = r_ref[:, 0, :], np.linalg.norm(v_ref[:, 0, :], axis=-1)
    sigma_ref_km = np.linalg.norm(model.sigma_rtn_m(np.arange(len(r_ref)), np.full(len(r_ref), t_ref)), axis=-1) / 1e3
    if tracks is not None:  # objects with a fused orbit: its predicted position, speed and sigma
        tracks.at_reference(t_ref, r_ref, speed_ref, sigma_ref_km)
    r_ref[~np.asarray(bodies, dtype=bool)] = np.nan
    if not np.isfinite(r_ref).any():
        return None
    # the radius covers PREFILTER_SIGMAS of the prediction's 3-D error too (never less than the report radius)
    radius_km = np.maximum(REPORT_GATES * gate_km, PREFILTER_SIGMAS * sigma_ref_km)
    return association.reference(t_ref, r_ref, speed_ref, radius_km)


def _score_block(kind: str, block_obs: pd.DataFrame, t: np.ndarray, sig: Mapping[str, np.ndarray],
                 satrecs: Sequence[Satrec], model: CatalogueModel, ref: association.Reference,
                 fixed_rr: float | None, tracks: Any = None, light_time: bool = False) -> tuple:
    """One block of one ``kind``'s observations against the catalogue: the prefilter's candidates measured,
    as :func:`_decide` takes them: the catalogue rows that are some observation's candidate (the columns
    below; [0] when none is), [observations, columns] d2, miss, row of the pair in the residuals or -1;
    the candidate pairs' residuals; components per observation; [observations, columns] log det S."""
    obs_i, obj_j = association.candidate_pairs(kind, block_obs, t, ref)
    objects, obj_pos = np.unique(obj_j, return_inverse=True)
    shape = (len(t), max(1, len(objects)))  # a few hundred columns, not the catalogue's thousands
    d2, logdet, miss = np.full(shape, np.inf), np.zeros(shape), np.full(shape, np.inf)
    pair = np.full(shape, -1, dtype=np.int64)
    residuals: dict[str, np.ndarray] = {}
    dof = np.zeros(len(t), dtype=int)
    if len(obs_i):
        r, v = propagate_pairs(satrecs, obj_j, t[obs_i])  # each candidate at its own observations' times
        pair_sig = {c: values[obs_i] for c, values in sig.items()}
        pred = model.sigma_rtn_m(obj_j, t[obs_i])
        if tracks is None:
            s, m, residuals, k, ld = measure(kind, block_obs.iloc[obs_i], t[obs_i], r, v, pair_sig, pred, fixed_rr,
                                             light_time=light_time)
        else:  # fused objects measured on their own predictions
            s, m, residuals, k, ld = tracks.measure(kind, block_obs.iloc[obs_i], t[obs_i], obj_j, r, v, pair_sig, pred,
                                                    fixed_rr, light_time)
        d2[obs_i, obj_pos], miss[obs_i, obj_pos], pair[obs_i, obj_pos] = s, m, np.arange(len(obs_i))
        logdet[obs_i, obj_pos] = ld
        dof[obs_i] = k
    return (objects if len(objects) else np.zeros(1, dtype=np.int64)), d2, miss, pair, residuals, dof, logdet


def _decide(out: dict[str, np.ndarray], sel: np.ndarray, ids: np.ndarray, d2: np.ndarray, miss: np.ndarray,
            pair: np.ndarray, residuals: Mapping[str, np.ndarray], dof: np.ndarray, gate_km: float, logdet: np.ndarray,
            frames: np.ndarray | None = None) -> None:
    """Likeliest (smallest d2 + log det) in-gate candidate per observation (one object per radar frame
    when ``frames`` is given), the ambiguity flag, the residuals."""
    rows = np.arange(len(sel))
    # only the objects that are some observation's candidate (a few hundred of a catalogue's thousands)
    measured = np.flatnonzero((pair >= 0).any(axis=0))
    if measured.size == 0:
        measured = np.zeros(1, dtype=np.int64)  # a column of nothing: every observation uncorrelated
    ids, d2, miss = ids[measured], d2[:, measured], miss[:, measured]
    pair, logdet = pair[:, measured], logdet[:, measured]
    d2 = np.where(np.isfinite(d2) & np.isfinite(miss), d2, np.inf)
    limit = np.array([GATE_D2.get(int(k), np.inf) for k in dof])
    inside = (d2 <= limit[:, None]) & (miss <= gate_km * 1000.0) & np.isfinite(logdet)
    # -2 ln(likelihood) up to a constant shared by the observation's candidates
    gated = np.where(inside, d2 + np.where(inside, logdet, 0.0), np.inf)
    candidates = inside.sum(axis=1)
    if d2.shape[1] >= 2:
        two = np.argpartition(gated, 1, axis=1)[:, :2]
        pair_d2 = np.take_along_axis(gated, two, axis=1)
        swap = pair_d2[:, 1] < pair_d2[:, 0]
        best = np.where(swap, two[:, 1], two[:, 0])
        d2_second = np.where(swap, pair_d2[:, 0], pair_d2[:, 1])
    else:
        best, d2_second = np.zeros(len(sel), dtype=int), np.full(len(sel), np.inf)
    d2_best = gated[rows, best]  # -2 ln(likelihood) of the best and (d2_second) of the runner-up
    hit = np.isfinite(d2_best)
    with np.errstate(invalid="ignore"):  # inf - inf where there is no runner-up
        margin = np.where(hit & np.isfinite(d2_second), d2_second - d2_best, np.inf)  # 2 ln(likelihood ratio)
    ambiguous, undecided = margin < AMBIGUITY_DELTA_D2, margin < COMMIT_DELTA_D2
    if frames is not None:
        best = association.one_object_per_frame(best, hit, gated, frames)
    hit = hit & ~undecided  # a cross-tag is held (the frame's others were assigned knowing its candidates)
    # a near miss: the nearest (by d2) object within REPORT_GATES gates, named for uncorrelated observations
    reportable = np.where(miss <= REPORT_GATES * gate_km * 1000.0, d2, np.inf)
    nearest = np.argmin(reportable, axis=1)
    near = ~hit & np.isfinite(reportable[rows, nearest])

    out["candidates"][sel] = candidates.astype(np.int32)
    out["ambiguous"][sel] = ambiguous
    out["status"][sel[hit]] = "correlated"
    out["reason"][sel[hit]] = None
    out["norad_id"][sel[hit]] = ids[best[hit]]
    out["residual_m"][sel[hit]] = miss[rows[hit], best[hit]]
    out["gate_d2"][sel[hit]] = d2[rows[hit], best[hit]]
    chosen = pair[rows[hit], best[hit]]
    for name, values in residuals.items():
        out[name][sel[hit]] = values[chosen]
    out["reason"][sel[~hit]] = REASON_NO_CANDIDATE
    out["reason"][sel[undecided]] = REASON_UNDECIDED
    out["nearest_norad_id"][sel[near]] = ids[nearest[near]]
    out["nearest_residual_m"][sel[near]] = miss[rows[near], nearest[near]]
    out["nearest_gate_d2"][sel[near]] = d2[rows[near], nearest[near]]
