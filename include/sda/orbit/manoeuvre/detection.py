"""Manoeuvre detection: an object's new observations tested against the prediction of its fused orbit.

Per arc window that has a fused prior (:mod:`sda.orbit.fusion.arcs`), before the window is fitted:

1. **Passes.** The window's observations are split into passes: one sensor's observations with gaps of
   at most :attr:`ManoeuvreSettings.pass_gap_s`, ordered by their first time.
2. **A test per pass** (:func:`pass_tests`). The prior orbit (the previous converged fused orbit) is
   predicted to the pass's first time with its covariance grown by the model error
   (:func:`sda.orbit.estimation.predict.prior_from_result`), and the pass's residuals against it are
   normalised by everything that should explain them: ``d2 = z^T (I + H P H^T)^-1 z`` over the pass's
   whitened residuals ``z`` and Jacobians ``H`` (the measurement noise is the identity, ``P`` the
   prediction's 7x7 covariance with B). Without a manoeuvre, ``d2`` is chi-square with as many degrees
   of freedom as the pass has measurement components.
3. **Accumulated over passes** (:func:`detect`): a pass whose own tail probability is below
   :attr:`ManoeuvreSettings.suspicious_p` starts (or continues) a run of suspicious passes; the run's
   summed ``d2`` against the chi-square of its summed degrees of freedom decides, at a tail probability
   of ``10^log10_alpha``, and only once the run holds :attr:`ManoeuvreSettings.confirm_passes` passes: a
   pass that fails, even loudly, is confirmed only by the next pass failing too (and the re-fit over
   both, 4, fitting them: one post-burn orbit agrees with both). A single bad pass (a sensor's bad
   track, an optical pass that fails alone) is followed by a consistent one, which restarts the run.
   A small burn fails mildly pass after pass and the sum decides (the passes of a run share the prior's
   error, so the sum's tail is heavier than the chi-square says: requiring every pass of the run to be
   suspicious on its own keeps false alarms down). A window's last pass that would decide alone waits
   (:func:`pending`): the window's fit leaves it out, so the window's orbit stays the pre-burn one and
   the next window's passes decide, with a bracket that opens before it.
4. **Re-fit after the burn** (:func:`burn_prior`, then :func:`sda.orbit.estimation.fit`): from the first
   observation of the run's first pass on, with, as prior, the pre-burn prediction there and what a
   burn inside the bracket can do to it: velocity sigma :attr:`ManoeuvreSettings.dv_sigma_ms` per axis,
   position that times the time since the bracket opened. The observations before the burn are not
   fitted.
5. **Delta-v** (:func:`estimate_dv`): the pre- and post-burn orbits' difference at the re-fit's epoch,
   ``dx = Phi(t_e, t_b) [0, dv]`` (the pre-burn trajectory's transition matrix), solved by weighted least
   squares for ``dv`` at each burn time ``t_b`` on a grid inside the bracket; the best ``t_b`` is the
   estimate. The detection is kept when the re-fit converged, fits (weighted RMS at most
   :attr:`ManoeuvreSettings.max_refit_rms`), and the burn is significant (``dv^T C^-1 dv`` above
   :attr:`ManoeuvreSettings.min_dv_d2`) and no larger than :attr:`ManoeuvreSettings.max_dv_ms`.

The bracket: the burn is after the first observation of the last pass before the run (or the prior's
epoch) and not after the last observation of the run's first pass. A burn during that last pass, or
just before its end, barely shows in it: the pass passes the test, so it cannot clear the burn
(bench/manoeuvres.py counted the brackets that opened at its end and missed their burn). A run whose
first passes fail only mildly and whose last fails on its own has a second reading, the burn just
before that last pass (:func:`latest_run`); the passes after it decide (:mod:`sda.orbit.manoeuvre.segments`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
from scipy import stats

from sda.orbit.estimation import dynamics
from sda.orbit.estimation.estimator import Prior, _blocks, _linearise, _to_gcrf7, end_window
from sda.orbit.estimation.noise import ProcessNoise
from sda.orbit.estimation.predict import Prediction, predict
from sda.orbit.estimation.prior import rtn_to_teme6

LN10 = math.log(10.0)


@dataclasses.dataclass(frozen=True)
class ManoeuvreSettings:
    pass_gap_s: float = 600.0  # one sensor's observations further apart than this are two passes
    max_pass_s: float = 1200.0  # a longer track (an ISL link's) is cut into passes this long
    log10_alpha: float = -7.0  # the accumulated passes' chi-square tail that detects
    suspicious_p: float = 1e-3  # a pass joins a run when its own tail is below this
    confirm_passes: int = 2  # a run decides only with this many passes: the next pass confirms the first
    dv_sigma_ms: float = 3.0  # the re-fit's prior on the burn, per axis
    min_dv_d2: float = 16.27  # chi-square(3) at 1 - 1e-3: how significant the estimated burn must be
    max_refit_rms: float = 3.0
    max_dv_ms: float = 20.0
    consistent_p: float = 1e-2  # an uncorrelated pass this consistent with the prior is the object's


@dataclasses.dataclass(frozen=True)
class PassTest:
    start: float
    end: float
    d2: float
    dof: int
    log10_p: float
    candidate: bool  # every observation of the pass was held uncorrelated (named the object as nearest)


@dataclasses.dataclass(frozen=True)
class Detection:
    first: int  # the run's first pass
    last: int  # the deciding pass
    statistic: float
    dof: int
    log10_p: float
    burn_after: float
    burn_before: float
    detected_at: float

    @property
    def passes(self) -> int:
        return self.last - self.first + 1


def log10_tail(d2: float, dof: int) -> float:
    """log10 of the chi-square(dof) probability of exceeding ``d2``."""
    if dof <= 0:
        return 0.0
    return float(stats.chi2.logsf(d2, dof) / LN10)


def pass_index(t: np.ndarray, sensor: np.ndarray, gap_s: float, max_s: float = math.inf) -> np.ndarray:
    """Per observation, its pass number: passes are one sensor's observations with gaps <= ``gap_s``,
    cut every ``max_s`` from their first time, numbered by their first time (then sensor)."""
    t = np.asarray(t, float)
    sensor = np.asarray(sensor).astype(str)
    order = np.lexsort((t, sensor))
    ts, ss = t[order], sensor[order]
    label_sorted = np.zeros(len(t), np.int64)
    current, opened = 0, 0.0
    for i in range(len(t)):
        if i == 0 or ss[i] != ss[i - 1] or ts[i] - ts[i - 1] > gap_s or ts[i] - opened > max_s:
            current += 1 if i else 0
            opened = ts[i]
        label_sorted[i] = current
    label = np.empty(len(t), np.int64)
    label[order] = label_sorted
    starts = np.array([t[label == k].min() for k in range(int(label.max()) + 1)]) if len(t) else np.empty(0)
    rank = np.empty(len(starts), np.int64)
    rank[np.lexsort((np.arange(len(starts)), starts))] = np.arange(len(starts))
    return rank[label]


def innovation_d2(z: np.ndarray, h: np.ndarray, p: np.ndarray) -> tuple[float, int]:
    """The generalised likelihood-ratio statistic of a state offset: whitened residuals ``z`` [m, k]
    (NaN: not measured) with Jacobians ``h`` [m, k, n] against a prediction of covariance ``p`` [n, n].

    With ``S = I + H P H^T`` (the residuals' covariance without an offset), the offset's estimate is
    ``F^+ g``, ``F = H^T S^-1 H``, ``g = H^T S^-1 z``, and ``T = g^T F^+ g`` is chi-square with
    ``rank F`` degrees of freedom without one. Unlike ``z^T S^-1 z`` over every component, it does not
    grow with a pass's length from noise that is merely larger than the registry says: only a coherent
    departure of the orbit counts. Computed in 7x7 (push-through: ``S^-1 H = H (I + P A)^-1``,
    ``A = H^T H``), in the prediction's scaled coordinates."""
    good = np.isfinite(z)
    zf, hf = z[good], h[good]
    if zf.size == 0:
        return 0.0, 0
    scale = np.sqrt(np.clip(np.diag(p), 1e-30, None))
    hs = hf * scale
    ps = p / np.outer(scale, scale)
    a, b = hs.T @ hs, hs.T @ zf
    m = np.linalg.inv(np.eye(len(scale)) + a @ ps)
    f, g = m @ a, m @ b
    f = 0.5 * (f + f.T)
    w, v = np.linalg.eigh(f)
    keep = w > 1e-9 * max(float(w.max()), 1e-300)
    proj = v[:, keep].T @ g
    return float(np.sum(proj**2 / w[keep])), int(keep.sum())


def pass_starts(t: np.ndarray, passes: np.ndarray) -> np.ndarray:
    """Each pass's first time (passes numbered 0.. in ``passes``)."""
    count = int(passes.max()) + 1 if len(passes) else 0
    return np.array([t[passes == k].min() for k in range(count)])


def pass_tests(prior: Prior, prior_result, obs: pd.DataFrame, t: np.ndarray, passes: np.ndarray, sigmas,
               noise: ProcessNoise, candidate: np.ndarray, predicted: Prediction | None = None,
               light_time: bool = False) -> list[PassTest]:
    """One :class:`PassTest` per pass (module docstring, 2). ``prior``: the prior orbit carried to the
    window's first observation; ``prior_result`` the :class:`~sda.orbit.estimation.estimator.OdResult` it was
    carried from (whose prediction gives each pass's covariance); ``obs`` the window's observations,
    ``t`` their unix times. One propagation of the prior's mean through the window's observations and
    the passes' first times: each pass's Jacobians are taken from the window's first observation to the
    pass's first time by the transition matrix. ``predicted``: ``prior_result`` already predicted at the
    passes' first times (:func:`pass_starts`; made here when None)."""
    starts = pass_starts(t, passes)
    count = len(starts)
    pred = predict(prior_result, starts, noise) if predicted is None else predicted
    rot0 = dynamics.teme_rotation([prior.epoch])[0]
    x0, _ = _to_gcrf7(np.asarray(prior.state, float), np.asarray(prior.covariance, float), prior.b, prior.sigma_b,
                      rot0)
    blocks, times = _blocks(obs.assign(_pass=passes), sigmas, float(prior.epoch))
    # the fit's times too: a fit of these observations from this prior starts from the same propagation
    end = end_window(float(prior.epoch), float(times.max()), noise) if len(times) else np.empty(0)
    traj = dynamics.propagate(float(prior.epoch), x0[:6], x0[6], np.concatenate([times, starts, end]))
    n = len(times)
    ext = np.zeros((count, 7, 7))
    ext[:, :6] = traj.jac7[n:n + count]
    ext[:, 6, 6] = 1.0
    head = dynamics.Trajectory(traj.t[:n], traj.x[:n], traj.phi[:n], traj.sens[:n])
    lin = _linearise(blocks, head, dynamics.teme_rotation(times), light_time)
    rots = dynamics.teme_rotation(starts)
    out = []
    for k in range(count):
        state = np.concatenate([pred.r_km[k], pred.v_kms[k]]) * 1000.0
        _, p = _to_gcrf7(state, pred.covariance[k], prior_result.b, noise.sigma_b(prior_result.b), rots[k])
        to_pass = np.linalg.inv(ext[k])
        d2, dof = 0.0, 0
        for block, (z, h) in zip(blocks, lin):
            rows = block.obs["_pass"].to_numpy() == k
            part, m = innovation_d2(z[rows], h[rows] @ to_pass, p)
            d2, dof = d2 + part, dof + m
        mask = passes == k
        out.append(PassTest(float(starts[k]), float(t[mask].max()), d2, dof, log10_tail(d2, dof),
                            bool(candidate[mask].all())))
    return out


def detect(tests: list[PassTest], prior_epoch: float, settings: ManoeuvreSettings = ManoeuvreSettings()
           ) -> Detection | None:
    """The first run of suspicious passes whose accumulated test fails with at least
    :attr:`ManoeuvreSettings.confirm_passes` passes (module docstring, 3), or None."""
    first, d2, dof, count = None, 0.0, 0, 0
    suspicious = math.log10(settings.suspicious_p)
    for n, test in enumerate(tests):
        if test.dof == 0:
            continue
        if test.log10_p > suspicious:
            first, d2, dof, count = None, 0.0, 0, 0
            continue
        first = n if first is None else first
        d2, dof, count = d2 + test.d2, dof + test.dof, count + 1
        tail = log10_tail(d2, dof)
        if tail < settings.log10_alpha and count >= settings.confirm_passes:
            return _run(tests, first, n, d2, dof, tail, prior_epoch)
    return None


def pending(tests: list[PassTest], settings: ManoeuvreSettings = ManoeuvreSettings()) -> int | None:
    """The first pass of the window's trailing run of suspicious passes when that run would decide but for
    the passes still to come (too few to confirm it), or None: those passes wait for the next pass, so the
    window's fit leaves them out (module docstring, 3)."""
    testable = [n for n, test in enumerate(tests) if test.dof]
    suspicious = math.log10(settings.suspicious_p)
    run = []
    for n in reversed(testable):
        if tests[n].log10_p > suspicious:
            break
        run.insert(0, n)
    if not run or len(run) >= settings.confirm_passes:
        return None
    d2, dof = sum(tests[n].d2 for n in run), sum(tests[n].dof for n in run)
    return run[0] if log10_tail(d2, dof) < settings.log10_alpha else None


def held_back(tests: list[PassTest], first: int) -> list[int]:
    """The passes a window's fit leaves out when pass ``first`` waits (:func:`pending`): it and every pass that has
    not ended before the earliest of them starts (another sensor's pass overlapping it), so that everything the
    fit leaves out comes after everything it fits."""
    cut = tests[first].start
    while True:
        out = [n for n, test in enumerate(tests) if test.end >= cut]
        earliest = min(tests[n].start for n in out)
        if earliest >= cut:
            return out
        cut = earliest


def _run(tests: list[PassTest], first: int, last: int, d2: float, dof: int, tail: float, prior_epoch: float
         ) -> Detection:
    """The run ``first..last`` as a detection, with its bracket (module docstring, the bracket), detected when
    the last of its passes to end did (passes are ordered by their first time: one may outlast the next)."""
    before = [x.start for x in tests[:first] if x.end < tests[first].start]
    done = max(x.end for x in tests[first:last + 1])
    return Detection(first, last, d2, dof, tail, max([prior_epoch, *before]), tests[first].end, done)


def latest_run(tests: list[PassTest], detection: Detection, prior_epoch: float,
               settings: ManoeuvreSettings = ManoeuvreSettings()) -> Detection | None:
    """The shortest end of ``detection``'s run that still detects on its own, when shorter than the run: the
    other reading of a run whose first passes fail mildly and whose last fails loudly (the burn between them,
    the mild ones being the prior's own error, e.g. after a short re-fit). None when only the whole run detects."""
    # the passes before the reading's burn must be mild: a run whose first pass fails loudly on its own has one
    loud = next((k for k in range(detection.first, detection.last + 1)
                 if tests[k].dof and tests[k].log10_p < settings.log10_alpha), detection.last)
    d2, dof = 0.0, 0
    for k in range(detection.last, detection.first, -1):
        d2, dof = d2 + tests[k].d2, dof + tests[k].dof
        tail = log10_tail(d2, dof)
        if tests[k].dof and tail < settings.log10_alpha and k <= loud:
            return _run(tests, k, detection.last, d2, dof, tail, prior_epoch)
    return None


def burn_prior(prior: Prior, burn_after: float, settings: ManoeuvreSettings = ManoeuvreSettings()) -> Prior:
    """The pre-burn prediction at ``prior.epoch`` widened by a burn at an unknown time since ``burn_after``
    (module docstring, 4): position error ``dv tau``, velocity error ``dv``, ``tau`` uniform over the time
    since the bracket opened."""
    tau = max(float(prior.epoch) - float(burn_after), 0.0)
    var = settings.dv_sigma_ms**2
    cov = np.array(prior.covariance, float)
    eye = np.eye(3)
    cov[:3, :3] += var * tau**2 / 3.0 * eye
    cov[:3, 3:] += var * tau / 2.0 * eye
    cov[3:, :3] += var * tau / 2.0 * eye
    cov[3:, 3:] += var * eye
    return Prior(prior.epoch, prior.state, cov, prior.b, prior.sigma_b, "manoeuvre")


@dataclasses.dataclass(frozen=True)
class DeltaV:
    t_burn: float
    dv_rtn_ms: np.ndarray
    sigma_ms: float  # sqrt of the trace of its covariance
    d2: float  # dv^T C^-1 dv


def estimate_dv(pre, post, burn_after: float, burn_before: float, noise: ProcessNoise,
                grid: int = 120) -> DeltaV:
    """The impulsive delta-v that takes the pre-burn orbit ``pre`` to the post-burn ``post`` (both
    :class:`~sda.orbit.estimation.estimator.OdResult`), burn time on a grid over the bracket (module docstring, 5)."""
    t_e = float(post.epoch)
    lo = max(float(burn_after), float(pre.epoch))
    hi = min(max(float(burn_before), lo), t_e)
    times = np.unique(np.concatenate([np.linspace(lo, hi, grid), [t_e]]))
    rot_pre = dynamics.teme_rotation([float(pre.epoch)])[0]
    x0, _ = _to_gcrf7(pre.state, pre.covariance[:6, :6], pre.b, 0.0, rot_pre)
    traj = dynamics.propagate(float(pre.epoch), x0[:6], x0[6], times)
    rot_e = dynamics.teme_rotation([t_e])[0]
    big = np.zeros((6, 6))
    big[:3, :3] = big[3:, 3:] = rot_e.T
    post_gcrf = big @ post.state
    c_pre = big @ predict(pre, [t_e], noise).covariance[0] @ big.T
    c_post = big @ post.covariance[:6, :6] @ big.T
    w = np.linalg.inv(c_pre + c_post)
    dx = post_gcrf - traj.x[-1]
    best = None
    phi_e = traj.phi[-1]
    for j in range(len(times) - 1):
        a = (phi_e @ np.linalg.inv(traj.phi[j]))[:, 3:]
        info = a.T @ w @ a
        dv = np.linalg.solve(info, a.T @ w @ dx)
        resid = dx - a @ dv
        cost = float(resid @ w @ resid)
        if best is None or cost < best[0]:
            best = (cost, j, dv, np.linalg.inv(info))
    _, j, dv, cov = best
    r, v = traj.x[j, :3], traj.x[j, 3:]
    to_rtn = rtn_to_teme6(r, v)[:3, :3].T  # the RTN axes of the pre-burn orbit (any inertial frame)
    return DeltaV(float(times[j]), to_rtn @ dv, float(math.sqrt(max(np.trace(cov), 0.0))),
                  float(dv @ np.linalg.solve(cov, dv)))
