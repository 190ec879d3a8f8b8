"""The model error the estimator's force model makes, as covariance: a consider drag error and white
acceleration noise. Used at the fit's epoch (what the arc could not resolve,
:func:`arc_model_covariance`) and over a prediction (:mod:`sda.orbit.estimation.predict`).

* **Drag (consider parameter).** The fitted ballistic coefficient absorbs the arc's mean density error
  of the static Harris-Priester atmosphere; the real density departs from that mean over hours (solar
  and geomagnetic activity, the diurnal bulge misplaced): a relative error ``f`` of ``B``
  (:attr:`ProcessNoise.drag_fraction`, applied to ``max(|B|, b_floor)`` so a B fitted near zero still
  carries it), fully correlated in time: its effect ``sigma_c^2 s s^T``, ``s`` the sensitivity of the
  state to ``B`` since the reference time, grows along track quadratically, as drag errors do.
* **The atmosphere's share of it, and storms.** Of ``f``, :attr:`ProcessNoise.density_fraction` is the
  density forecast's own error, the part two objects at the same place and time share (NASA CARA's "DCP":
  a density forecast uncertainty and each object's sensitivity to it, :meth:`ProcessNoise.density_sigma`,
  :meth:`ProcessNoise.density_scale`); the rest is the body's (attitude, area). The density error grows
  with the geomagnetic activity the pipeline has landed (:class:`SpaceWeather`, the largest Kp, observed
  or forecast, from :attr:`ProcessNoise.lookback_s` before the reference time to the predicted time):
  :attr:`ProcessNoise.density_per_kp` per Kp step above :attr:`ProcessNoise.kp_quiet`, so a storm grows
  the covariance of every prediction that crosses it, as a storm's 2-3-fold density does the errors; a storm
  observed is assumed to go on for a day whatever the forecast says (:class:`SpaceWeather`'s persistence).
  0.3 per Kp step was chosen on development seed 3's storm (ap 150-240 for 12 hours, the density 2.5-2.8
  times; the fit absorbs part of it).
  Without space weather, or in quiet times, the term is the quiet one.
* **White acceleration noise** (state noise compensation): spectral density ``q`` per axis
  (:attr:`ProcessNoise.accel_psd`, m^2/s^3, at :data:`R_REF_M`), mapped through the dynamics,
  ``Q_{k+1} = Phi_k Q_k Phi_k^T + q G(dt_k)``: the gravity field's truncation, SRP, and the rest. The
  truncated field's terms fall off as ``(R / r)^(n + 2)``, n > 16: ``q`` falls as ``(R_REF / r)^8``
  with the orbit's radius, down to :attr:`ProcessNoise.psd_floor` (SRP and third-body model errors
  of MEO and GEO).

At the fit's epoch the arc's own model error is this model's growth over the arc's last
:attr:`ProcessNoise.arc_window_s` (2 h, a pass gap or so): the formal covariance knows only the
sensor noise, and a 6-h fit of a model that is not the sky's is 10-50 m off at its end in LEO.

The constants were chosen on two simulated runs (bench/od.py seeds 1 and 2: 56 LEO objects, 10
MEO/GEO) for 0.90-0.99 of the true errors inside the 95 % ellipsoid at the arc's end and 24 h later;
the errors are heavier-tailed than a Gaussian, so the median d^2 comes out below 3 (about 1). On runs
they were not chosen on (seeds 3 and 4, 40 and 60 LEO objects) 0.97 / 1.00 and 0.97 / 0.97 of the
LEO errors were inside at the arc's end / 24 h later.
"""

from __future__ import annotations

import dataclasses

import numpy as np

R_REF_M = 6878.137e3  # 500 km up: where :attr:`ProcessNoise.accel_psd` applies


PERSIST_S = 24 * 3600.0  # a storm observed is assumed to last this long past its newest observed interval


@dataclasses.dataclass(frozen=True)
class SpaceWeather:
    """The 3-hour Kp the pipeline has landed (observed, else the forecast), as unix-second intervals; ``observed``
    says which are. A forecast does not know a storm under way: for :data:`PERSIST_S` after the newest observed
    interval, a forecast interval takes that interval's Kp when larger (persistence)."""

    start: tuple[float, ...] = ()
    end: tuple[float, ...] = ()
    kp: tuple[float, ...] = ()
    observed: tuple[bool, ...] = ()

    @classmethod
    def from_frame(cls, frame) -> "SpaceWeather | None":
        """From a frame of ``interval_start``, ``interval_end`` (UTC timestamps) and ``kp``
        (:func:`sda.pipeline.space_weather.read_pandas`); None when it has no row."""
        if frame is None or len(frame) == 0:
            return None
        unix = [frame[c].astype("datetime64[ns, UTC]").astype("int64").to_numpy() / 1e9
                for c in ("interval_start", "interval_end")]
        kp = frame["kp"].astype(float).to_numpy()
        observed = frame["observed"].fillna(False).astype(bool).to_numpy() if "observed" in frame else np.zeros(
            len(kp), bool)
        keep = np.isfinite(kp)
        return cls(tuple(unix[0][keep].tolist()), tuple(unix[1][keep].tolist()), tuple(kp[keep].tolist()),
                   tuple(observed[keep].tolist()))

    def effective_kp(self) -> np.ndarray:
        """[n] each interval's Kp, the forecast's raised by persistence (class docstring)."""
        kp = np.asarray(self.kp, float).copy()
        observed = np.asarray(self.observed, bool) if len(self.observed) == len(kp) else np.zeros(len(kp), bool)
        if not observed.any():
            return kp
        start, end = np.asarray(self.start, float), np.asarray(self.end, float)
        newest = int(np.flatnonzero(observed)[np.argmax(end[observed])])
        ahead = ~observed & (start >= end[newest] - 1e-6) & (start < end[newest] + PERSIST_S)
        kp[ahead] = np.maximum(kp[ahead], kp[newest])
        return kp

    def kp_max(self, t0: float, times) -> np.ndarray:
        """[m] the largest Kp of the intervals overlapping ``[t0, t]`` for each ``t`` in ``times`` (NaN: none)."""
        times = np.atleast_1d(np.asarray(times, float))
        out = np.full(len(times), np.nan)
        if not self.kp:
            return out
        start, end, kp = np.asarray(self.start, float), np.asarray(self.end, float), self.effective_kp()
        live = end > float(t0)
        start, kp = start[live], kp[live]
        for i, t in enumerate(times):
            seen = kp[start <= max(float(t), float(t0))]
            if len(seen):
                out[i] = seen.max()
        return out


