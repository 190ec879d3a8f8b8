"""Offline catalogue generator: a synthetic but realistic TLE catalogue, deterministic for a seed.

:func:`generate_catalog` builds mean elements for a mix of shells, initialises each object with
``sgp4.api.Satrec.sgp4init`` (WGS-72, improved mode) and writes it with ``sgp4.exporter.export_tle``
as three-line element sets (name line, line 1, line 2)::

    STARLINK-SIM-0001
    1 70000U 26325A   26325.25000000  .00000000  00000-0  10000-3 0  9991
    2 70000  53.0512  12.0000 0001500  90.0000  15.3000 15.05000000    07

Shells (fractions of ``n_objects``, remainder to the LEO constellation):

=============  ========  ======================  ==================================================
shell          fraction  altitude                inclination
=============  ========  ======================  ==================================================
STARLINK-SIM   45 %      550 km, near circular   53.0 deg, several planes (RAAN spaced evenly)
ONEWEB-SIM     12 %      1200 km                 87.9 deg, several planes
SSO-SIM        14 %      600-800 km              sun-synchronous (from the J2 nodal-rate formula)
GEO-SIM         8 %      35786 km                < 0.1 deg, spread in longitude
DEBRIS-SIM     16 %      ~800 km, e up to 0.02   74 deg +- 1.5, clustered nodes (a fragmentation)
GNSS-SIM        5 %      20200 km                55 deg, six planes
=============  ========  ======================  ==================================================

NORAD ids are unique and consecutive from ``first_id`` (default 70000). The module is also a small
command: ``python -m sda.orbit.catalog.synthetic --objects 300 --epoch 2026-11-21T06:00:00Z --seed 1 -o catalog.tle``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import sys
from pathlib import Path

import numpy as np
from sgp4 import exporter
from sgp4.api import WGS72, Satrec

from sda.orbit.frames import SGP4_EPOCH_JD
from sda.orbit.times import parse_utc

# WGS-72 constants (what SGP4 uses with WGS72)
MU_WGS72 = 398600.8  # km^3/s^2
RE_WGS72 = 6378.135  # km
J2_WGS72 = 0.001082616
SIDEREAL_YEAR_DAYS = 365.2421897
GEO_RADIUS_KM = 42164.17

SHELLS = (  # (name, fraction)
    ("STARLINK-SIM", 0.45),
    ("ONEWEB-SIM", 0.12),
    ("SSO-SIM", 0.14),
    ("GEO-SIM", 0.08),
    ("DEBRIS-SIM", 0.16),
    ("GNSS-SIM", 0.05),
)
FIRST_ID = 70000
MAX_ID = 99899  # 99901/99902 are reserved for the simulator's injected conjunction


def mean_motion_rad_min(a_km: float) -> float:
    return math.sqrt(MU_WGS72 / a_km**3) * 60.0


def sso_inclination_deg(a_km: float, ecc: float = 0.0) -> float:
    """Inclination (deg) whose J2 nodal regression equals the Sun's mean motion (sun-synchronous)."""
    node_rate = 2.0 * math.pi / (SIDEREAL_YEAR_DAYS * 86400.0)  # rad/s, eastward
    n = math.sqrt(MU_WGS72 / a_km**3)
    p = a_km * (1.0 - ecc**2)
    cos_i = -node_rate / (1.5 * n * J2_WGS72 * (RE_WGS72 / p) ** 2)
    return math.degrees(math.acos(cos_i))


def _gmst_rad(jd: float) -> float:
    from sda.orbit.frames import UNIX_EPOCH_JD, gmst

    return float(gmst((jd - UNIX_EPOCH_JD) * 86400.0))


def _wrap(angle_rad: float) -> float:
    return float(np.mod(angle_rad, 2.0 * np.pi))


