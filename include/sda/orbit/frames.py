"""Frames, time and vectorised SGP4: the orbital maths shared by the simulator and the jobs.

Frame chain (stated once, used everywhere), following Vallado et al., "Revisiting Spacetrack
Report #3" (AIAA 2006-6753), ``teme2ecef``/``ecef2teme``:

* SGP4 outputs position/velocity in **TEME** (true equator, mean equinox of date), km and km/s.
* TEME -> **PEF** (pseudo-Earth-fixed) is one rotation about z by the Greenwich mean sidereal time
  GMST(UT1) (IAU-82, Vallado's ``gstime``); velocity gets Earth's rotation removed
  (v_pef = R3(GMST) v_teme - omega x r_pef, omega = 7.292115146706979e-5 rad/s, LOD neglected).
* PEF -> **ITRF** (ECEF) is the polar-motion matrix W = R1(-yp) R2(-xp) (IERS/SOFA ``pom00`` with
  s' = 0, as Vallado and astropy do), applied to position and velocity alike.
* Earth orientation enters only through :class:`Eop` (UT1-UTC, xp, yp): pass ``eop=`` to
  :func:`gmst`, :func:`teme_to_ecef`, :func:`ecef_to_teme`, :func:`site_teme` and :func:`radec`
  (daily values from CelesTrak's EOP file via :mod:`sda.orbit.eop`). With EOP the chain agrees with
  astropy (erfa ``gmst82`` + ``pom00``) to millimetres (tests/include/orbit/test_frames_library.py).
* With ``eop=None`` (the default, used by the simulator and the jobs) UT1 is taken = UTC and polar
  motion is neglected, so "ECEF" is PEF at UTC. The position error is then a rotation about z by
  omega * (UT1-UTC), i.e. 0.0729 m per km of distance from the spin axis per second of UT1-UTC
  (|UT1-UTC| < 0.9 s by the leap-second rule: up to 0.44 km at 400 km altitude, 0.55 km at
  2000 km, 2.8 km at GEO), plus polar motion |(xp, yp)| * r, 4.85 mm per km per arcsec
  (|(xp, yp)| <= 0.6" in the IERS record since 1973: up to 19 m at the ground, 0.12 km at GEO).
  Velocities turn by the same angle: omega * |UT1-UTC| * |v_ecef|, up to 0.6 m/s in LEO. The
  simulator and the correlator use the same chain, so both cancel in the pipeline's simulated
  residuals; they matter for real sensor data and outside ITRF/ECEF products (pass ``eop``).
  tests/include/orbit/test_frames_library.py checks these numbers against astropy and IERS data.
* Ground sites are WGS-84 geodetic (latitude, longitude, height) -> ITRF (ECEF).
* Radar measurements (azimuth from north through east, elevation, range, range-rate) are topocentric
  in the site's geodetic east-north-up frame, computed in ECEF (no refraction, no light time).
* Optical right ascension / declination are **topocentric in TEME** (site position rotated into TEME).
* ISL state vectors are in TEME, metres and m/s.

All functions take and return numpy arrays (broadcasting over leading axes) in SI-compatible units:
km for positions (SGP4's unit), radians for angles, unix seconds (UTC) for time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MU_KM3_S2 = 398600.4418
R_EARTH_KM = 6378.137  # WGS-84 equatorial radius
WGS84_F = 1.0 / 298.257223563
OMEGA_EARTH = 7.292115146706979e-5  # rad/s
C_KM_S = 299_792.458  # the speed of light
UNIX_EPOCH_JD = 2440587.5
SGP4_EPOCH_JD = 2433281.5  # 1949-12-31 00:00 UT, sgp4init's epoch origin
AU_KM = 149597870.7
ARCSEC_RAD = np.pi / (180.0 * 3600.0)


@dataclass(frozen=True)
class Eop:
    """Earth-orientation parameters at an instant: UT1-UTC (s) and the pole coordinates xp, yp
    (arcsec), as published by the IERS (Bulletin A/B, C04) and CelesTrak's EOP files.

    Fields may be floats or numpy arrays broadcasting against the times they are used with (one
    value per time); :meth:`sda.orbit.eop.EopTable.at` builds them from a table.
    """

    dut1_s: float | np.ndarray = 0.0
    xp_arcsec: float | np.ndarray = 0.0
    yp_arcsec: float | np.ndarray = 0.0


# --- time -----------------------------------------------------------------------------------------

def unix_to_jd(unix_s: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Unix seconds -> (whole Julian day at midnight .5, fraction) as SGP4 wants them, keeping precision."""
    unix_s = np.asarray(unix_s, dtype=float)
    days = unix_s / 86400.0
    whole = np.floor(days)
    jd = UNIX_EPOCH_JD + whole
    fr = days - whole
    return jd, fr


