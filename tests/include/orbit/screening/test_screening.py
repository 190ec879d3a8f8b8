"""Screening against a brute-force reference (1 s sampling, then 1 ms around each minimum) on a small
synthetic catalogue with a fast crossing pair and a slow co-orbital pair; RTN on hand-worked
geometry; the altitude-band filter against an explicit double loop."""

from __future__ import annotations

import datetime as dt
import itertools

import numpy as np
import pytest

from sda.orbit import screening as S
from sda.orbit.frames import propagate
from sda.orbit.screening.candidates import _step_pairs

EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
# norad_id: (altitude km, e, i deg, RAAN deg, argp deg, M deg)
ELEMENTS = {
    101: (700.0, 0.0001, 98.0, 0.0, 0.0, 0.0),  # crossing pair: both at the node at EPOCH,
    102: (702.0, 0.0001, 53.0, -0.01, 0.0, -0.02),  # ~7 km/s apart, tuned to miss by ~160 m
    201: (800.0, 0.0010, 60.0, 40.0, 0.0, 10.0),  # slow pair: same plane, eccentricities differ,
    202: (800.0, 0.0012, 60.0, 40.0, 0.0, 10.01),  # ~1.2 km apart twice an orbit at ~1 m/s
    301: (550.0, 0.0002, 53.0, 100.0, 0.0, 200.0),
    302: (560.0, 0.0003, 97.6, 250.0, 30.0, 40.0),
    303: (1200.0, 0.0100, 87.0, 10.0, 80.0, 300.0),
    401: (35786.0, 0.0002, 0.05, 0.0, 0.0, 120.0),  # GEO
    402: (20000.0, 0.7000, 63.4, 270.0, 270.0, 0.0),  # Molniya-like: crosses every altitude band
    403: (400.0, 0.0005, 51.6, 300.0, 0.0, 0.0),
}
THRESHOLD_KM = 5.0


def catalogue(elements=ELEMENTS):
    ids = sorted(elements)
    lines = [S.tle_from_elements(n, EPOCH, *elements[n]) for n in ids]
    return ids, S.satrecs_from_lines([l1 for l1, _ in lines], [l2 for _, l2 in lines])


def brute_force(ids, sats, start, end, threshold_km):
    """Every local minimum of the distance under the threshold, by sampling only (no root finding)."""
    t = np.arange(start, end + 1.0, 1.0)
    _, r, _ = propagate(sats, t)
    found = []
    for i, j in itertools.combinations(range(len(ids)), 2):
        d = np.linalg.norm(r[i] - r[j], axis=1)
        if (d < threshold_km).all():  # within the threshold all along: one persistent event, its minimum
            found.append((min(ids[i], ids[j]), max(ids[i], ids[j]), t[int(np.argmin(d))], float(d.min()), "whole"))
            continue
        minima = np.where((d[1:-1] < d[:-2]) & (d[1:-1] <= d[2:]) & (d[1:-1] < threshold_km + 0.5))[0] + 1
        for k in minima:
            fine = np.arange(t[k] - 1.0, t[k] + 1.0, 0.001)
            _, rf, _ = propagate([sats[i], sats[j]], fine)
            df = np.linalg.norm(rf[0] - rf[1], axis=1)
            m = int(np.argmin(df))
            if start <= fine[m] < end:
                found.append((min(ids[i], ids[j]), max(ids[i], ids[j]), fine[m], df[m], None))
    return found


@pytest.fixture(scope="module")
def screened():
    ids, sats = catalogue()
    start, end = EPOCH.timestamp() - 3 * 3600, EPOCH.timestamp() + 3 * 3600
    events, metrics = S.screen(ids, sats, start, end, THRESHOLD_KM, 60.0)
    return ids, sats, start, end, events, metrics


def test_every_reference_event_is_found_with_tca_within_1s_and_miss_within_10m(screened):
    ids, sats, start, end, events, _ = screened
    reference = brute_force(ids, sats, start, end, THRESHOLD_KM)
    inside = [ev for ev in reference if ev[3] < THRESHOLD_KM - 0.01]
    # the constructed pairs really are there: one fast crossing, and a slow pair that never leaves
    # the threshold -- one persistent event at its smallest distance instead of an event per minimum
    assert {(p, s) for p, s, *_ in inside} == {(101, 102), (201, 202)}
    assert [kind for p, *_, kind in inside if p == 201] == ["whole"]
    assert len([ev for ev in inside if ev[0] == 101]) >= 2
    for p, s, tca, miss, kind in inside:
        match = events[(events.primary_id == p) & (events.secondary_id == s) & ((events.tca_unix - tca).abs() < 1.0)]
        assert len(match) == 1, (p, s, tca, miss)
        assert abs(match.miss_km.iloc[0] - miss) < 0.010
        assert (match.flag.iloc[0] == S.PERSISTENT_WHOLE) == (kind == "whole")
    # and nothing that the reference does not confirm
    for row in events.itertuples():
        assert any(p == row.primary_id and s == row.secondary_id and abs(t - row.tca_unix) < 1.0
                   for p, s, t, *_ in reference)


