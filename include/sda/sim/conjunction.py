"""The injected conjunction: two objects designed to pass ``miss_m`` apart at a given TCA.

:func:`design_true_conjunction` designs it on the simulator's *true* (numerical) trajectories
(:mod:`sda.sim.dynamics`): the true miss is the one asked for, and the catalogue's element sets of the
pair, fitted to the true states at the run's start, see it only through SGP4's own error by the TCA.
:func:`design_conjunction` is the geometry alone, on SGP4 orbits."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
from sgp4.api import WGS72, Satrec

from sda.orbit import frames
from sda.orbit.catalog import synthetic
from sda.sim.common import MU, iso_ms, iso_utc

PRIMARY_ID, SECONDARY_ID = 99901, 99902


def rv_to_elements(r, v, mu: float = MU) -> dict:
    """Osculating Keplerian elements (degrees) from a position/velocity (km, km/s)."""
    r, v = np.asarray(r, float), np.asarray(v, float)
    rn, vn2 = np.linalg.norm(r), float(v @ v)
    h = np.cross(r, v)
    hn = np.linalg.norm(h)
    h_hat = h / hn
    node = np.cross([0.0, 0.0, 1.0], h)
    node_hat = node / np.linalg.norm(node)
    e_vec = ((vn2 - mu / rn) * r - (r @ v) * v) / mu
    ecc = float(np.linalg.norm(e_vec))
    a = 1.0 / (2.0 / rn - vn2 / mu)
    incl = math.acos(max(-1.0, min(1.0, h_hat[2])))
    raan = math.atan2(node_hat[1], node_hat[0])
    u = math.atan2(np.cross(node_hat, r) @ h_hat, node_hat @ r)  # argument of latitude
    argp = math.atan2(np.cross(node_hat, e_vec) @ h_hat, node_hat @ e_vec) if ecc > 1e-12 else 0.0
    nu = u - argp
    ecc_anom = 2.0 * math.atan2(math.sqrt(1.0 - ecc) * math.sin(nu / 2.0), math.sqrt(1.0 + ecc) * math.cos(nu / 2.0))
    mean_anom = ecc_anom - ecc * math.sin(ecc_anom)
    return dict(a_km=a, ecc=ecc, incl_deg=math.degrees(incl), raan_deg=math.degrees(raan) % 360.0,
                argp_deg=math.degrees(argp) % 360.0, mean_anom_deg=math.degrees(mean_anom) % 360.0)


def _roundtrip(sat: Satrec) -> tuple[Satrec, str, str]:
    line1, line2 = synthetic.tle_lines(sat)
    return Satrec.twoline2rv(line1, line2, WGS72), line1, line2


def _sgp4_at(sat: Satrec, unix_s: float) -> tuple[np.ndarray, np.ndarray]:
    jd, fr = frames.unix_to_jd(unix_s)
    err, r, v = sat.sgp4(float(jd), float(fr))
    if err:
        raise RuntimeError(f"SGP4 error {err} for object {sat.satnum}")
    return np.array(r), np.array(v)


def closest_approach(sat1: Satrec, sat2: Satrec, around_unix: float,
                     half_window_s: float = 60.0) -> tuple[float, float]:
    """(unix time, distance m) of the closest approach near ``around_unix``: 10 ms scan, then golden section."""
    ts = around_unix + np.arange(-half_window_s, half_window_s + 1e-9, 0.01)
    _, r, _ = frames.propagate([sat1, sat2], ts)
    d = np.linalg.norm(r[0] - r[1], axis=-1)
    i = int(np.nanargmin(d))
    lo, hi = ts[max(i - 1, 0)], ts[min(i + 1, len(ts) - 1)]

    def dist(t):
        return float(np.linalg.norm(_sgp4_at(sat1, t)[0] - _sgp4_at(sat2, t)[0]))

    g = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(40):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if dist(a) < dist(b):
            hi = b
        else:
            lo = a
    t = (lo + hi) / 2.0
    return t, dist(t) * 1000.0


def design_conjunction(tca: dt.datetime, miss_m: float, seed: int) -> dict:
    """Two objects whose SGP4 positions at ``tca`` are ``miss_m`` apart (radially) on crossing orbits.

    The primary is a circular 780 km, 98.5 deg orbit with epoch = TCA. The secondary's wanted state
    at TCA is the primary's position plus ``miss_m`` along the radial direction, with the primary's
    velocity turned about that radial by ~80-100 deg (so the relative velocity is perpendicular to the
    miss vector: TCA is at TCA). Its elements come from that state (osculating -> used as mean), and the
    input state is corrected by the SGP4 error at TCA until the error is below 1 m; every iteration
    goes through the exported TLE so what lands in the catalogue is what was designed.
    """
    rng = np.random.default_rng([seed, 2])
    tca_unix = tca.timestamp()
    epoch_jd = frames.UNIX_EPOCH_JD + tca_unix / 86400.0
    prim = synthetic.make_satrec(
        PRIMARY_ID, epoch_jd, a_km=synthetic.RE_WGS72 + 780.0, ecc=1.0e-4, incl_deg=98.5,
        raan_deg=float(rng.uniform(0, 360)), argp_deg=90.0, mean_anom_deg=float(rng.uniform(-60, 60)),
        bstar=5.0e-5, intldesg="99001A",
    )
    prim, p1, p2 = _roundtrip(prim)
    r1, v1 = _sgp4_at(prim, tca_unix)
    up = r1 / np.linalg.norm(r1)
    angle = math.radians(float(rng.uniform(80.0, 100.0)) * (1 if rng.random() < 0.5 else -1))
    # Rodrigues rotation of v1 about the radial unit vector
    v2_target = v1 * math.cos(angle) + np.cross(up, v1) * math.sin(angle) + up * (up @ v1) * (1 - math.cos(angle))
    r2_target = r1 + up * miss_m / 1000.0
    sec, s1, s2, err_m = fit_element_set(SECONDARY_ID, tca_unix, r2_target, v2_target, "99001B", tol_km=1.0e-3)
    t_ca, achieved = closest_approach(prim, sec, tca_unix)
    rel_speed = float(np.linalg.norm(_sgp4_at(prim, t_ca)[1] - _sgp4_at(sec, t_ca)[1]) * 1000.0)
    return {
        "primary": PRIMARY_ID, "secondary": SECONDARY_ID, "tca": iso_utc(tca), "designed_miss_m": miss_m,
        "state_error_m": round(err_m, 3), "achieved_tca": iso_ms(int(round(t_ca * 1000))),
        "achieved_miss_m": round(achieved, 3), "rel_speed_ms": round(rel_speed, 1),
        "tle": [("CONJ-PRIMARY", p1, p2), ("CONJ-SECONDARY", s1, s2)],
        "satrecs": (prim, sec),
        "designed_teme": np.array([np.r_[r1, v1], np.r_[r2_target, v2_target]]),  # [2, 6] km, km/s at the TCA
    }


def fit_element_set(norad: int, epoch_unix: float, r_km, v_kms, intldesg: str, bstar: float = 5.0e-5,
                    tol_km: float = 1.0e-6) -> tuple[Satrec, str, str, float]:
    """An element set with epoch ``epoch_unix`` whose SGP4 state at its epoch is (``r_km``, ``v_kms``) in
    TEME: osculating elements, the input corrected by SGP4's own error until it is below ``tol_km`` (through
    the exported TLE, so what the catalogue holds is what was fitted). Returns (Satrec, line 1, line 2,
    the remaining position error in m)."""
    epoch_jd = frames.UNIX_EPOCH_JD + epoch_unix / 86400.0
    r_target, v_target = np.asarray(r_km, float), np.asarray(v_kms, float)
    r_in, v_in = r_target.copy(), v_target.copy()
    best = None
    for _ in range(40):
        sat = synthetic.make_satrec(norad, epoch_jd, bstar=bstar, intldesg=intldesg, **rv_to_elements(r_in, v_in))
        sat, line1, line2 = _roundtrip(sat)
        r, v = _sgp4_at(sat, epoch_unix)
        dr, dv = r - r_target, v - v_target
        err = float(np.linalg.norm(dr))
        if best is None or err < best[0]:
            best = (err, sat, line1, line2)
        if err < tol_km:
            break
        r_in, v_in = r_in - dr, v_in - dv
    err, sat, line1, line2 = best
    return sat, line1, line2, err * 1000.0


def design_true_conjunction(start: dt.datetime, tca: dt.datetime, miss_m: float, seed: int, weather=None,
                            burn_h: float | None = None) -> dict:
    """The pair of :func:`design_conjunction` made true: its states at the TCA (``miss_m`` apart, the
    relative velocity across the miss) are integrated back to ``start`` with the simulator's force model
    and the pair's own parameters; the element sets written to the catalogue are fitted to those true
    states at ``start`` (fresh: epoch ``start``), their mean motion matched to the truth over the next
    three hours (:func:`match_mean_motion`), as an element set fitted over an arc would be. The achieved
    miss and TCA are the truth's own, found on the pair's true trajectories integrated forward from
    ``start`` on the truth's grid.

    With ``burn_h``, the primary reaches the TCA through an impulsive along-track burn of
    :data:`CONJUNCTION_BURN_MS` made ``burn_h`` hours before it: its state is integrated back to the burn, the
    burn taken out of its velocity (the along-track axis is the same before and after an in-plane burn, so this
    inverts it exactly), and on back to ``start``. The catalogue then holds the pre-burn orbit, which misses the
    secondary at the TCA by ``distance_at_tca_without_burn_m`` (that orbit integrated on); ``burn`` says when and
    how much (the simulator adds it to the truth's burns)."""
    from sda.sim import dynamics

    geometry = design_conjunction(tca, miss_m, seed)
    t0, t_ca = start.timestamp(), tca.timestamp()
    ids = (PRIMARY_ID, SECONDARY_ID)
    names = ("CONJ-PRIMARY", "CONJ-SECONDARY")
    params = dynamics.draw_params(ids, names, seed)
    # the designed states themselves, not the secondary's element set's (SGP4 meets them to within 1 m only)
    r, v = geometry["designed_teme"][:, None, :3], geometry["designed_teme"][:, None, 3:]
    gcrf_tca = dynamics.teme_to_gcrf(r[:, 0], v[:, 0], t_ca)
    gcrf0, burns = _back_to_start(gcrf_tca, t0, t_ca, params, burn_h)
    r0, v0 = dynamics.gcrf_to_teme(gcrf0[:, None, :], np.array([t0]))
    eph, _ = dynamics.propagate(ids, gcrf0, t0, max(t_ca + 60.0, t0 + MATCH_ARC_S), params, burns=burns,
                                weather=weather)
    tle, sats = [], []
    for k, (norad, name, intl) in enumerate(zip(ids, names, ("99001A", "99001B"))):
        sat, _, _, _ = fit_element_set(norad, t0, r0[k, 0], v0[k, 0], intl)
        sat, line1, line2 = match_mean_motion(sat, eph, k, t0)
        tle.append((name, line1, line2))
        sats.append(sat)
    if t_ca - 60.0 >= t0:
        t_best, miss, speed = _closest_on(eph, t_ca)
    else:  # an encounter before the run: the designed states at the TCA are the truth there
        t_best, miss, speed = t_ca, float(np.linalg.norm(r[0, 0] - r[1, 0]) * 1000.0), float(
            np.linalg.norm(v[0, 0] - v[1, 0]) * 1000.0)
    out = {
        "primary": PRIMARY_ID, "secondary": SECONDARY_ID, "tca": iso_utc(tca), "designed_miss_m": miss_m,
        "achieved_tca": iso_ms(int(round(t_best * 1000))), "achieved_miss_m": round(miss, 3),
        "rel_speed_ms": round(speed, 1), "truth": "numerical", "tle": tle, "satrecs": tuple(sats),
        "true_gcrf_start": gcrf0, "params": params,
    }
    if burns:
        _, t_burn, dv = burns[0]
        unburnt, _ = dynamics.propagate(ids, gcrf0, t0, t_ca + 60.0, params, weather=weather)
        _, r_unburnt, _ = unburnt.at(np.array([t_best]))
        apart_m = float(np.linalg.norm(r_unburnt[0, 0] - r_unburnt[1, 0])) * 1e3
        out["burn"] = {"norad_id": PRIMARY_ID, "t_unix": t_burn, "time": iso_ms(int(round(t_burn * 1000))),
                       "dv_rtn_ms": list(dv), "hours_before_tca": burn_h,
                       "distance_at_tca_without_burn_m": round(apart_m, 1)}
    return out


#: the along-track delta-v (m/s) of the burn through which the primary reaches the TCA (``burn_h``)
CONJUNCTION_BURN_MS = 1.0


def _back_to_start(gcrf_tca: np.ndarray, t0: float, t_ca: float, params, burn_h: float | None):
    """The pair's GCRF states at ``t0`` from theirs at the TCA, through the primary's burn (row 0) when
    ``burn_h`` is given; and the burns to integrate forward with (row, unix time, delta-v RTN m/s)."""
    from sda.sim import dynamics

    if burn_h is None:
        gcrf0 = gcrf_tca if t_ca == t0 else dynamics.integrate(gcrf_tca, t_ca, 1, params, step=t0 - t_ca)[:, 1]
        return gcrf0, []
    t_burn = t_ca - burn_h * 3600.0
    if not t0 < t_burn < t_ca:
        raise ValueError(f"--conjunction-burn-h {burn_h:g}: the burn must fall between --start and the TCA")
    dv = (0.0, CONJUNCTION_BURN_MS, 0.0)
    at_burn = dynamics.integrate(gcrf_tca, t_ca, 1, params, step=t_burn - t_ca)[:, 1]
    at_burn[0, 3:] -= dynamics.rtn_to_gcrf(at_burn[0], dv)
    return dynamics.integrate(at_burn, t_burn, 1, params, step=t0 - t_burn)[:, 1], [(0, t_burn, dv)]


MATCH_ARC_S = 3 * 3600.0


def match_mean_motion(sat: Satrec, eph, row: int, t0: float) -> tuple[Satrec, str, str]:
    """``sat`` with its mean motion scaled so that its SGP4 trajectory follows body ``row`` of the true
    ephemeris over the three hours from ``t0`` without drifting along-track (least squares, one finite
    difference): an element set fitted to one true state alone drifts from the truth by some 200 m an
    hour in LEO, where a real one, fitted over an arc, does not."""
    times = t0 + np.linspace(0.0, MATCH_ARC_S, 19)[1:]
    _, r_true, _ = eph.at(times)

    def scaled(factor: float) -> Satrec:
        out = Satrec()
        out.sgp4init(WGS72, "i", sat.satnum, sat.jdsatepoch + sat.jdsatepochF - frames.SGP4_EPOCH_JD, sat.bstar,
                     sat.ndot, sat.nddot, sat.ecco, sat.argpo, sat.inclo, sat.mo, sat.no_kozai * factor, sat.nodeo)
        out.intldesg = sat.intldesg
        return out

    eps = 1.0e-7
    _, r0, _ = frames.propagate([sat, scaled(1.0 + eps)], times)
    jac = (r0[1] - r0[0]) / eps
    step = float(np.sum(jac * (r_true[row] - r0[0])) / max(float(np.sum(jac * jac)), 1e-30))
    return _roundtrip(scaled(1.0 + step))


def _closest_on(eph, around_unix: float, half_window_s: float = 60.0) -> tuple[float, float, float]:
    """(time, distance m, relative speed m/s) of the two bodies' closest approach on ephemeris ``eph``."""
    ts = around_unix + np.arange(-half_window_s, half_window_s + 1e-9, 0.01)
    _, r, _ = eph.at(ts)
    i = int(np.nanargmin(np.linalg.norm(r[0] - r[1], axis=-1)))
    fine = ts[i] + np.arange(-0.01, 0.01 + 1e-9, 1e-5)
    _, r, v = eph.at(fine)
    d = np.linalg.norm(r[0] - r[1], axis=-1)
    j = int(np.nanargmin(d))
    return float(fine[j]), float(d[j] * 1000.0), float(np.linalg.norm(v[0, j] - v[1, j]) * 1000.0)