@dataclasses.dataclass(frozen=True)
class ProcessNoise:
    drag_fraction: float = 0.4  # relative error of B over hours (consider), quiet: the density's and the body's
    density_fraction: float = 0.2  # of which the density forecast's (shared by objects at one place and time)
    kp_quiet: float = 3.0  # the density forecast's error grows above this Kp ...
    density_per_kp: float = 0.3  # ... by this much (relative density) per Kp step
    lookback_s: float = 3 * 3600.0  # the density answers the Kp of some hours before
    weather: SpaceWeather | None = None  # the landed Kp (None: quiet)
    b_floor: float = 0.05  # m^2/kg: the B the drag fraction applies to at least
    accel_psd: float = 3e-9  # m^2/s^3 per axis, GCRF
    psd_floor: float = 1e-14  # m^2/s^3: the white noise of orbits far above the field's truncation
    arc_window_s: float = 7200.0  # the model error at the fit's epoch: this long's growth

    def sigma_b(self, b: float) -> float:
        """The quiet-time 1-sigma error of B (m^2/kg): a prior's, a consider parameter's before storms."""
        return self.drag_fraction * max(abs(float(b)), self.b_floor)

    def density_scale(self, b: float) -> float:
        """The B a relative density error multiplies (m^2/kg): the state's sensitivity to a relative density
        error is this times its sensitivity to B."""
        return max(abs(float(b)), self.b_floor)

    def density_sigma(self, t0: float, times) -> np.ndarray:
        """[m] the density forecast's relative 1-sigma error over a prediction from ``t0`` to each time."""
        times = np.atleast_1d(np.asarray(times, float))
        base = np.full(len(times), min(self.density_fraction, self.drag_fraction))
        if self.weather is None or self.drag_fraction <= 0.0:  # quiet, or no drag error modelled at all
            return base
        kp = self.weather.kp_max(float(t0) - self.lookback_s, times)
        return base + self.density_per_kp * np.clip(np.nan_to_num(kp, nan=self.kp_quiet) - self.kp_quiet, 0.0, None)

    def consider(self, b: float, sens: np.ndarray, t0: float, times) -> np.ndarray:
        """[m, 6, 6] the drag consider covariance of states whose sensitivity to B is ``sens`` [m, 6], over
        a prediction from ``t0`` to ``times`` [m]: the body's share and the density's (storms grow it)."""
        own = self.drag_fraction**2 - min(self.density_fraction, self.drag_fraction) ** 2
        scale2 = self.density_scale(b) ** 2
        rho = self.density_sigma(t0, times)
        var = scale2 * (own + rho**2)
        return var[:, None, None] * np.einsum("mi,mj->mij", sens, sens)

    def psd(self, r_m) -> float:
        """The white noise's spectral density for an orbit at radius ``|r_m|`` (m)."""
        if self.accel_psd <= 0.0:
            return 0.0
        return max(self.accel_psd * min(1.0, (R_REF_M / float(np.linalg.norm(r_m))) ** 8), self.psd_floor)


def white_noise(dt: float, q: float) -> np.ndarray:
    """6x6 discrete white-noise acceleration covariance over ``dt`` seconds."""
    g = np.zeros((6, 6))
    g[:3, :3] = np.eye(3) * q * dt**3 / 3.0
    g[:3, 3:] = g[3:, :3] = np.eye(3) * q * dt**2 / 2.0
    g[3:, 3:] = np.eye(3) * q * dt
    return g


def accumulated(phi: np.ndarray, t: np.ndarray, q: float) -> np.ndarray:
    """[m, 6, 6] white-noise covariance at sorted times ``t`` (zero at ``t[0]``) from the transition
    matrices ``phi`` [m, 6, 6] (from any common initial time) at those times."""
    out = np.zeros_like(phi)
    if q <= 0.0:
        return out
    for k in range(1, len(t)):
        step = phi[k] @ np.linalg.inv(phi[k - 1])
        out[k] = step @ out[k - 1] @ step.T + white_noise(t[k] - t[k - 1], q)
    return out


def arc_model_covariance(phi: np.ndarray, sens: np.ndarray, t: np.ndarray, b: float, r_m: np.ndarray,
                         noise: ProcessNoise) -> np.ndarray:
    """6x6 model-error covariance at ``t[-1]`` grown since ``t[0]`` (sorted times; ``phi`` [j, 6, 6] and
    ``sens`` [j, 6] from any common initial time): the consider drag term plus the white noise."""
    step = phi[-1] @ np.linalg.inv(phi[0])
    s = sens[-1] - step @ sens[0]
    return noise.consider(b, s[None, :], t[0], [t[-1]])[0] + accumulated(phi, t, noise.psd(r_m))[-1]