def test_crossing_pair_geometry(screened):
    *_, events, _ = screened
    fast = events[(events.primary_id == 101) & (events.secondary_id == 102)
                  & ((events.tca_unix - EPOCH.timestamp()).abs() < 30.0)]  # both pass the node at the epoch
    assert len(fast) == 1
    ev = fast.iloc[0]
    # 98 deg and 53 deg planes at ~7.5 km/s: |dv| = 2 v sin(45/2) ~ 5.76 km/s
    assert 5.5 < ev.rel_speed_km_s < 6.0
    assert ev.miss_km < 0.3
    assert np.isclose(np.sqrt(ev.r_km**2 + ev.t_km**2 + ev.n_km**2), ev.miss_km, rtol=1e-9)


def test_filter_chain_metrics_shrink(screened):
    *_, metrics = screened
    assert metrics["pairs_all"] == 45
    assert metrics["pairs_all"] >= metrics["pairs_altitude"] >= metrics["pairs_linear"]
    assert metrics["pairs_linear"] >= 2
    assert metrics["pair_steps_grid"] >= metrics["pair_steps_linear"]


def test_altitude_band_pairs_match_double_loop():
    rng = np.random.default_rng(7)
    perigee = rng.uniform(200, 2000, 60)
    apogee = perigee + rng.exponential(200, 60)
    i, j = S.altitude_band_pairs(perigee, apogee, 5.0)
    got = {tuple(sorted(p)) for p in zip(i.tolist(), j.tolist())}
    pad = 5.0 + S.ALTITUDE_MARGIN_KM
    want = {(a, b) for a, b in itertools.combinations(range(60), 2)
            if perigee[a] - pad <= apogee[b] + pad and perigee[b] - pad <= apogee[a] + pad}
    assert got == want
    assert S.altitude_band_pair_count(perigee, apogee, 5.0) == len(want)


def test_rtn_hand_worked():
    # primary on the x axis moving along +y: R = x, N = z, T = N x R = y
    rtn = S.rtn_components([7000.0, 0, 0], [0, 7.5, 0], [7000.1, 0.2, 0.3])
    assert np.allclose(rtn, [0.1, 0.2, 0.3], atol=1e-9)
    # primary moving along +z (polar): N = x cross z = -y, T = (-y) x x = +z
    rtn = S.rtn_components([7000.0, 0, 0], [0, 0, 7.5], [7000.1, 0.2, 0.3])
    assert np.allclose(rtn, [0.1, 0.3, -0.2], atol=1e-9)
    # a primary at 45 deg in the xy plane: a secondary 1 km further out is purely radial
    r = np.array([1.0, 1.0, 0.0]) / np.sqrt(2) * 7000.0
    rtn = S.rtn_components(r, [-5.0, 5.0, 0.0], r * (7001.0 / 7000.0))
    assert np.allclose(rtn, [1.0, 0.0, 0.0], atol=1e-9)


def test_linear_min_distance():
    dr = np.array([[10.0, 0.0, 0.0], [10.0, 3.0, 0.0]])
    dv = np.array([[-1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]])
    # straight at each other: the minimum 0 at tau = 10, outside |tau| <= 5 -> 5 km at tau = 5
    assert np.allclose(S.linear_min_distance(dr, dv, 5.0), [5.0, np.hypot(5.0, 3.0)])
    assert np.allclose(S.linear_min_distance(dr, dv, 20.0), [0.0, 3.0])


def test_event_id_is_deterministic_and_minute_rounded():
    t = EPOCH.timestamp()
    assert S.event_id(1, 2, t + 10) == S.event_id(1, 2, t - 10)
    assert S.event_id(1, 2, t + 10) != S.event_id(1, 2, t + 50)
    assert S.event_id(1, 2, t) != S.event_id(1, 3, t)
    import hashlib
    assert S.event_id(1, 2, t) == hashlib.sha256(b"1|2|2026-11-21T06:00Z").hexdigest()


def test_neighbour_pairs_match_double_loop():
    """The sort-merge cell join finds exactly the pairs whose cells differ by at most one on every
    axis, each unordered pair once (clustered points, so cells hold several)."""
    rng = np.random.default_rng(11)
    centres = rng.uniform(-8000, 8000, (25, 3))
    pos = centres[rng.integers(0, 25, 400)] + rng.normal(0, 300, (400, 3))
    cell = 250.0
    i, j = S.neighbour_pairs(pos, cell)
    got = [tuple(sorted(p)) for p in zip(i.tolist(), j.tolist())]
    assert len(got) == len(set(got))  # each once
    cells = np.floor(pos / cell).astype(int)
    want = {(a, b) for a, b in itertools.combinations(range(len(pos)), 2)
            if np.all(np.abs(cells[a] - cells[b]) <= 1)}
    assert set(got) == want
    assert len(want) > 400  # the case is not trivial


