"""Position-uncertainty model: the covariance used for the probability of collision (Pc) and, per
candidate, by the correlation gate (:class:`CatalogueModel`, :func:`catalogue_model`; see
:mod:`sda.orbit.correlation`), and the error the simulator gives a catalogue with ``--tle-age-days``.

The catalogue holds TLEs, which carry no covariance, and the pipeline does no orbit determination,
so each object's covariance at the time of closest approach (TCA) is *modelled*. The model is
diagonal in the object's RTN frame (R along r, N along the inertial angular momentum r x v, T = N x R;
:func:`sda.orbit.pc.rtn_basis`), with no correlations between axes:

**Reference.** An uncertainty is known at a reference time ``t_ref`` and grows from there:

* *observed*: when the object's newest gold ``object_state`` window (largest ``last_observed``) has a
  residual RMS and was observed at or after the epoch of the element set being screened, the
  residuals measured that element set's actual error: ``t_ref = last_observed`` and the 3-D residual
  RMS is spread over the axes in the proportions of the regime's epoch sigmas below (so that
  ``sqrt(sR^2 + sT^2 + sN^2) = rms``: along-track dominant, as TLE errors are), each axis floored at
  :data:`MIN_SIGMA_M` (the RMS of a few sensor residuals says little below sensor noise).
  Observations older than the element-set epoch measured an older element set and are not used.
* *tle*: otherwise ``t_ref`` = the element set's epoch and the sigmas at epoch are the regime's.

**Growth** with ``dt = |t - t_ref|`` in days (the law, per axis, metres)::

    sigma_R(t) = sigma_R0 + kR * dt
    sigma_N(t) = sigma_N0 + kN * dt
    sigma_T(t) = sigma_T0 + kT * dt + qT * dt^2

Linear growth in every axis stands for an error in the mean motion / orbit plane at the reference
(the along-track error of a mean-motion error grows linearly and fastest); the quadratic along-track
term, used in LEO only, stands for the mismodelled drag (an error in the decay rate of the mean
motion integrates twice into along-track position).

**Regimes** (:func:`orbit_regime`, from perigee/apogee heights): HEO if the eccentricity
``(ha - hp) / (ha + hp + 2 Re) >= 0.25``; else LEO if perigee < 2,000 km; else GEO if perigee and apogee
both lie within 35,786 +- 2,000 km; else MEO.

The figures of :data:`REGIMES` are rounded engineering values chosen in the range of published TLE
accuracy assessments -- Flohrer, Krag & Klinkrad (2008), "Assessment and categorization of TLE orbit
errors for the US SSN catalogue" (AMOS Conference; 1-sigma RTN errors at epoch by orbit class, from
ESA's comparison of TLE-derived states with orbit determinations), and Vallado & Cefola (2012),
"Two-line element sets -- practice and use" (IAC-12.C1.6.12; error growth of a few km per day along
track in LEO). They are order-of-magnitude figures, not rows copied from a table: check them against
the papers' tables (or fit them to the pipeline's own residual statistics) before operational use.

**Velocity block** (for the CDM's 6x6 covariance; the 2-D Pc uses the position block only):
``sigma_Vi = n * sigma_i`` with ``n = sqrt(mu / |r|^3)`` the local circular orbital rate at TCA -- a
position error ellipse of a near-circular orbit oscillates at the orbital frequency, so its velocity
counterpart is of that size -- and no position-velocity correlation.

Pure functions; times are unix seconds (UTC) or aware datetimes; sigmas in metres.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from sda.orbit.times import unix

__all__ = [
    "MIN_SIGMA_M",
    "Regime",
    "REGIMES",
    "Reference",
    "orbit_regime",
    "tle_reference",
    "observed_reference",
    "choose_reference",
    "sigma_rtn_m",
    "position_covariance_rtn",
    "orbital_rate",
    "sigmas6",
    "covariance_rtn6",
    "CatalogueModel",
    "catalogue_model",
    "fixed_model",
]

MU_M3_S2 = 3.986004418e14
R_EARTH_KM = 6378.137
GEO_HEIGHT_KM = 35786.0
DAY_S = 86400.0

#: Floor of an observed per-axis sigma [m].
MIN_SIGMA_M = 10.0
#: Eccentricity from which an orbit is HEO (Molniya, GTO...).
HEO_MIN_ECCENTRICITY = 0.25
#: Perigee height below which a (non-HEO) orbit is LEO [km].
LEO_MAX_PERIGEE_KM = 2000.0
#: Half-width of the GEO band around 35,786 km [km].
GEO_HALF_WIDTH_KM = 2000.0


@dataclasses.dataclass(frozen=True)
class Regime:
    """Epoch sigmas (R, T, N) [m], linear growth (R, T, N) [m/day], quadratic along-track [m/day^2]."""

    name: str
    sigma0_m: tuple[float, float, float]
    rate_m_day: tuple[float, float, float]
    accel_t_m_day2: float = 0.0


REGIMES: dict[str, Regime] = {
    "LEO": Regime("LEO", (100.0, 500.0, 200.0), (50.0, 1000.0, 50.0), 100.0),
    "MEO": Regime("MEO", (300.0, 1500.0, 500.0), (30.0, 300.0, 30.0)),
    "GEO": Regime("GEO", (500.0, 2000.0, 1000.0), (50.0, 500.0, 50.0)),
    "HEO": Regime("HEO", (1000.0, 5000.0, 1000.0), (200.0, 3000.0, 200.0)),
}


@dataclasses.dataclass(frozen=True)
class Reference:
    """Where an object's uncertainty is known: ``t_ref`` (unix s), the sigmas there [m], its regime,
    and ``source``: ``"observed"`` (gold object_state residuals) or ``"tle"`` (element-set epoch)."""

    t_ref: float
    sigma0_m: tuple[float, float, float]
    regime: Regime
    source: str

    @property
    def label(self) -> str:
        """``source/regime``, e.g. ``tle/LEO`` (the alerts tables' ``*_cov_source``)."""
        return f"{self.source}/{self.regime.name}"


def orbit_regime(perigee_km: float, apogee_km: float) -> str:
    """LEO | MEO | GEO | HEO from perigee and apogee heights above the equatorial radius [km]."""
    hp, ha = float(perigee_km), float(apogee_km)
    if ha < hp:
        hp, ha = ha, hp
    ecc = (ha - hp) / (ha + hp + 2.0 * R_EARTH_KM)
    if ecc >= HEO_MIN_ECCENTRICITY:
        return "HEO"
    if hp < LEO_MAX_PERIGEE_KM:
        return "LEO"
    if abs(hp - GEO_HEIGHT_KM) <= GEO_HALF_WIDTH_KM and abs(ha - GEO_HEIGHT_KM) <= GEO_HALF_WIDTH_KM:
        return "GEO"
    return "MEO"


def tle_reference(epoch, perigee_km: float, apogee_km: float) -> Reference:
    """Uncertainty known at the element set's epoch, at the regime's literature sigmas."""
    regime = REGIMES[orbit_regime(perigee_km, apogee_km)]
    return Reference(unix(epoch), regime.sigma0_m, regime, "tle")


def observed_reference(last_observed, residual_rms_m: float, perigee_km: float, apogee_km: float,
                       min_sigma_m: float = MIN_SIGMA_M) -> Reference:
    """Uncertainty known at ``last_observed``: the 3-D residual RMS spread over R, T, N in the
    proportions of the regime's epoch sigmas, each floored at ``min_sigma_m``."""
    regime = REGIMES[orbit_regime(perigee_km, apogee_km)]
    shape = np.asarray(regime.sigma0_m, float)
    sig = np.maximum(float(residual_rms_m) * shape / np.linalg.norm(shape), float(min_sigma_m))
    return Reference(unix(last_observed), tuple(float(s) for s in sig), regime, "observed")


def choose_reference(tle_epoch, perigee_km: float, apogee_km: float, last_observed=None,
                     residual_rms_m: float | None = None, min_sigma_m: float = MIN_SIGMA_M) -> Reference:
    """The observed reference when the newest object_state has a finite residual RMS and was observed
    at or after the element-set epoch, else the TLE reference (see the module docstring)."""
    if (last_observed is not None and residual_rms_m is not None and math.isfinite(float(residual_rms_m))
            and residual_rms_m >= 0.0 and unix(last_observed) >= unix(tle_epoch)):
        return observed_reference(last_observed, residual_rms_m, perigee_km, apogee_km, min_sigma_m)
    return tle_reference(tle_epoch, perigee_km, apogee_km)


def sigma_rtn_m(ref: Reference, t) -> np.ndarray:
    """(sigma_R, sigma_T, sigma_N) [m] at ``t`` by the growth law of the module docstring."""
    days = abs(unix(t) - ref.t_ref) / DAY_S
    s0 = np.asarray(ref.sigma0_m, float)
    k = np.asarray(ref.regime.rate_m_day, float)
    sig = s0 + k * days
    sig[1] += ref.regime.accel_t_m_day2 * days * days
    return sig


def position_covariance_rtn(ref: Reference, t) -> np.ndarray:
    """3x3 RTN position covariance [m^2] at ``t`` (diagonal)."""
    return np.diag(sigma_rtn_m(ref, t) ** 2)


def orbital_rate(r_m) -> float:
    """Local circular orbital rate sqrt(mu / |r|^3) [rad/s] at position ``r_m`` [m]."""
    rn = float(np.linalg.norm(np.asarray(r_m, float)))
    if not rn > 0.0:
        raise ValueError("orbital rate undefined at |r| = 0")
    return math.sqrt(MU_M3_S2 / rn ** 3)


def sigmas6(ref: Reference, t, r_m) -> np.ndarray:
    """(sR, sT, sN, sRdot, sTdot, sNdot) [m, m/s] at ``t`` for an object at ``r_m`` [m]."""
    pos = sigma_rtn_m(ref, t)
    return np.concatenate([pos, orbital_rate(r_m) * pos])


def covariance_rtn6(ref: Reference, t, r_m) -> np.ndarray:
    """6x6 RTN position/velocity covariance [m^2, m^2/s, m^2/s^2] at ``t`` (diagonal)."""
    return np.diag(sigmas6(ref, t, r_m) ** 2)


# --- many objects at once (the correlation gate) ---------------------------------------------------

@dataclasses.dataclass(frozen=True)
class CatalogueModel:
    """The growth law for many objects at once, as arrays over the objects: ``t_ref`` [n] (unix s),
    ``sigma0_m`` [n, 3] and ``rate_m_day`` [n, 3] (R, T, N), ``accel_t_m_day2`` [n] and ``regime`` [n]
    (names). :meth:`sigma_rtn_m` is :func:`sigma_rtn_m` for object ``index[p]`` at time ``t[p]``."""

    t_ref: np.ndarray
    sigma0_m: np.ndarray
    rate_m_day: np.ndarray
    accel_t_m_day2: np.ndarray
    regime: np.ndarray

    def __len__(self) -> int:
        return len(self.t_ref)

    def sigma_rtn_m(self, index: np.ndarray, t: np.ndarray) -> np.ndarray:
        """[m, 3] (sigma_R, sigma_T, sigma_N) in metres of objects ``index`` at unix times ``t``."""
        index = np.asarray(index, dtype=np.int64)
        days = np.abs(np.asarray(t, float) - self.t_ref[index]) / DAY_S
        sig = self.sigma0_m[index] + self.rate_m_day[index] * days[:, None]
        sig[:, 1] += self.accel_t_m_day2[index] * days * days
        return sig

    def widened(self, factor: float) -> "CatalogueModel":
        """The same law with every sigma times ``factor`` (re-association's wider pass)."""
        return dataclasses.replace(self, sigma0_m=self.sigma0_m * factor, rate_m_day=self.rate_m_day * factor,
                                   accel_t_m_day2=self.accel_t_m_day2 * factor)

    def along_rate_m_day(self, index: np.ndarray, t: np.ndarray) -> np.ndarray:
        """[m] d sigma_T / dt [m/day] of objects ``index`` at ``t`` (the along-track error's growth rate)."""
        index = np.asarray(index, dtype=np.int64)
        days = np.abs(np.asarray(t, float) - self.t_ref[index]) / DAY_S
        return self.rate_m_day[index, 1] + 2.0 * self.accel_t_m_day2[index] * days


def catalogue_model(epochs, perigee_km, apogee_km) -> CatalogueModel:
    """The TLE reference (:func:`tle_reference`) of every object: element-set epochs (unix s or
    datetimes) and perigee / apogee heights [km] -> :class:`CatalogueModel`."""
    t_ref = np.array([unix(e) for e in epochs], dtype=float)
    names = np.array([orbit_regime(p, a) if math.isfinite(p) and math.isfinite(a) else "HEO"
                      for p, a in zip(np.asarray(perigee_km, float), np.asarray(apogee_km, float))], dtype=object)
    table = {name: (r.sigma0_m, r.rate_m_day, r.accel_t_m_day2) for name, r in REGIMES.items()}
    sigma0 = np.array([table[n][0] for n in names], dtype=float).reshape(-1, 3)
    rate = np.array([table[n][1] for n in names], dtype=float).reshape(-1, 3)
    accel = np.array([table[n][2] for n in names], dtype=float)
    return CatalogueModel(t_ref, sigma0, rate, accel, names)


def fixed_model(n: int, sigma_m: float) -> CatalogueModel:
    """``n`` objects with the same isotropic, constant sigma (the gate's override, see sda.orbit.correlation)."""
    return CatalogueModel(np.zeros(n), np.full((n, 3), float(sigma_m)), np.zeros((n, 3)), np.zeros(n),
                          np.full(n, "fixed", dtype=object))
