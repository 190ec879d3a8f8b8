"""The spatial prefilter (sda.orbit.correlation.association.candidate_pairs) against a brute-force oracle that
checks every (observation, object) pair with its own arithmetic: point observations (ISL; found
through the k-d tree, wide objects densely) and optical lines of sight."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sda.orbit.correlation import association as A
from sda.orbit.frames import site_teme, unit_vector_radec

T_REF = 1_795_000_000.0  # unix seconds


def catalogue(rng, n):
    """Objects in a 7,000-7,600 km shell, LEO-like speeds, radii of 150 km, some over WIDE_RADIUS_KM,
    some with no position (SGP4 failed or not a candidate)."""
    r = rng.normal(size=(n, 3))
    r *= ((7000.0 + 600.0 * rng.random(n)) / np.linalg.norm(r, axis=1))[:, None]
    speed = 6.5 + 1.5 * rng.random(n)
    radius = np.full(n, 150.0)
    radius[rng.random(n) < 0.05] = A.WIDE_RADIUS_KM * (1.0 + 2.0 * rng.random())
    r[rng.random(n) < 0.03] = np.nan
    return A.reference(T_REF, r, speed, radius)


def oracle(ref, points, t, ray=None):
    """Every pair, one at a time: the object's distance to the point (or to the ray from ``ray``'s
    site along its unit vector, to the site when behind) against radius + speed |dt| + a dt^2 / 2."""
    pairs = set()
    for i, p in enumerate(points):
        dt = abs(t[i] - ref.t)
        for j in range(len(ref.r)):
            if not np.isfinite(ref.r[j]).all():
                continue
            if ray is None:
                dist = np.linalg.norm(p - ref.r[j])
            else:
                site, u = ray[0][i], ray[1][i]
                ahead = np.dot(ref.r[j] - site, u)
                dist = np.linalg.norm(ref.r[j] - site - ahead * u) if ahead > 0 else np.linalg.norm(ref.r[j] - site)
            if dist < ref.radius_km[j] + ref.speed[j] * dt + 0.5 * A.MAX_ACCEL_KM_S2 * dt * dt:
                pairs.add((i, j))
    return pairs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_point_observations_match_the_brute_force_oracle(seed):
    rng = np.random.default_rng(seed)
    ref = catalogue(rng, 600)
    assert len(ref.wide) and len(ref.narrow)
    # half the observations within a few hundred km of an object, half anywhere in the shell
    near = ref.r[rng.choice(ref.narrow, 100)] + rng.normal(scale=150.0, size=(100, 3))
    anywhere = rng.normal(size=(100, 3))
    anywhere *= 7300.0 / np.linalg.norm(anywhere, axis=1)[:, None]
    points = np.vstack([near, anywhere])
    t = T_REF + rng.uniform(-30.0, 30.0, len(points))
    obs = pd.DataFrame({"x_m": points[:, 0] * 1000.0, "y_m": points[:, 1] * 1000.0, "z_m": points[:, 2] * 1000.0})
    obs_i, obj_j = A.candidate_pairs("isl", obs, t, ref)
    expected = oracle(ref, points, t)
    wide = set(ref.wide.tolist())
    assert sum(j in wide for _, j in expected) > 10 and sum(j not in wide for _, j in expected) > 50  # not vacuous
    assert set(zip(obs_i.tolist(), obj_j.tolist())) == expected
    assert len(obs_i) == len(expected)
    assert (np.lexsort((obj_j, obs_i)) == np.arange(len(obs_i))).all()  # sorted by observation, then object


def test_optical_lines_of_sight_match_the_brute_force_oracle():
    rng = np.random.default_rng(7)
    ref = catalogue(rng, 400)
    n = 60
    t = T_REF + rng.uniform(-30.0, 30.0, n)
    lat, lon, alt = rng.uniform(-60, 60, n), rng.uniform(-180, 180, n), rng.uniform(0, 3000, n)
    site = site_teme(lat, lon, alt, t)
    # look at an object for most observations (pointing from the site), elsewhere for the rest
    target = ref.r[rng.choice(ref.narrow, n)] + rng.normal(scale=100.0, size=(n, 3))
    target[n // 2:] = rng.normal(size=(n - n // 2, 3)) * 8000.0
    los = target - site
    ra = np.arctan2(los[:, 1], los[:, 0])
    dec = np.arcsin(los[:, 2] / np.linalg.norm(los, axis=1))
    obs = pd.DataFrame({"ra_rad": ra, "dec_rad": dec, "site_lat_deg": lat, "site_lon_deg": lon, "site_alt_m": alt})
    obs_i, obj_j = A.candidate_pairs("optical", obs, t, ref)
    expected = oracle(ref, np.zeros((n, 3)), t, ray=(site, unit_vector_radec(ra, dec)))
    assert len(expected) > 50
    assert set(zip(obs_i.tolist(), obj_j.tolist())) == expected


def test_no_catalogue_position_no_pairs():
    ref = A.reference(T_REF, np.full((3, 3), np.nan), np.ones(3), np.full(3, 100.0))
    assert ref.tree is None and len(ref.narrow) == 0 and len(ref.wide) == 0
    obs = pd.DataFrame({"x_m": [7e6], "y_m": [0.0], "z_m": [0.0]})
    obs_i, obj_j = A.candidate_pairs("isl", obs, np.array([T_REF]), ref)
    assert len(obs_i) == 0 and len(obj_j) == 0