def make_satrec(
    norad_id: int,
    epoch_jd: float,
    a_km: float,
    ecc: float,
    incl_deg: float,
    raan_deg: float,
    argp_deg: float,
    mean_anom_deg: float,
    bstar: float = 0.0,
    intldesg: str = "",
) -> Satrec:
    """A ``Satrec`` from mean elements (angles in degrees) at a Julian date."""
    sat = Satrec()
    sat.sgp4init(
        WGS72,
        "i",
        int(norad_id),
        epoch_jd - SGP4_EPOCH_JD,
        float(bstar),
        0.0,
        0.0,
        float(ecc),
        _wrap(math.radians(argp_deg)),
        math.radians(incl_deg),
        _wrap(math.radians(mean_anom_deg)),
        mean_motion_rad_min(a_km),
        _wrap(math.radians(raan_deg)),
    )
    sat.classification = "U"
    sat.intldesg = intldesg
    return sat


def tle_lines(sat: Satrec) -> tuple[str, str]:
    """Export a ``Satrec`` as TLE lines and check that they read back."""
    line1, line2 = exporter.export_tle(sat)
    Satrec.twoline2rv(line1, line2, WGS72)
    return line1, line2


def _shell_counts(n_objects: int) -> list[tuple[str, int]]:
    """Objects per shell: the fractions, at least one per shell when there is room, the rest to the
    constellation (the largest shell)."""
    if n_objects < len(SHELLS):
        return [(name, 1 if i < n_objects else 0) for i, (name, _) in enumerate(SHELLS)]
    counts = [max(1, int(math.floor(n_objects * frac))) for _, frac in SHELLS]
    counts[0] += n_objects - sum(counts)
    return [(name, c) for (name, _), c in zip(SHELLS, counts)]


