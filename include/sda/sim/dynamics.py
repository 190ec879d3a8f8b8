"""The simulator's truth: each body's orbit from a numerical force model the pipeline does not share.

The pipeline predicts with SGP4 (a mean-element analytical theory). The sensors of the simulator observe
trajectories integrated numerically by ``brahe`` (MIT; its gravity field, atmosphere, Earth orientation
and space weather ship in its wheel, so nothing is fetched at run time):

* Earth gravity EGM2008 to degree and order :data:`GRAVITY_DEGREE` (20);
* atmospheric drag, NRLMSISE-00 with the wheel's space-weather record, for bodies whose perigee is below
  :data:`DRAG_PERIGEE_KM`;
* Sun and Moon point masses from brahe's analytic (low-precision) ephemerides: its default, JPL's DE440s
  kernel, would be downloaded;
* solar radiation pressure, cannonball, with a conical Earth shadow;
* integrator RKF7(8), relative tolerance 1e-11, absolute 1e-7 m.

Every body has its own drag coefficient, reflectivity coefficient and area-to-mass ratio
(:func:`draw_params`), drawn per object and recorded in the truth, so no estimator knows them.

**Sampling.** Each body is integrated from the run's start ``t0`` through a fixed grid of :data:`STEP_S`
(every grid time is an integration stop) and the states are kept there. A state at any other time
comes from 8-point Lagrange interpolation of the grid's positions and velocities (:class:`Ephemeris`):
below 1 mm in LEO against a direct integration to that time (tests/include/sim/test_sim_dynamics.py), where
brahe's own trajectory interpolation (cubic Hermite between adaptive steps) errs by up to 120 m.
Continuing a stored ephemeris from its last grid state (:func:`extend`) gives the same trajectory to
about a millimetre a day as one integration would: a truth stored over the run can be regenerated to
the end of the screening horizon from what is stored (its last states and the bodies' parameters).

**Start.** A body starts from its element set's state at the run's start, with the velocity scaled so
that the integrated trajectory keeps the set's mean motion over the next two hours
(:func:`match_mean_motion`); without that, an osculating state integrated drifts from its own element
set by some 200 m an hour in LEO, which no real element set does.

**Frames.** brahe integrates in GCRF. The pipeline's frames (:mod:`sda.orbit.frames`) are TEME and an
ECEF reached from it by GMST; the simulator takes brahe's ITRF to be that ECEF, so a site's view of a
body is what brahe's Earth-fixed state says, and hands TEME (km, km/s) to the rest of the simulator,
converted by the pipeline's own ``ecef_to_teme``.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from sda.orbit import frames
from sda.orbit.estimation.brahe_setup import brahe as _brahe
from sda.sim.ephemeris import LAGRANGE_POINTS, Ephemeris
from sda.sim.weather import SEGMENT_S

STEP_S = 120.0
GRAVITY_DEGREE = 20
DRAG_PERIGEE_KM = 2000.0
DECAY_RADIUS_KM = frames.R_EARTH_KM + 100.0  # below this a body has re-entered: no state from then on
REL_TOL, ABS_TOL_M = 1.0e-11, 1.0e-7
MODEL = (f"brahe numerical: EGM2008 {GRAVITY_DEGREE}x{GRAVITY_DEGREE}, NRLMSISE-00 drag (perigee < "
         f"{DRAG_PERIGEE_KM:g} km), Sun and Moon (analytic), SRP with conical shadow; RKF78, rel {REL_TOL:g}")


@dataclasses.dataclass(frozen=True)
class BodyParams:
    """A body's own force parameters: drag coefficient, reflectivity coefficient, area-to-mass (m^2/kg), and for
    tumbling debris in the harsher skies how its area-to-mass varies (:meth:`area_scale`)."""

    cd: float
    cr: float
    area_to_mass: float
    tumble: tuple = ()  # (amplitude, period s, phase) terms of log(area-to-mass / its mean)

    def area_scale(self, unix_s: float) -> float:
        """The area-to-mass over its mean at ``unix_s``: ``exp(sum a sin(2 pi t / P + phase))``."""
        return math.exp(sum(a * math.sin(2.0 * math.pi * unix_s / p + ph) for a, p, ph in self.tumble))

    def vector(self, drag_factor: float = 1.0, area_scale: float = 1.0) -> np.ndarray:
        """brahe's parameter vector [mass, drag area, Cd, SRP area, Cr] for a 1 kg body; ``drag_factor`` scales
        the drag (the harsher skies' density over NRLMSISE-00's, :mod:`sda.sim.weather`), ``area_scale`` both
        areas (a tumbling body's cross-section)."""
        area = self.area_to_mass * area_scale
        return np.array([1.0, area * drag_factor, self.cd, area, self.cr])


TUMBLE_TERMS, TUMBLE_AMPLITUDE, TUMBLE_PERIOD_H = 2, (0.1, 0.25), (2.0, 12.0)


def draw_params(norad_ids, names, seed: int, sky: str = "kind") -> list[BodyParams]:
    """Each body's parameters, drawn from its own stream (seed, catalogue number): the same body gets
    the same values whatever else is simulated. Area-to-mass is log-uniform: payloads 0.005-0.03,
    rocket bodies 0.005-0.015, debris 0.02-0.3 m^2/kg; Cd uniform 2.0-2.6; Cr uniform 1.0-1.8. In the harsher
    skies a debris body tumbles: its area-to-mass varies as the exponential of two sinusoids (amplitude
    0.1-0.25, period 2-12 h; a stream of its own, (seed, 10, number)), so by up to about +-40 %."""
    out = []
    for norad, name in zip(norad_ids, names):
        rng = np.random.default_rng([int(seed), 6, int(norad)])
        upper = str(name).upper()
        lo, hi = (0.02, 0.3) if "DEB" in upper else (0.005, 0.015) if "R/B" in upper else (0.005, 0.03)
        am = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        tumble: tuple = ()
        if sky != "kind" and "DEB" in upper:
            t_rng = np.random.default_rng([int(seed), 10, int(norad)])
            tumble = tuple((round(float(t_rng.uniform(*TUMBLE_AMPLITUDE)), 4),
                            round(float(t_rng.uniform(*TUMBLE_PERIOD_H)) * 3600.0, 1),
                            round(float(t_rng.uniform(0.0, 2.0 * math.pi)), 4)) for _ in range(TUMBLE_TERMS))
        out.append(BodyParams(cd=round(float(rng.uniform(2.0, 2.6)), 4), cr=round(float(rng.uniform(1.0, 1.8)), 4),
                              area_to_mass=round(am, 6), tumble=tumble))
    return out


@functools.cache
def _fit_force():
    """The cheap model the initial states are matched with (:func:`match_mean_motion`): Earth's zonal
    harmonics J2-J6, no drag, no Sun or Moon (no Earth rotation to evaluate). It holds the short-period
    motion SGP4 models, which is what sets an osculating state's mean motion."""
    bh = _brahe()
    return bh.ForceModelConfig(gravity=bh.GravityConfiguration.earth_zonal(bh.ZonalHarmonicsDegree.J6))


@functools.cache
def _force(drag: bool):
    bh = _brahe()
    index = bh.ParameterSource.parameter_index
    return bh.ForceModelConfig(
        gravity=bh.GravityConfiguration.spherical_harmonic(degree=GRAVITY_DEGREE, order=GRAVITY_DEGREE),
        drag=bh.DragConfiguration(model=bh.AtmosphericModel.NRLMSISE00, area=index(1), cd=index(2)) if drag else None,
        srp=bh.SolarRadiationPressureConfiguration(area=index(3), cr=index(4), eclipse_model=bh.EclipseModel.CONICAL),
        third_body=[bh.ThirdBodyConfiguration(bh.ThirdBody.SUN, bh.EphemerisSource.LowPrecision),
                    bh.ThirdBodyConfiguration(bh.ThirdBody.MOON, bh.EphemerisSource.LowPrecision)],
        mass=index(0))


def _config():
    bh = _brahe()
    return (bh.NumericalPropagationConfig.with_method(bh.IntegrationMethod.RKF78)
            .with_rel_tol(REL_TOL).with_abs_tol(ABS_TOL_M))


def _epochs(unix_s) -> list:
    bh = _brahe()
    return [bh.Epoch.from_unix_timestamp(float(t)) for t in np.atleast_1d(unix_s)]


# --- frames ------------------------------------------------------------------------------------------

def teme_to_gcrf(r_km: np.ndarray, v_kms: np.ndarray, unix_s: float) -> np.ndarray:
    """TEME (km, km/s) at one time -> GCRF states [n, 6] (m, m/s), through the pipeline's ECEF = ITRF."""
    r_e, v_e = frames.teme_to_ecef(np.atleast_2d(r_km), np.atleast_2d(v_kms), unix_s)
    rot = _brahe().rotation_gcrf_to_itrf(_epochs(unix_s)[0])  # ITRF = rot @ GCRF
    w = np.array([0.0, 0.0, frames.OMEGA_EARTH])
    r_i = r_e * 1000.0
    v_i = v_e * 1000.0 + np.cross(w, r_i)
    return np.concatenate([r_i @ rot, v_i @ rot], axis=-1)


def gcrf_to_teme(states: np.ndarray, unix_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GCRF states [n, k, 6] (m, m/s) at times [k] -> TEME (r, v) [n, k, 3] in km, km/s."""
    rot = np.asarray(_brahe().rotation_gcrf_to_itrf(_epochs(unix_s)))  # [k, 3, 3]
    rot = rot.reshape(-1, 3, 3)
    r_i = np.einsum("kij,nkj->nki", rot, states[..., :3])
    w = np.array([0.0, 0.0, frames.OMEGA_EARTH])
    v_i = np.einsum("kij,nkj->nki", rot, states[..., 3:]) - np.cross(w, r_i)
    return frames.ecef_to_teme(r_i / 1000.0, v_i / 1000.0, np.asarray(unix_s, float)[None, :])


def _propagator(state: np.ndarray, t: float, params: BodyParams, weather=None):
    """A body's propagator from ``state`` at ``t``, its drag and area those of the segment ``t`` is in
    (:data:`sda.sim.weather.SEGMENT_S`; constant over it) when the sky has ``weather`` or the body tumbles."""
    bh = _brahe()
    hp = _perigee_km(np.asarray(state, float).reshape(1, 6))[0]
    factor, scale = 1.0, 1.0
    if weather is not None or params.tumble:
        mid = (math.floor(t / SEGMENT_S + 1e-9) + 0.5) * SEGMENT_S
        factor = 1.0 if weather is None else weather.factor(mid, float(hp))
        scale = params.area_scale(mid)
    prop = bh.NumericalOrbitPropagator(_epochs(t)[0], np.asarray(state, float), _config(),
                                       _force(bool(hp < DRAG_PERIGEE_KM)), params.vector(factor, scale))
    prop.set_trajectory_mode(bh.TrajectoryMode.DISABLED)
    return prop


def rtn_to_gcrf(state: np.ndarray, dv_rtn: np.ndarray) -> np.ndarray:
    """A vector on the radial, along-track, cross-track axes of GCRF ``state`` (m, m/s), in GCRF."""
    r, v = state[:3], state[3:]
    radial = r / np.linalg.norm(r)
    cross = np.cross(r, v) / np.linalg.norm(np.cross(r, v))
    return np.asarray(dv_rtn, float) @ np.array([radial, np.cross(cross, radial), cross])


def _burn(props: list, alive: np.ndarray, params: list[BodyParams], burns, t_lo: float, t_hi: float,
          record: list, weather=None) -> None:
    """Apply the burns (row, unix time, delta-v RTN m/s) timed in (t_lo, t_hi]: the body is taken to the
    burn's time, its velocity changed, and its integration restarted from there; (row, time, GCRF state
    before, after) goes to ``record``."""
    where = {int(row): j for j, row in enumerate(alive)}
    for row, t_burn, dv in burns:
        if t_lo < t_burn <= t_hi and int(row) in where:
            j = where[int(row)]
            props[j].propagate_to(_epochs(t_burn)[0])
            before = np.array(props[j].current_state(), float)
            state = before.copy()
            state[3:] += rtn_to_gcrf(state, dv)
            props[j] = _propagator(state, t_burn, params[int(row)], weather)
            record.append((int(row), float(t_burn), before, state))


def _advance(props: list, t: float) -> set[int]:
    """Every propagator to ``t`` (brahe's thread pool); the indices of those that failed."""
    bh = _brahe()
    try:
        bh.par_propagate_to(props, _epochs(t)[0])
        return set()
    except Exception:  # one body's failure stops the batch: find it, go on with the others
        failed = set()
        for j, prop in enumerate(props):
            try:
                prop.propagate_to(_epochs(t)[0])
            except Exception:
                failed.add(j)
        return failed


def _new_segment(props: list, alive: np.ndarray, params: list[BodyParams], t: float, weather) -> set[int]:
    """At a segment boundary ``t``: the bodies whose drag or area varies (the sky's weather, a tumble) taken
    there and restarted with the next segment's; the indices that failed on the way."""
    varying = [j for j, row in enumerate(alive) if weather is not None or params[int(row)].tumble]
    if not varying:
        return set()
    failed = _advance(props, t)
    for j in varying:
        if j not in failed:
            props[j] = _propagator(np.array(props[j].current_state(), float), t, params[int(alive[j])], weather)
    return failed


def _perigee_km(states: np.ndarray) -> np.ndarray:
    """Osculating perigee altitude (km) of GCRF states [n, 6] (m, m/s)."""
    r, v = states[:, :3] / 1000.0, states[:, 3:] / 1000.0
    rn = np.linalg.norm(r, axis=1)
    energy = np.sum(v * v, axis=1) / 2.0 - frames.MU_KM3_S2 / rn
    a = -frames.MU_KM3_S2 / (2.0 * energy)
    h = np.linalg.norm(np.cross(r, v), axis=1)
    e = np.sqrt(np.maximum(0.0, 1.0 - h * h / (frames.MU_KM3_S2 * a)))
    return a * (1.0 - e) - frames.R_EARTH_KM


def integrate(initial_gcrf: np.ndarray, t0: float, steps: int, params: list[BodyParams],
              step: float = STEP_S, burns=(), record: list | None = None, weather=None) -> np.ndarray:
    """GCRF states [n, steps + 1, 6] (m, m/s) on the grid ``t0 + k * step`` from ``initial_gcrf`` [n, 6] at
    ``t0``, all bodies in parallel (brahe's thread pool). A body that re-enters, or that the integrator
    cannot carry on, is NaN from the first grid time it fails at. ``burns``: impulsive manoeuvres as
    (row, unix time, delta-v on the body's radial / along-track / cross-track axes in m/s); each applied
    one goes to ``record`` as (row, time, GCRF state before, after). ``weather`` (:class:`sda.sim.weather.Weather`,
    the harsher skies) and tumbling bodies: drag and area constant over each segment of
    :data:`sda.sim.weather.SEGMENT_S` (boundaries on multiples of it), the integration restarted at each."""
    record = [] if record is None else record
    n = len(initial_gcrf)
    out = np.full((n, steps + 1, 6), np.nan)
    out[:, 0] = initial_gcrf
    alive = np.flatnonzero(np.isfinite(initial_gcrf).all(axis=1)
                           & (np.linalg.norm(initial_gcrf[:, :3], axis=1) > DECAY_RADIUS_KM * 1000.0))
    props = [_propagator(initial_gcrf[i], t0, params[i], weather) for i in alive]
    burns = sorted(burns, key=lambda b: b[1])
    segments = weather is not None or any(p.tumble for p in params)
    for k in range(1, steps + 1):
        lo, hi = t0 + (k - 1) * step, t0 + k * step
        failed: set[int] = set()
        if segments:
            for boundary in SEGMENT_S * np.arange(math.floor(lo / SEGMENT_S) + 1, math.floor(hi / SEGMENT_S) + 1):
                if burns:
                    _burn(props, alive, params, burns, lo, float(boundary), record, weather)
                    lo = float(boundary)
                if boundary < hi:
                    failed |= _new_segment(props, alive, params, float(boundary), weather)
        if burns:
            _burn(props, alive, params, burns, lo, hi, record, weather)
        failed |= _advance(props, hi)
        if segments and hi % SEGMENT_S == 0.0:
            failed |= _new_segment(props, alive, params, hi, weather)
        states = np.array([p.current_state() for p in props]).reshape(-1, 6)
        ok = np.array([j not in failed for j in range(len(props))], dtype=bool)
        ok &= np.isfinite(states).all(axis=1) & (np.linalg.norm(states[:, :3], axis=1) > DECAY_RADIUS_KM * 1000.0)
        out[alive[ok], k] = states[ok]
        props = [p for p, good in zip(props, ok) if good]
        alive = alive[ok]
        if not props:
            break
    return out


def match_mean_motion(initial_gcrf: np.ndarray, t0: float, reference_teme_km: np.ndarray, times: np.ndarray,
                      rel_tol: float = 1e-8, abs_tol: float = 1e-3) -> np.ndarray:
    """``initial_gcrf`` [n, 6] with each velocity scaled so that the body's trajectory follows the reference
    positions ``reference_teme_km`` [n, k, 3] at ``times`` [k] (an element set's SGP4 trajectory) without
    drifting along-track: the least-squares scale, from one integration of :func:`_fit_force`'s model
    and the scale's effect by Clohessy-Wiltshire (a velocity scaled by 1 + e moves the body by
    ``a e (2 (1 - cos nt), 4 sin nt - 3 nt, 0)`` on its radial, along-track, cross-track axes).

    An element set's osculating state at one instant, integrated, has another mean motion than the set's
    own: its along-track error would grow by some 200 m an hour in LEO from that alone, several times
    a real element set's. Matching the mean motion over the arc leaves the differences of the dynamics."""
    bh = _brahe()
    states = np.asarray(initial_gcrf, float).reshape(-1, 6)
    ok = np.flatnonzero(np.isfinite(states).all(axis=1) & np.isfinite(reference_teme_km).all(axis=(1, 2)))
    if ok.size == 0:
        return states
    epoch = _epochs(t0)[0]
    config = (bh.NumericalPropagationConfig.with_method(bh.IntegrationMethod.RKF78)
              .with_rel_tol(rel_tol).with_abs_tol(abs_tol))
    props = [bh.NumericalOrbitPropagator(epoch, st, config, _fit_force(), None) for st in states[ok]]
    for p in props:
        p.set_trajectory_mode(bh.TrajectoryMode.DISABLED)
    track = []
    for t in times:
        bh.par_propagate_to(props, _epochs(t)[0])
        track.append(np.array([p.current_state() for p in props]))
    nominal = np.stack(track, axis=1) / 1000.0  # [m, k, 6] GCRF km, km/s
    rot = np.asarray(_brahe().rotation_gcrf_to_itrf(_epochs(times))).reshape(-1, 3, 3)
    ref_itrf, _ = frames.teme_to_ecef(reference_teme_km[ok], np.zeros_like(reference_teme_km[ok]), times[None, :])
    ref = np.einsum("kji,nkj->nki", rot, ref_itrf)  # ITRF -> GCRF: rot^T
    r0, v0 = states[ok, :3] / 1000.0, states[ok, 3:] / 1000.0
    a = 1.0 / (2.0 / np.linalg.norm(r0, axis=1) - np.sum(v0 * v0, axis=1) / frames.MU_KM3_S2)
    nt = np.sqrt(frames.MU_KM3_S2 / a**3)[:, None] * (np.asarray(times, float) - t0)[None, :]
    shift = a[:, None, None] * np.stack([2.0 * (1.0 - np.cos(nt)), 4.0 * np.sin(nt) - 3.0 * nt, 0.0 * nt], axis=-1)
    r, v = nominal[..., :3], nominal[..., 3:]
    radial = r / np.linalg.norm(r, axis=-1, keepdims=True)
    cross = np.cross(r, v)
    cross /= np.linalg.norm(cross, axis=-1, keepdims=True)
    jac = shift[..., :1] * radial + shift[..., 1:2] * np.cross(cross, radial)
    scale = np.sum(jac * (ref - r), axis=(1, 2)) / np.maximum(np.sum(jac * jac, axis=(1, 2)), 1e-30)
    out = states.copy()
    out[ok, 3:] *= (1.0 + scale)[:, None]
    return out


def propagate(norad, initial_gcrf: np.ndarray, t0: float, t_end: float, params: list[BodyParams],
              step: float = STEP_S, burns=(), weather=None) -> tuple[Ephemeris, np.ndarray]:
    """The true ephemeris of bodies ``norad`` from GCRF states at ``t0`` to at least ``t_end`` (the grid
    runs :data:`LAGRANGE_POINTS` / 2 steps past it, so interpolation there is centred), and the last grid
    states in GCRF (what :func:`extend` continues from)."""
    steps = int(math.ceil((t_end - t0) / step - 1e-9)) + LAGRANGE_POINTS // 2
    record: list = []
    gcrf = integrate(np.asarray(initial_gcrf, float).reshape(-1, 6), t0, steps, params, step, burns, record, weather)
    times = t0 + step * np.arange(steps + 1)
    r, v = gcrf_to_teme(gcrf, times)
    teme_burns = []
    for row, t_burn, before, after in record:
        rb, vb = gcrf_to_teme(np.array([before, after])[:, None, :], np.array([t_burn]))
        teme_burns.append((row, t_burn, np.r_[rb[0, 0], vb[0, 0]], np.r_[rb[1, 0], vb[1, 0]]))
    eph = Ephemeris(np.asarray(norad, dtype=np.int64), float(t0), float(step), np.concatenate([r, v], -1), teme_burns)
    return eph, gcrf[:, -1]


def extend(eph: Ephemeris, last_gcrf: np.ndarray, params: list[BodyParams],
           t_end: float, weather=None) -> tuple[Ephemeris, np.ndarray]:
    """``eph`` continued from its last grid states ``last_gcrf`` [n, 6] (GCRF, m, m/s) to cover ``t_end``."""
    if t_end <= eph.t_end - (LAGRANGE_POINTS // 2) * eph.step:
        return eph, last_gcrf
    more, last = propagate(eph.norad, last_gcrf, eph.t_end, t_end, params, eph.step, weather=weather)
    states = np.concatenate([eph.states, more.states[:, 1:]], axis=1)
    return Ephemeris(eph.norad, eph.t0, eph.step, states, list(eph.burns)), last
