"""Batch weighted least squares with a prior: one object's orbit from its observations over an arc.

:func:`fit` takes one object's observations as a pandas DataFrame in the silver envelope's columns
(:data:`sda.lake.schemas.OBSERVATION`: ``event_time``, ``sensor_id``, ``sensor_kind``, the measurement
and site columns) and a :class:`Prior` (the catalogue element set's state and modelled covariance,
:func:`sda.orbit.estimation.prior.prior_from_tle`, or the previous fused estimate,
:func:`sda.orbit.estimation.predict.prior_from_result`), and returns an :class:`OdResult` (the gold table's
record: :meth:`OdResult.to_record`).

**Solve-for**: the GCRF state at the prior's epoch and the ballistic coefficient ``B`` = Cd A/m
(m^2/kg) of the estimator's force model (:mod:`sda.orbit.estimation.dynamics`), seven parameters.

**Iteration** (Gauss-Newton): propagate with the transition matrix and sensitivity to every observation,
stack the whitened residuals ``(observed - predicted) / sigma`` and Jacobians of every accepted
measurement with the prior's rows ``L^-1 (x_prior - x)`` (``P_prior = L L^T``), solve the stacked system
by least squares (columns scaled by the prior's sigmas), correct, repeat. Converged when the correction
is below :attr:`OdConfig.tol_sigma` of its own standard deviation in every direction (``dx^T N dx``,
``N`` the information matrix) and the accepted set no longer changes.

**Jacobian reuse.** Integrating the transition matrix and sensitivity costs some ten times the state
alone. They are integrated on the first iteration and again only after a correction that moved the position
by more than :attr:`OdConfig.jacobian_refresh_m`; the other iterations propagate the corrected state alone
and keep the last Jacobians (a simplified Gauss-Newton, or chord, iteration). A correction of ``d`` metres
changes them by about ``d / r`` relatively (7e-4 for 5 km in LEO), so each iteration still shrinks the
error by some thousand times, and the solution is the same to a small fraction of its sigma; the covariance
is the last Jacobians', as close.

**Outlier editing** by normalised residual: a measurement row (one observation of one sensor) is
rejected when its largest ``|residual / sigma|`` exceeds ``max(edit_sigma, 3 x the previous iteration's
weighted RMS)`` -- the first iteration edits nothing, as a prior kilometres off makes every residual
large -- and re-admitted when it falls back inside; after :attr:`OdConfig.edit_iterations` the
accepted rows stay as they are (a row on the threshold flipping in and out would stall convergence).

**B held first** (:attr:`OdConfig.hold_b`, off by default): the iterations can start with ``B`` held at
its prior and free it once the state's correction is small. The bench's sparse arcs that went to a
wrong minimum were the prior's fault (:mod:`sda.orbit.estimation.prior`), not B's; holding it cost two iterations.

**Covariance**: the formal one, ``N^-1``, times the weighted RMS^2 when that exceeds 1 (the residuals
then say the noise or the model is worse than assumed), mapped to the arc's end, plus the model error
the arc leaves there (:func:`sda.orbit.estimation.noise.arc_model_covariance`). Its growth from there
(drag and force-model error) is :mod:`sda.orbit.estimation.predict`'s.

**Why not brahe's own ``BatchLeastSquares``**: it would serve the same algorithm, but the pipeline's
measurement conventions (radar in an ECEF reached from TEME by GMST, optical in TEME) would be Python
callbacks called per observation, with finite-difference Jacobians, and its outlier editing would not be
the one described here; vectorised numpy models over all observations at once cost milliseconds.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from sda.orbit.estimation import dynamics
from sda.orbit.estimation.calibration import residual_table
from sda.orbit.estimation.measurements import MODELS, models
from sda.orbit.estimation.noise import ProcessNoise, arc_model_covariance

#: ``status`` of a result.
CONVERGED, NOT_CONVERGED, DIVERGED, FAILED, TOO_FEW = "converged", "not_converged", "diverged", "failed", "too_few"


@dataclasses.dataclass(frozen=True)
class Prior:
    """What is known before the arc: TEME state (m, m/s) at ``epoch`` (unix s) with its 6x6 covariance,
    the ballistic coefficient ``b`` (m^2/kg) with its sigma, and where it came from."""

    epoch: float
    state: np.ndarray
    covariance: np.ndarray
    b: float = 0.05
    sigma_b: float = 0.15
    source: str = "catalogue"


@dataclasses.dataclass(frozen=True)
class OdConfig:
    max_iterations: int = 12
    edit_sigma: float = 4.0  # outlier threshold on a row's largest normalised residual
    tol_sigma: float = 0.1  # convergence: correction below this many of its sigmas
    edit_iterations: int = 5  # the accepted rows are kept as they are after this many iterations
    min_observations: int = 6
    node_step_s: float = dynamics.NODE_STEP_S
    noise: ProcessNoise = ProcessNoise()
    hold_b: bool = False  # B held at its prior until the state's correction is small (sparse arcs)
    #: the transition matrix and sensitivity are integrated again only after a correction that moved the
    #: position by more than this (m); smaller ones reuse the last (module docstring, "Jacobian reuse")
    jacobian_refresh_m: float = 20_000.0
    light_time: bool = False  # the measurements carry light time (sda.orbit.estimation.measurements.models)
    #: a converged fit keeps its post-fit residuals (:attr:`OdResult.residuals`: the sensor calibration's input)
    residuals: bool = False
    #: the sensors' remaining biases as consider parameters of this many times their nominal sigmas
    #: (:mod:`sda.orbit.estimation.bias_consider`); 0: the covariance of the noise alone
    bias_scale: float = 0.0


@dataclasses.dataclass
class OdResult:
    """One object's fused orbit: TEME state (m, m/s) and B at ``epoch`` with their 7x7 covariance
    (m, m/s, m^2/kg); the fit's span, what was used, how well it fitted and how it ended."""

    epoch: float
    state: np.ndarray
    covariance: np.ndarray
    b: float
    fit_start: float
    fit_end: float
    observations: dict[str, int]
    used: dict[str, int]
    outliers: int
    rms: float
    iterations: int
    status: str
    reason: str = ""
    prior_source: str = "catalogue"
    model: str = dynamics.MODEL
    accepted_ids: tuple = ()  # the ``obs_id`` of every observation outlier editing kept (when obs has them)
    #: with :attr:`OdConfig.residuals`, a converged fit's accepted residuals per biased quantity
    #: (:func:`sda.orbit.estimation.calibration.residual_table`), else None
    residuals: pd.DataFrame | None = None

    @property
    def converged(self) -> bool:
        return self.status == CONVERGED

    @property
    def sigma_b(self) -> float:
        return float(math.sqrt(max(self.covariance[6, 6], 0.0)))

    def to_record(self) -> dict:
        """JSON-able row: state in TEME km and km/s (SGP4's units, as the pipeline's states), the
        covariance in metres (m, m/s, m^2/kg; row-major 7x7), times as unix seconds."""
        return {"epoch": self.epoch, "r_teme_km": (self.state[:3] / 1000.0).tolist(),
                "v_teme_kms": (self.state[3:] / 1000.0).tolist(), "covariance_7x7": self.covariance.ravel().tolist(),
                "b_m2_kg": self.b, "sigma_b_m2_kg": self.sigma_b, "fit_start": self.fit_start,
                "fit_end": self.fit_end, "observations": dict(self.observations), "used": dict(self.used),
                "outliers": self.outliers, "rms": self.rms, "iterations": self.iterations,
                "converged": self.converged, "status": self.status, "reason": self.reason,
                "source": "fused", "prior_source": self.prior_source, "model": self.model}