def test_block_candidates_flags_objects_sgp4_cannot_propagate():
    """An element set that decays inside the interval is reported with the error code SGP4 itself
    gives (scalar ``Satrec.sgp4``) at the first failing step, and the other objects are still screened."""
    ids, sats = catalogue()
    low = S.satrecs_from_lines(*zip(S.tle_from_elements(999, EPOCH, 120.0, 0.0001, 51.6, 0.0, 0.0, 0.0, bstar=0.5)))
    objects = S.ScreeningObjects.from_satrecs(ids + [999], sats + low)
    times = S.time_grid(EPOCH.timestamp(), EPOCH.timestamp() + 3 * 86400, 600.0)
    block = S.block_candidates(objects, times, 0, 5.0, 600.0)
    assert set(block.errors) == {999}
    step, code = block.errors[999]
    assert 0 < step < len(times)
    from sda.orbit.frames import unix_to_jd
    scalar = [low[0].sgp4(*map(float, unix_to_jd(t)))[0] for t in times[: step + 1]]
    assert scalar[-1] == code != 0 and not any(scalar[:-1])
    assert (block.primary_id != 999).all() and (block.secondary_id != 999).all()


def test_step_pairs_hold_every_pair_within_its_reach():
    """Slow objects on the fine grid, fast ones against everything on the coarse one: every pair
    closer than threshold + (V1 + V2) h / 2 is produced, once, and never an object with itself."""
    rng = np.random.default_rng(5)
    n, step, threshold = 600, 30.0, 5.0
    pos = rng.uniform(-1500, 1500, (n, 3))
    speed = np.where(rng.random(n) < 0.1, rng.uniform(8.5, 11.0, n), rng.uniform(7.0, 8.0, n))
    ok = rng.random(n) > 0.05  # a few objects SGP4 refused at this step
    slow = speed <= S.SLOW_SPEED_KM_S
    grids = S.Grids(slow, threshold + speed[slow].max() * step, threshold + speed.max() * step)
    i, j = _step_pairs(pos, ok & slow, ok & ~slow, ok, grids)
    got = [tuple(sorted(p)) for p in zip(i.tolist(), j.tolist())]
    assert len(got) == len(set(got)) and all(a != b for a, b in got)
    assert all(ok[a] and ok[b] for a, b in got)
    reach = threshold + (speed[:, None] + speed[None, :]) * step / 2.0
    dist = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)
    want = {(a, b) for a, b in itertools.combinations(range(n), 2) if ok[a] and ok[b] and dist[a, b] < reach[a, b]}
    assert want <= set(got)
    assert len(want) > 100 and any(not slow[a] or not slow[b] for a, b in want)


def test_quadratic_min_distance_against_dense_sampling():
    """(b''): the minimum of |dr + dv tau + da tau^2/2| over |tau| <= h/2 from the cubic's roots equals
    the minimum over tau sampled every millisecond (random LEO-like relative states)."""
    rng = np.random.default_rng(3)
    n, half = 200, 60.0
    dr = rng.normal(0, 200, (n, 3))
    dv = rng.normal(0, 5, (n, 3))
    da = rng.normal(0, 0.01, (n, 3))
    da[:5] = 0.0  # no relative acceleration: the straight line
    got = S.quadratic_min_distance(dr, dv, da, half)
    tau = np.arange(-half, half + 1e-9, 1e-3)
    for k in range(n):
        path = dr[k] + np.outer(tau, dv[k]) + 0.5 * np.outer(tau * tau, da[k])
        want = np.linalg.norm(path, axis=1).min()
        assert got[k] <= want + 1e-9 and got[k] == pytest.approx(want, abs=0.05), k


def test_focus_candidates_cover_every_approach_of_the_changed_objects():
    """The focus part (changed objects against all) on a grid four times coarser, with the
    second-order bound, yields every pair the brute-force reference finds for those objects."""
    ids, sats = catalogue()
    start, end = EPOCH.timestamp() - 3 * 3600, EPOCH.timestamp() + 3 * 3600
    reference = brute_force(ids, sats, start, end, THRESHOLD_KM)
    objects = S.ScreeningObjects.from_satrecs(ids, sats)
    for changed in ({101}, {202}, {102, 201}):
        mask = np.isin(objects.norad_ids, list(changed))
        step = 4 * 60.0
        block = S.focus_block_candidates(objects, S.time_grid(start, end, step), 0, THRESHOLD_KM, step, mask)
        got = set(zip(block.primary_id.tolist(), block.secondary_id.tolist()))
        want = {(p, s) for p, s, *_ in reference if {p, s} & changed}
        assert want and want <= got, (changed, want - got)
        assert all({p, s} & changed for p, s in got)