def _elements(shell: str, k: int, count: int, rng: np.random.Generator, epoch_jd: float) -> dict:
    """Mean elements for the k-th of ``count`` objects of a shell."""
    if shell == "STARLINK-SIM":
        planes = max(1, min(12, count // 3))
        per_plane = math.ceil(count / planes)
        plane, slot = k % planes, k // planes
        return dict(
            a_km=RE_WGS72 + 550.0 + rng.normal(0.0, 1.0), ecc=1.0e-4 + rng.uniform(0, 1.0e-4),
            incl_deg=53.0 + rng.normal(0.0, 0.02), raan_deg=plane * 360.0 / planes + rng.normal(0, 0.05),
            argp_deg=rng.uniform(0, 360), mean_anom_deg=slot * 360.0 / per_plane + plane * 7.5 + rng.normal(0, 0.2),
            bstar=rng.uniform(1e-4, 4e-4),
        )
    if shell == "ONEWEB-SIM":
        planes = max(1, min(6, count // 2))
        per_plane = math.ceil(count / planes)
        plane, slot = k % planes, k // planes
        return dict(
            a_km=RE_WGS72 + 1200.0 + rng.normal(0.0, 1.0), ecc=2.0e-4 + rng.uniform(0, 1.0e-4),
            incl_deg=87.9 + rng.normal(0.0, 0.01), raan_deg=plane * 180.0 / planes + rng.normal(0, 0.05),
            argp_deg=rng.uniform(0, 360), mean_anom_deg=slot * 360.0 / per_plane + rng.normal(0, 0.2),
            bstar=rng.uniform(1e-5, 5e-5),
        )
    if shell == "SSO-SIM":
        alt = rng.uniform(600.0, 800.0)
        a = RE_WGS72 + alt
        ecc = rng.uniform(1.0e-4, 1.5e-3)
        return dict(
            a_km=a, ecc=ecc, incl_deg=sso_inclination_deg(a, ecc), raan_deg=rng.uniform(0, 360),
            argp_deg=rng.uniform(0, 360), mean_anom_deg=rng.uniform(0, 360), bstar=rng.uniform(2e-5, 2e-4),
        )
    if shell == "GEO-SIM":
        lon = -180.0 + (k + rng.uniform(0.1, 0.9)) * 360.0 / count  # spread along the belt
        raan, argp = rng.uniform(0, 360), rng.uniform(0, 360)
        gmst_deg = math.degrees(_gmst_rad(epoch_jd))
        return dict(
            a_km=GEO_RADIUS_KM + rng.normal(0.0, 2.0), ecc=rng.uniform(1.0e-5, 4.0e-4),
            incl_deg=rng.uniform(0.005, 0.095), raan_deg=raan, argp_deg=argp,
            mean_anom_deg=lon + gmst_deg - raan - argp, bstar=0.0,
        )
    if shell == "DEBRIS-SIM":
        ecc = abs(rng.normal(0.0, 0.008))
        ecc = min(ecc, 0.02)
        a = RE_WGS72 + 800.0 + rng.normal(0.0, 60.0)
        a = max(a, (RE_WGS72 + 450.0) / (1.0 - ecc))  # perigee above 450 km
        return dict(
            a_km=a, ecc=ecc, incl_deg=74.0 + rng.normal(0.0, 0.6), raan_deg=40.0 + rng.normal(0.0, 4.0),
            argp_deg=rng.uniform(0, 360), mean_anom_deg=rng.uniform(0, 360), bstar=rng.uniform(1e-4, 8e-4),
        )
    if shell == "GNSS-SIM":
        plane = k % 6
        return dict(
            a_km=RE_WGS72 + 20200.0 + rng.normal(0.0, 5.0), ecc=rng.uniform(1e-3, 1e-2),
            incl_deg=55.0 + rng.normal(0.0, 0.3), raan_deg=plane * 60.0 + rng.normal(0, 0.2),
            argp_deg=rng.uniform(0, 360), mean_anom_deg=(k // 6) * 90.0 + plane * 15.0 + rng.normal(0, 1.0),
            bstar=0.0,
        )
    raise ValueError(f"unknown shell {shell!r}")


def generate_entries(n_objects: int, epoch: dt.datetime, seed: int,
                     first_id: int = FIRST_ID) -> list[tuple[str, str, str]]:
    """(name, line1, line2) for each generated object, in NORAD-id order."""
    if n_objects < 0:
        raise ValueError(f"n_objects={n_objects}: expected a count >= 0")
    if first_id + n_objects - 1 > MAX_ID:
        raise ValueError(f"n_objects={n_objects} from id {first_id}: ids would pass {MAX_ID}")
    if epoch.tzinfo is None:
        epoch = epoch.replace(tzinfo=dt.timezone.utc)
    unix = epoch.timestamp()
    epoch_jd = 2440587.5 + unix / 86400.0
    rng = np.random.default_rng(seed)
    year = epoch.astimezone(dt.timezone.utc).year % 100
    out: list[tuple[str, str, str]] = []
    norad = first_id
    for s_idx, (shell, count) in enumerate(_shell_counts(n_objects)):
        for k in range(count):
            el = _elements(shell, k, count, rng, epoch_jd)
            launch = 900 - s_idx * 100 + k // 26
            piece = chr(ord("A") + k % 26)
            sat = make_satrec(norad, epoch_jd, intldesg=f"{year:02d}{launch:03d}{piece}", **el)
            line1, line2 = tle_lines(sat)
            out.append((f"{shell}-{k + 1:04d}", line1, line2))
            norad += 1
    return out


def format_tle(entries: list[tuple[str, str, str]]) -> str:
    return "".join(f"{name}\n{l1}\n{l2}\n" for name, l1, l2 in entries)


def generate_catalog(n_objects: int, epoch: dt.datetime, seed: int) -> str:
    """A synthetic catalogue of ``n_objects`` as three-line TLE text (deterministic for a seed)."""
    return format_tle(generate_entries(n_objects, epoch, seed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sda.orbit.catalog.synthetic", description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=300)
    parser.add_argument("--epoch", type=parse_utc, required=True, help="ISO-8601 UTC")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    args = parser.parse_args(argv)
    if not 0 < args.objects <= MAX_ID - FIRST_ID + 1:
        parser.error(f"--objects {args.objects}: expected 1..{MAX_ID - FIRST_ID + 1}")
    text = generate_catalog(args.objects, args.epoch, args.seed)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
