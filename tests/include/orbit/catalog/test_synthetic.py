"""sda.orbit.catalog.synthetic: valid TLEs (checksums recomputed here), the shell mix, propagation, determinism."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest
from sgp4.api import WGS72, Satrec, SatrecArray

from sda.orbit.catalog.synthetic import generate_catalog

EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
RE = 6378.135
MU = 398600.8


def _checksum(line: str) -> int:
    return sum(int(c) if c.isdigit() else (1 if c == "-" else 0) for c in line[:68]) % 10


@pytest.fixture(scope="module")
def catalog():
    text = generate_catalog(400, EPOCH, seed=7)
    lines = text.splitlines()
    assert len(lines) == 3 * 400
    return [(lines[i], lines[i + 1], lines[i + 2]) for i in range(0, len(lines), 3)]


def test_lines_are_valid_tles(catalog):
    ids = set()
    for name, l1, l2 in catalog:
        assert name and not name.startswith(("1 ", "2 "))
        assert len(l1) == 69 and len(l2) == 69
        assert l1.startswith("1 ") and l2.startswith("2 ")
        assert int(l1[68]) == _checksum(l1) and int(l2[68]) == _checksum(l2)
        assert l1[2:7] == l2[2:7]
        sat = Satrec.twoline2rv(l1, l2, WGS72)
        ids.add(sat.satnum)
    assert len(ids) == len(catalog)
    assert min(ids) == 70000 and max(ids) == 70000 + len(catalog) - 1


def test_epoch_is_the_requested_one(catalog):
    # line 1 columns 19-32: YYDDD.DDDDDDDD; 2026-11-21 is day 325, 06:00 is .25
    assert {l1[18:32] for _, l1, _ in catalog} == {"26325.25000000"}


def _elements(catalog):
    out = []
    for name, l1, l2 in catalog:
        incl = float(l2[8:16])
        ecc = float("0." + l2[26:33])
        n_rev_day = float(l2[52:63])
        n = n_rev_day * 2 * math.pi / 86400.0
        a = (MU / n**2) ** (1.0 / 3.0)
        out.append((name, a * (1 - ecc) - RE, a * (1 + ecc) - RE, incl, ecc, a))
    return out


def test_shell_mix(catalog):
    els = _elements(catalog)
    n = len(els)

    def count(pred):
        return sum(1 for e in els if pred(*e[1:]))

    starlink = count(lambda p, ap, i, e, a: 530 < p and ap < 570 and abs(i - 53.0) < 0.2)
    oneweb = count(lambda p, ap, i, e, a: 1170 < p and ap < 1230 and abs(i - 87.9) < 0.1)
    sso = count(lambda p, ap, i, e, a: 580 < p and ap < 820 and 97.5 < i < 99.0)
    geo = count(lambda p, ap, i, e, a: abs(a - 42164.0) < 30 and i < 0.1)
    debris = count(lambda p, ap, i, e, a: 450 < p and ap < 1200 and 70 < i < 78 and e > 0)
    gnss = count(lambda p, ap, i, e, a: abs(a - RE - 20200) < 100 and abs(i - 55) < 2)
    assert starlink + oneweb + sso + geo + debris + gnss == n  # every object is in one shell
    assert 0.35 * n <= starlink <= 0.6 * n
    assert 0.08 * n <= oneweb <= 0.16 * n
    assert 0.10 * n <= sso <= 0.2 * n
    assert 0.05 * n <= geo <= 0.12 * n
    assert 0.10 * n <= debris <= 0.25 * n
    assert 0.02 * n <= gnss <= 0.08 * n
    # the constellation has several planes
    raans = sorted({round(float(l2[17:25]) / 30.0) % 12 for name, _, l2 in catalog if name.startswith("STARLINK")})
    assert len(raans) >= 6
    # the debris is a cloud: dispersed a/e/i
    deb = [e for e in els if 70 < e[3] < 78]
    assert np.std([e[5] for e in deb]) > 20 and np.std([e[3] for e in deb]) > 0.2


def test_sun_synchronous_nodal_rate(catalog):
    # J2 nodal regression computed here must match the Sun's 0.9856 deg/day
    j2 = 0.001082616
    for name, p, ap, incl, ecc, a in _elements(catalog):
        if not name.startswith("SSO"):
            continue
        n = math.sqrt(MU / a**3)
        rate = -1.5 * n * j2 * (RE / (a * (1 - ecc**2))) ** 2 * math.cos(math.radians(incl))
        assert math.degrees(rate) * 86400 == pytest.approx(360 / 365.2422, abs=0.01)


def test_geo_spread_in_longitude(catalog):
    from sda.orbit.frames import teme_to_ecef

    sats = [Satrec.twoline2rv(l1, l2, WGS72) for name, l1, l2 in catalog if name.startswith("GEO")]
    t = EPOCH.timestamp()
    e, r, v = SatrecArray(sats).sgp4(np.array([2440587.5 + t // 86400]), np.array([(t % 86400) / 86400]))
    r_e, _ = teme_to_ecef(r[:, 0], v[:, 0], t)
    lons = np.sort(np.degrees(np.arctan2(r_e[:, 1], r_e[:, 0])))
    assert lons[-1] - lons[0] > 250  # spread around the belt
    assert np.max(np.diff(lons)) < 90


def test_all_propagate_two_days_either_side(catalog):
    sats = [Satrec.twoline2rv(l1, l2, WGS72) for _, l1, l2 in catalog]
    t = EPOCH.timestamp() + np.arange(-2 * 86400, 2 * 86400 + 1, 1800.0)
    jd = 2440587.5 + np.floor(t / 86400)
    fr = (t / 86400) - np.floor(t / 86400)
    err, r, _ = SatrecArray(sats).sgp4(jd, fr)
    assert not err.any()
    assert np.all(np.linalg.norm(r, axis=-1) > RE + 400)


def test_deterministic_for_a_seed():
    assert generate_catalog(50, EPOCH, 3) == generate_catalog(50, EPOCH, 3)
    assert generate_catalog(50, EPOCH, 3) != generate_catalog(50, EPOCH, 4)


@pytest.mark.parametrize("n", [1, 2, 5, 6, 7])
def test_tiny_catalogues(n):
    assert len(generate_catalog(n, EPOCH, 1).splitlines()) == 3 * n