@dataclasses.dataclass
class _Block:
    """One sensor kind's observations: model, times, rows, observed values and sigmas [m, k]."""

    kind: str
    t: np.ndarray
    obs: pd.DataFrame
    y: np.ndarray
    sigma: np.ndarray
    index: np.ndarray  # positions of these times in the fit's time vector


def _blocks(obs: pd.DataFrame, sigmas, t0: float) -> tuple[list[_Block], np.ndarray]:
    # naive timestamps are UTC (the pipeline's), aware ones are converted
    t_all = (pd.to_datetime(obs["event_time"], utc=True) - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    keep = t_all >= t0 - 1e-6
    obs, t_all = obs[keep], t_all[keep]
    blocks, offset = [], 0
    for kind, model in MODELS.items():
        rows = (obs["sensor_kind"] == kind).to_numpy()
        if not rows.any():
            continue
        part = obs[rows].reset_index(drop=True)
        y = model.observed(part)
        sigma = model.sigma(part, sigmas)
        y[~(np.isfinite(sigma) & (sigma > 0))] = np.nan
        blocks.append(_Block(kind, t_all[rows], part, y, sigma, offset + np.arange(len(part))))
        offset += len(part)
    times = np.concatenate([b.t for b in blocks]) if blocks else np.empty(0)
    return blocks, times


def _to_gcrf7(state_teme: np.ndarray, cov6: np.ndarray, b: float, sigma_b: float, rot: np.ndarray):
    """A TEME state and covariance with B -> GCRF (x [7], P [7, 7]); ``rot`` A with TEME = A GCRF."""
    big = np.zeros((7, 7))
    big[:3, :3] = big[3:6, 3:6] = rot.T
    big[6, 6] = 1.0
    cov = np.zeros((7, 7))
    cov[:6, :6] = cov6
    cov[6, 6] = sigma_b**2
    x = np.concatenate([rot.T @ state_teme[:3], rot.T @ state_teme[3:6], [b]])
    return x, big @ cov @ big.T


def _teme7(rot: np.ndarray) -> np.ndarray:
    """7x7: GCRF (state, B) -> TEME (state, B) with TEME = rot GCRF."""
    big = np.eye(7)
    big[:3, :3] = big[3:6, 3:6] = rot
    return big


def _linearise(blocks, traj, rots, light_time: bool = False):
    """Whitened residuals [rows, k] and Jacobians [rows, k, 7] (wrt GCRF state at t0 and B), per block; the
    measurement models with or without light time (:func:`sda.orbit.estimation.measurements.models`)."""
    kinds = models(light_time)
    out = []
    x_teme = np.concatenate([np.einsum("mij,mj->mi", rots, traj.x[:, :3]),
                             np.einsum("mij,mj->mi", rots, traj.x[:, 3:])], axis=1)
    jac7 = traj.jac7
    big = np.zeros((len(rots), 6, 6))
    big[:, :3, :3] = big[:, 3:, 3:] = rots
    d_teme = big @ jac7  # [m, 6, 7]
    for block in blocks:
        model = kinds[block.kind]
        xb = x_teme[block.index]
        res = model.residual(block.y, model.predict(xb, block.t, block.obs))
        h = model.jacobian(xb, block.t, block.obs) @ d_teme[block.index]
        out.append((res / block.sigma, h / block.sigma[:, :, None]))
    return out


@dataclasses.dataclass
class _Solve:
    """One Gauss-Newton step: the correction, the information matrix, the weighted RMS and counts."""

    dx: np.ndarray
    info: np.ndarray
    rms: float
    accepted: list[np.ndarray]
    components: int


def _step(lin, x: np.ndarray, x_prior: np.ndarray, p_prior: np.ndarray, threshold: float,
          frozen: list[np.ndarray] | None = None) -> _Solve:
    """Edit (unless ``frozen`` gives the accepted rows), stack and solve one iteration (module docstring),
    columns scaled by the prior's sigmas."""
    scale = np.sqrt(np.diag(p_prior))
    rows, rhs, accepted, sum_sq, count = [], [], [], 0.0, 0
    for k, (z, h) in enumerate(lin):
        finite = np.isfinite(z)
        worst = np.max(np.where(finite, np.abs(z), 0.0), axis=1)
        ok = frozen[k] if frozen is not None else finite.any(axis=1) & (worst <= threshold)
        accepted.append(ok)
        use = finite & ok[:, None]
        rows.append(h[use] * scale)
        rhs.append(z[use])
        sum_sq += float(np.sum(z[use] ** 2))
        count += int(use.sum())
    chol = np.linalg.cholesky(p_prior / np.outer(scale, scale))
    l_inv = np.linalg.inv(chol)
    a = np.concatenate(rows + [l_inv])
    b = np.concatenate(rhs + [l_inv @ ((x_prior - x) / scale)])
    dy = np.linalg.lstsq(a, b, rcond=None)[0]
    info = (a.T @ a) / np.outer(scale, scale)
    return _Solve(dy * scale, info, math.sqrt(sum_sq / max(count, 1)), accepted, count)


def fit(obs: pd.DataFrame, prior: Prior, sigmas, config: OdConfig = OdConfig(), epoch: float | None = None) -> OdResult:
    """One object's orbit from its observations ``obs`` (silver envelope columns; rows before the prior's
    epoch are ignored) and ``prior``, reported at ``epoch`` (default: the last observation's time; at or
    after the prior's epoch).
    ``sigmas``: ``{sensor_id: {sigma name: value}}`` (:func:`sda.orbit.estimation.measurements.registry_sigmas`)."""
    blocks, times = _blocks(obs, sigmas, prior.epoch)
    counts = {b.kind: len(b.t) for b in blocks}
    t0 = float(prior.epoch)
    t_end = float(epoch if epoch is not None else (times.max() if len(times) else t0))
    empty = dict(fit_start=float(times.min()) if len(times) else t0, fit_end=float(times.max()) if len(times) else t0,
                 observations=counts, prior_source=prior.source)
    rot0, rot_end = dynamics.teme_rotation([t0, t_end])
    x_prior, p_prior = _to_gcrf7(np.asarray(prior.state, float), np.asarray(prior.covariance, float), prior.b,
                                 prior.sigma_b, rot0)
    if len(times) < config.min_observations:
        return _unfitted(x_prior, p_prior, t0, t_end, rot_end, config, empty, TOO_FEW,
                         f"{len(times)} observations after the prior's epoch (at least {config.min_observations})")
    rots = dynamics.teme_rotation(times)
    all_times = np.concatenate([times, end_window(t0, t_end, config.noise)])
    try:
        traj, solve, x, iteration, status, reason = _iterate(blocks, rots, all_times, t0, x_prior, p_prior, config)
    except dynamics.PropagationError as exc:
        return _unfitted(x_prior, p_prior, t0, t_end, rot_end, config, empty, FAILED, str(exc))
    extra = _bias_consider(blocks, traj, solve, rots, config) if config.bias_scale > 0.0 else None
    result = _result(traj, solve, x, blocks, rot_end, iteration, status, reason, empty, config.noise, extra)
    if config.residuals and result.converged:
        result.residuals = residual_table(blocks, _fitted_teme(traj, solve.dx, rots), solve.accepted,
                                          config.light_time)
    return result


def _bias_consider(blocks, traj, solve: _Solve, rots: np.ndarray, config: OdConfig) -> np.ndarray:
    """The 7x7 consider covariance of the sensors' biases (solve-for space at the fit's start)."""
    from sda.orbit.estimation import bias_consider

    lin = _linearise(blocks, _head(traj, len(rots)), rots, config.light_time)
    nominal = {kind: {q: s * config.bias_scale for q, s in values.items()}
               for kind, values in bias_consider.NOMINAL.items()}
    return bias_consider.consider(blocks, lin, solve.accepted, np.linalg.inv(solve.info),
                                  _fitted_teme(traj, solve.dx, rots), config.light_time, nominal)


def _fitted_teme(traj: dynamics.Trajectory, dx: np.ndarray, rots: np.ndarray) -> np.ndarray:
    """[m, 6] the fitted TEME states at the fit's times: the last linearisation moved by its correction."""
    n = len(rots)
    x = traj.x[:n] + np.einsum("mij,j->mi", traj.jac7[:n], dx)
    return np.concatenate([np.einsum("mij,mj->mi", rots, x[:, :3]), np.einsum("mij,mj->mi", rots, x[:, 3:])], axis=1)


def end_window(t0: float, t_end: float, noise: ProcessNoise) -> np.ndarray:
    """The 7 times of the arc's last :attr:`ProcessNoise.arc_window_s` where a fit also propagates (its
    model error at the epoch, :func:`_result`)."""
    return np.linspace(max(t0, t_end - noise.arc_window_s), t_end, 7)


def _iterate(blocks, rots, all_times, t0: float, x_prior: np.ndarray, p_prior: np.ndarray, config: OdConfig):
    """Gauss-Newton to convergence (with ``config.hold_b``, B held at its prior until the state's
    correction is small, then free)."""
    held = p_prior.copy()
    held[6, :] = held[:, 6] = 0.0
    held[6, 6] = (1e-6 * max(abs(x_prior[6]), 1e-3)) ** 2
    x, rms_prev, accepted_prev, status, reason = x_prior.copy(), math.inf, None, NOT_CONVERGED, ""
    free_b, jacobians, moved = not config.hold_b, None, math.inf
    for iteration in range(1, config.max_iterations + 1):
        fresh = jacobians is None or moved > config.jacobian_refresh_m
        traj = dynamics.propagate(t0, x[:6], x[6], all_times, config.node_step_s, variational=fresh)
        if fresh:
            jacobians = traj.phi, traj.sens
        else:
            traj = dynamics.Trajectory(traj.t, traj.x, *jacobians)
        lin = _linearise(blocks, _head(traj, len(rots)), rots, config.light_time)
        frozen = accepted_prev if iteration > config.edit_iterations else None
        solve = _step(lin, x, x_prior, p_prior if free_b else held, max(config.edit_sigma, 3.0 * rms_prev), frozen)
        x = x + solve.dx
        moved = float(np.linalg.norm(solve.dx[:3]))
        small = float(solve.dx @ solve.info @ solve.dx) < config.tol_sigma**2
        same = accepted_prev is not None and all(np.array_equal(a, b) for a, b in zip(solve.accepted, accepted_prev))
        if small and same and free_b:
            return traj, solve, x, iteration, CONVERGED, ""
        if iteration >= 4 and solve.rms > 10.0 * max(rms_prev, 1.0):
            return traj, solve, x, iteration, DIVERGED, f"weighted RMS grew from {rms_prev:.3g} to {solve.rms:.3g}"
        if small and not free_b:
            free_b, same = True, False
        rms_prev, accepted_prev = solve.rms, solve.accepted
    return traj, solve, x, iteration, status, reason or f"no convergence in {config.max_iterations} iterations"


def _head(traj: dynamics.Trajectory, n: int) -> dynamics.Trajectory:
    return dynamics.Trajectory(traj.t[:n], traj.x[:n], traj.phi[:n], traj.sens[:n])


def _result(traj, solve: _Solve, x: np.ndarray, blocks, rot_end, iteration: int, status: str, reason: str,
            meta: dict, noise: ProcessNoise, extra: np.ndarray | None = None) -> OdResult:
    """The fused state at the arc's end: the last linearisation's end state moved by the last correction
    ``solve.dx`` (``x`` the corrected solve-for vector), with the (RMS-scaled) formal covariance, plus
    ``extra`` (the sensors' biases, solve-for space), mapped there plus the model error of the arc's last
    :attr:`ProcessNoise.arc_window_s` (the last 7 times)."""
    j_end = np.zeros((7, 7))
    j_end[:6] = traj.jac7[-1]
    j_end[6, 6] = 1.0
    state = np.append(traj.x[-1] + traj.jac7[-1] @ solve.dx, x[6])
    cov = np.linalg.inv(solve.info) * max(1.0, solve.rms**2)
    if extra is not None:
        cov = cov + extra
    big = _teme7(rot_end)
    cov = j_end @ cov @ j_end.T
    cov[:6, :6] += arc_model_covariance(traj.phi[-7:], traj.sens[-7:], traj.t[-7:], x[6], traj.x[-1, :3], noise)
    cov_end = big @ cov @ big.T
    x_end = big @ state
    used = {b.kind: int(a.sum()) for b, a in zip(blocks, solve.accepted)}
    outliers = int(sum(len(a) - a.sum() for a in solve.accepted))
    kept = tuple(str(i) for b, a in zip(blocks, solve.accepted) if "obs_id" in b.obs for i in b.obs["obs_id"][a])
    return OdResult(float(traj.t[-1]), x_end[:6], 0.5 * (cov_end + cov_end.T), float(x_end[6]), used=used,
                    outliers=outliers, rms=solve.rms, iterations=iteration, status=status, reason=reason,
                    accepted_ids=kept, **meta)


def _unfitted(x_prior: np.ndarray, p_prior: np.ndarray, t0: float, t_end: float, rot_end, config: OdConfig,
              meta: dict, status: str, reason: str, iteration: int = 0) -> OdResult:
    """No fit: the prior carried to ``t_end`` (NaN when even that fails), with the reason."""
    state, cov = np.full(7, np.nan), np.full((7, 7), np.nan)
    try:
        traj = dynamics.propagate(t0, x_prior[:6], x_prior[6], [t_end], config.node_step_s)
        j_end = np.eye(7)
        j_end[:6] = traj.jac7[-1]
        big = _teme7(rot_end)
        state = big @ np.append(traj.x[-1], x_prior[6])
        cov = big @ j_end @ p_prior @ j_end.T @ big.T
    except dynamics.PropagationError:
        pass
    return OdResult(t_end, state[:6], cov, float(state[6]), used={}, outliers=0, rms=math.nan, iterations=iteration,
                    status=status, reason=reason, **meta)