def gmst(unix_s: np.ndarray | float, eop: Eop | None = None) -> np.ndarray:
    """Greenwich mean sidereal time (IAU-82, radians) at UTC unix seconds.

    UT1 = UTC + ``eop.dut1_s``; with ``eop=None`` UT1 is taken = UTC (off by up to 0.9 s of rotation).
    """
    if eop is not None:
        unix_s = np.asarray(unix_s, dtype=float) + np.asarray(eop.dut1_s, dtype=float)
    jd, fr = unix_to_jd(unix_s)
    tut1 = ((jd - 2451545.0) + fr) / 36525.0
    seconds = (
        -6.2e-6 * tut1**3
        + 0.093104 * tut1**2
        + (876600.0 * 3600.0 + 8640184.812866) * tut1
        + 67310.54841
    )
    return np.mod(np.deg2rad(seconds / 240.0), 2.0 * np.pi)


# --- rotations ------------------------------------------------------------------------------------

def _rot_z(vec: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rotate the frame (not the vector) by ``angle`` about z: R3(angle) @ vec, over the last axis."""
    c, s = np.cos(angle), np.sin(angle)
    x, y, z = vec[..., 0], vec[..., 1], vec[..., 2]
    return np.stack([c * x + s * y, -s * x + c * y, z], axis=-1)


def _polar_motion(vec: np.ndarray, eop: Eop, inverse: bool = False) -> np.ndarray:
    """PEF -> ITRF, ``W @ vec`` with W = R1(-yp) R2(-xp) (SOFA ``pom00``, s' = 0), over the last
    axis; ``inverse=True`` applies W^T (ITRF -> PEF)."""
    xp = np.asarray(eop.xp_arcsec, dtype=float) * ARCSEC_RAD
    yp = np.asarray(eop.yp_arcsec, dtype=float) * ARCSEC_RAD
    cx, sx, cy, sy = np.cos(xp), np.sin(xp), np.cos(yp), np.sin(yp)
    x, y, z = vec[..., 0], vec[..., 1], vec[..., 2]
    if not inverse:
        out = [cx * x + sx * z, sx * sy * x + cy * y - sy * cx * z, -sx * cy * x + sy * y + cx * cy * z]
    else:
        out = [cx * x + sx * sy * y - sx * cy * z, cy * y + sy * z, sx * x - cx * sy * y + cx * cy * z]
    return np.stack(np.broadcast_arrays(*out), axis=-1)


def teme_to_ecef(
    r_teme: np.ndarray, v_teme: np.ndarray, unix_s, eop: Eop | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """TEME (km, km/s) -> ECEF (km, km/s).

    With ``eop`` the result is ITRF (GMST at UT1, then polar motion); with ``eop=None`` it is PEF at
    UT1 = UTC (see the module docstring for the size of that approximation).
    """
    theta = np.asarray(gmst(unix_s, eop))
    r = _rot_z(np.asarray(r_teme, float), theta)
    v = _rot_z(np.asarray(v_teme, float), theta)
    omega_cross_r = np.stack([-OMEGA_EARTH * r[..., 1], OMEGA_EARTH * r[..., 0], np.zeros_like(r[..., 2])], axis=-1)
    if eop is None:
        return r, v - omega_cross_r
    return _polar_motion(r, eop), _polar_motion(v - omega_cross_r, eop)


def ecef_to_teme(
    r_ecef: np.ndarray, v_ecef: np.ndarray, unix_s, eop: Eop | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """ECEF (km, km/s) -> TEME (km, km/s); the inverse of :func:`teme_to_ecef` (same ``eop``)."""
    theta = np.asarray(gmst(unix_s, eop))
    r_ecef = np.asarray(r_ecef, float)
    if eop is not None:
        r_ecef = _polar_motion(r_ecef, eop, inverse=True)
        v_ecef = _polar_motion(np.asarray(v_ecef, float), eop, inverse=True)
    omega_cross_r = np.stack(
        [-OMEGA_EARTH * r_ecef[..., 1], OMEGA_EARTH * r_ecef[..., 0], np.zeros_like(r_ecef[..., 2])], axis=-1
    )
    return _rot_z(r_ecef, -theta), _rot_z(np.asarray(v_ecef, float) + omega_cross_r, -theta)


def geodetic_to_ecef(lat_deg, lon_deg, alt_m) -> np.ndarray:
    """WGS-84 geodetic -> ECEF, km."""
    lat, lon = np.deg2rad(np.asarray(lat_deg, float)), np.deg2rad(np.asarray(lon_deg, float))
    alt_km = np.asarray(alt_m, float) / 1000.0
    e2 = WGS84_F * (2.0 - WGS84_F)
    n = R_EARTH_KM / np.sqrt(1.0 - e2 * np.sin(lat) ** 2)
    return np.stack(
        [
            (n + alt_km) * np.cos(lat) * np.cos(lon),
            (n + alt_km) * np.cos(lat) * np.sin(lon),
            (n * (1.0 - e2) + alt_km) * np.sin(lat),
        ],
        axis=-1,
    )


def site_teme(lat_deg, lon_deg, alt_m, unix_s, eop: Eop | None = None) -> np.ndarray:
    """A ground site's position in TEME (km) at the given times (``eop`` as for :func:`ecef_to_teme`)."""
    site = geodetic_to_ecef(lat_deg, lon_deg, alt_m)
    theta = np.asarray(gmst(unix_s, eop))
    if eop is not None:
        site = _polar_motion(site, eop, inverse=True)
    return _rot_z(np.broadcast_to(site, np.broadcast_shapes(site.shape, theta.shape + (3,))), -theta)


# --- measurements ---------------------------------------------------------------------------------

def enu_basis(lat_deg, lon_deg) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lat, lon = np.deg2rad(np.asarray(lat_deg, float)), np.deg2rad(np.asarray(lon_deg, float))
    east = np.stack([-np.sin(lon), np.cos(lon), np.zeros_like(lon)], axis=-1)
    north = np.stack([-np.sin(lat) * np.cos(lon), -np.sin(lat) * np.sin(lon), np.cos(lat)], axis=-1)
    up = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)
    return east, north, up


def razel(r_ecef, v_ecef, lat_deg, lon_deg, alt_m) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Range (km), azimuth (rad, from north through east, [0, 2pi)), elevation (rad) and range-rate
    (km/s) of an object at ``r_ecef``/``v_ecef`` seen from a WGS-84 site."""
    rho = np.asarray(r_ecef, float) - geodetic_to_ecef(lat_deg, lon_deg, alt_m)
    east, north, up = enu_basis(lat_deg, lon_deg)
    e, n, u = (np.sum(rho * b, axis=-1) for b in (east, north, up))
    rng = np.linalg.norm(rho, axis=-1)
    az = np.mod(np.arctan2(e, n), 2.0 * np.pi)
    el = np.arcsin(np.clip(u / rng, -1.0, 1.0))
    rr = np.sum(rho * np.asarray(v_ecef, float), axis=-1) / rng
    return rng, az, el, rr


def razel_to_ecef(rng_km, az_rad, el_rad, lat_deg, lon_deg, alt_m) -> np.ndarray:
    """Inverse of :func:`razel` for position: the ECEF point (km) at range/azimuth/elevation from a site."""
    east, north, up = enu_basis(lat_deg, lon_deg)
    rng, az, el = (np.asarray(a, float)[..., None] for a in (rng_km, az_rad, el_rad))
    los = np.cos(el) * np.sin(az) * east + np.cos(el) * np.cos(az) * north + np.sin(el) * up
    return geodetic_to_ecef(lat_deg, lon_deg, alt_m) + rng * los


def radec(r_teme, lat_deg, lon_deg, alt_m, unix_s, eop: Eop | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Topocentric right ascension [0, 2pi) and declination (rad), in TEME, of an object seen from a site
    (``eop`` places the site as in :func:`site_teme`)."""
    rho = np.asarray(r_teme, float) - site_teme(lat_deg, lon_deg, alt_m, unix_s, eop)
    ra = np.mod(np.arctan2(rho[..., 1], rho[..., 0]), 2.0 * np.pi)
    dec = np.arcsin(np.clip(rho[..., 2] / np.linalg.norm(rho, axis=-1), -1.0, 1.0))
    return ra, dec


def light_time_position(r_km, v_kms, site_km, mu: float = MU_KM3_S2) -> np.ndarray:
    """Where an object at ``r_km`` moving at ``v_kms`` (now, quasi-inertial: TEME) was one light time (to
    ``site_km``, the observer now) ago: ``r - v tau + a tau^2 / 2`` (``a`` the two-body acceleration) with
    ``tau = |that - site| / c``, by fixed-point steps; the neglected third-order term is under a micrometre for
    any Earth orbit seen from the ground. What a radar's range and angles and a telescope's astrometric angles
    point at (:mod:`sda.orbit.estimation.measurements`)."""
    r, v, site = (np.asarray(a, float) for a in (r_km, v_kms, site_km))
    acc = -mu * r / np.linalg.norm(r, axis=-1, keepdims=True) ** 3
    tau = np.linalg.norm(r - site, axis=-1, keepdims=True) / C_KM_S
    for _ in range(3):
        tau = np.linalg.norm(r - v * tau + 0.5 * acc * tau**2 - site, axis=-1, keepdims=True) / C_KM_S
    return r - v * tau + 0.5 * acc * tau**2


def unit_vector_radec(ra_rad, dec_rad) -> np.ndarray:
    ra, dec = np.asarray(ra_rad, float), np.asarray(dec_rad, float)
    return np.stack([np.cos(dec) * np.cos(ra), np.cos(dec) * np.sin(ra), np.sin(dec)], axis=-1)


def angle_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle (rad) between vectors over the last axis, accurate for small angles."""
    cross = np.linalg.norm(np.cross(a, b), axis=-1)
    dot = np.sum(a * b, axis=-1)
    return np.arctan2(cross, dot)


# --- sun and shadow -------------------------------------------------------------------------------

def sun_direction(unix_s) -> np.ndarray:
    """Unit vector to the Sun in the mean equator/equinox of date (~TEME to < 0.01 deg), from the
    Astronomical Almanac's low-precision formulae (0.01 deg over 1950-2050)."""
    jd, fr = unix_to_jd(unix_s)
    n = (jd - 2451545.0) + fr
    mean_lon = np.deg2rad(np.mod(280.460 + 0.9856474 * n, 360.0))
    g = np.deg2rad(np.mod(357.528 + 0.9856003 * n, 360.0))
    ecl_lon = mean_lon + np.deg2rad(1.915) * np.sin(g) + np.deg2rad(0.020) * np.sin(2 * g)
    eps = np.deg2rad(23.439 - 0.0000004 * n)
    return np.stack([np.cos(ecl_lon), np.cos(eps) * np.sin(ecl_lon), np.sin(eps) * np.sin(ecl_lon)], axis=-1)


def sun_elevation(lat_deg, lon_deg, alt_m, unix_s) -> np.ndarray:
    """Elevation of the Sun (rad) at a ground site."""
    sun_teme = sun_direction(unix_s) * AU_KM
    sun_ecef, _ = teme_to_ecef(sun_teme, np.zeros_like(sun_teme), unix_s)
    _, _, el, _ = razel(sun_ecef, np.zeros_like(sun_ecef), lat_deg, lon_deg, alt_m)
    return el


def in_earth_shadow(r_teme, unix_s) -> np.ndarray:
    """True where an object is inside Earth's cylindrical shadow."""
    s = sun_direction(unix_s)
    r = np.asarray(r_teme, float)
    along = np.sum(r * s, axis=-1)
    perp = np.linalg.norm(r - along[..., None] * s, axis=-1)
    return (along < 0) & (perp < R_EARTH_KM)


# --- propagation ----------------------------------------------------------------------------------

def propagate(satrecs, unix_s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Propagate many satellites to many times with ``SatrecArray``.

    ``satrecs`` is a sequence of ``sgp4.api.Satrec``; ``unix_s`` a 1-D array of times shared by all
    (or a 2-D array, one row of times per satellite, then each satellite is evaluated at its own
    times). Returns (error codes [n, t], r [n, t, 3] km, v [n, t, 3] km/s) in TEME. Non-zero error
    codes are SGP4's own (decayed, eccentricity out of range, ...): those rows are NaN.
    """
    from sgp4.api import SatrecArray

    times = np.asarray(unix_s, dtype=float)
    if times.ndim == 1:
        jd, fr = unix_to_jd(times)
        err, r, v = SatrecArray(list(satrecs)).sgp4(jd, fr)
    else:
        err = np.empty(times.shape, dtype=np.uint8)
        r = np.empty(times.shape + (3,))
        v = np.empty(times.shape + (3,))
        for i, sat in enumerate(satrecs):
            jd, fr = unix_to_jd(times[i])
            e, ri, vi = SatrecArray([sat]).sgp4(jd, fr)
            err[i], r[i], v[i] = e[0], ri[0], vi[0]
    bad = err != 0
    r[bad] = np.nan
    v[bad] = np.nan
    return err, r, v


def propagate_pairs(satrecs, index, unix_s) -> tuple[np.ndarray, np.ndarray]:
    """Satellite ``satrecs[index[p]]`` at time ``unix_s[p]``, for each pair ``p``: (r [p, 3] km,
    v [p, 3] km/s) in TEME, NaN where SGP4 fails. Each satellite is evaluated at its own times only
    (``Satrec.sgp4_array``), not at every pair's time as ``propagate``'s grid would."""
    index = np.asarray(index, dtype=np.int64)
    jd, fr = unix_to_jd(unix_s)
    r, v = np.full((len(index), 3), np.nan), np.full((len(index), 3), np.nan)
    order = np.argsort(index, kind="stable")
    objects, starts = np.unique(index[order], return_index=True)
    for k, rows in zip(objects, np.split(order, starts[1:])):
        err, rk, vk = satrecs[k].sgp4_array(jd[rows], fr[rows])
        ok = err == 0
        r[rows[ok]], v[rows[ok]] = rk[ok], vk[ok]
    return r, v


def perigee_apogee_km(satrec) -> tuple[float, float]:
    """Perigee and apogee altitude (km above the equatorial radius) from the mean elements."""
    a = satrec.a * satrec.radiusearthkm  # a is in Earth radii
    return a * (1.0 - satrec.ecco) - satrec.radiusearthkm, a * (1.0 + satrec.ecco) - satrec.radiusearthkm
