"""Manoeuvres, uncatalogued bodies and a fresh launch in the simulator (sda.sim.events), with their truth."""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pandas as pd
import pytest

from sda.orbit.catalog import load_catalog
from sda.sim import dynamics, events, scoring
from sda.sim.simulate import SimConfig, simulate

START = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
T0 = START.timestamp()


def test_burns_follow_the_settings():
    ids = list(range(70000, 72000))
    regimes = ["GEO" if n % 10 == 0 else "LEO" for n in ids]
    burns = events.draw_burns(ids, regimes, T0, T0 + 2 * 86400.0, share=0.1, rate_per_day=3.0, seed=4)
    movers = {b.norad_id for b in burns}
    assert 150 <= len(movers) <= 250  # about 10 % of 2,000 bodies (a body drawn with no burn is not listed)
    assert all(T0 <= b.t_unix < T0 + 2 * 86400.0 for b in burns)
    assert [b.t_unix for b in burns] == sorted(b.t_unix for b in burns)
    leo = [b for b in burns if b.kind == "manoeuvre"]
    assert 5.0 < len(leo) / len({b.norad_id for b in leo}) < 7.0  # 3 a day for 2 days, Poisson
    sizes = np.array([math.hypot(*b.dv_rtn_ms) for b in leo])
    assert sizes.min() >= 0.05 - 1e-12 and sizes.max() <= 2.0 + 1e-12
    axes = np.array([np.flatnonzero(b.dv_rtn_ms)[0] for b in leo])
    assert abs(np.mean(axes == 1) - 0.60) < 0.1 and abs(np.mean(axes == 0) - 0.15) < 0.08
    geo = [b for b in burns if b.kind.startswith("station-keeping")]
    assert geo and all(b.norad_id % 10 == 0 for b in geo)
    east_west = [b for b in geo if b.kind.endswith("east-west")]
    assert all(b.dv_rtn_ms[0] == b.dv_rtn_ms[2] == 0.0 and 0.05 <= abs(b.dv_rtn_ms[1]) <= 0.5 for b in east_west)
    # the same body burns the same whatever else is simulated
    alone = events.draw_burns([burns[0].norad_id], ["LEO"], T0, T0 + 2 * 86400.0, 0.1, 3.0, seed=4)
    assert alone == [b for b in burns if b.norad_id == burns[0].norad_id]


def _circular(alt_km: float) -> np.ndarray:
    r = (6378.137 + alt_km) * 1000.0
    return np.array([r, 0.0, 0.0, 0.0, math.sqrt(3.986004418e14 / r), 0.0])


def test_a_burn_changes_the_velocity_by_its_delta_v_on_the_bodys_axes():
    params = [dynamics.BodyParams(2.2, 1.3, 0.01)]
    start = _circular(700.0)[None, :]
    burned = dynamics.integrate(start, T0, 2, params, step=60.0, burns=[(0, T0 + 90.0, (0.0, 1.0, 0.0))])
    plain = dynamics.integrate(start, T0, 2, params, step=60.0)
    assert np.array_equal(burned[0, 1], plain[0, 1])  # nothing changes before the burn
    # by hand: at the burn, add 1 m/s along the in-plane perpendicular to r (prograde), then integrate 30 s
    at_burn = dynamics.integrate(plain[0, 1][None, :], T0 + 60.0, 1, params, step=30.0)[0, 1]
    r, v = at_burn[:3], at_burn[3:]
    h = np.cross(r, v)
    at_burn[3:] += np.cross(h / np.linalg.norm(h), r / np.linalg.norm(r))
    expected = dynamics.integrate(at_burn[None, :], T0 + 90.0, 1, params, step=30.0)[0, 1]
    assert np.linalg.norm(burned[0, 2, :3] - expected[:3]) < 1e-3
    assert 29.0 < np.linalg.norm(burned[0, 2, :3] - plain[0, 2, :3]) < 31.0  # 1 m/s for 30 s


def test_states_around_a_burn_are_exact():
    """Interpolated near a burn, on either side of it, against integrations stopped at those times."""
    params = [dynamics.BodyParams(2.2, 1.3, 0.01)]
    start = _circular(500.0)[None, :]
    t_burn = T0 + 10 * dynamics.STEP_S + 37.0
    eph, _ = dynamics.propagate([1], start, T0, T0 + 3600.0, params, burns=[(0, t_burn, (0.3, -1.5, 0.8))])
    assert len(eph.burns) == 1 and eph.burns[0][1] == t_burn
    for when in (t_burn - 20.0, t_burn + 20.0, t_burn + 300.0):
        k = int((when - T0) // dynamics.STEP_S)
        at_k = dynamics.integrate(start, T0, k, params, burns=[(0, t_burn, (0.3, -1.5, 0.8))])[:, k]
        direct = dynamics.integrate(at_k, T0 + k * dynamics.STEP_S, 1, params, step=when - T0 - k * dynamics.STEP_S,
                                    burns=[(0, t_burn, (0.3, -1.5, 0.8))])[:, 1]
        r_direct, v_direct = dynamics.gcrf_to_teme(direct[:, None, :], np.array([when]))
        _, r, v = eph.at([when])
        assert np.linalg.norm(r - r_direct) * 1000.0 < 0.05, when  # m
        assert np.linalg.norm(v - v_direct) * 1000.0 < 1e-3, when  # m/s


@pytest.fixture(scope="module")
def hidden_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("events")
    return simulate(SimConfig(start=START, end=START + dt.timedelta(minutes=40), landing=root / "landing",
                              catalog_out=root / "catalog.tle", objects=120, tle_age_days=(1.0, 1.0),
                              uncatalogued_share=0.1, launch=True, manoeuvre_share=0.2, seed=3))


def test_uncatalogued_bodies_and_the_launch_are_seen_but_not_catalogued(hidden_run):
    summary = json.loads(hidden_run.summary_file.read_text())
    listed = json.loads((hidden_run.landing / summary["events"]["file"]).read_text())
    hidden = set(listed["uncatalogued"])
    launch = set(range(events.LAUNCH_FIRST_ID, events.LAUNCH_FIRST_ID + events.LAUNCH_SIZE))
    assert launch <= hidden and 5 <= len(hidden - launch) <= 25  # about 10 % of 120
    catalogued = {e.norad_id for e in load_catalog(hidden_run.catalog_file)[0]}
    assert not hidden & catalogued and len(catalogued) == 120 - len(hidden - launch)
    truth = [json.loads(line) for line in hidden_run.truth_file.read_text().splitlines()]
    seen = {t["norad_id"] for t in truth if t["norad_id"] is not None}
    assert hidden & seen, "no uncatalogued body observed"
    # the launch flies together: its objects within 100 km of one another at the run's start
    with np.load(hidden_run.landing / summary["truth"]["ephemeris_file"]) as data:
        rows = [i for i, n in enumerate(data["norad"]) if int(n) in launch]
        first = data["states"][rows, 0, :3]
    spread = np.linalg.norm(first[:, None] - first[None, :], axis=-1).max()
    assert 0.1 < spread < 100.0
    burns = listed["manoeuvres"]
    assert burns and all(b["norad_id"] in seen | catalogued for b in burns)


def test_an_uncatalogued_observation_left_uncorrelated_is_right():
    scored = pd.DataFrame({"status": ["uncorrelated", "correlated", "uncorrelated"],
                           "norad_id": pd.array([None, 70001, None], dtype="Int64"),
                           "true_id": pd.array([80000, 70001, 70001], dtype="Int64"),
                           "ambiguous": [False, False, False], "sensor_id": ["A", "A", "A"]})
    figures = scoring.score(scored, {70001: ("1 ...", "2 ...")})
    assert (figures["right"], figures["wrong"], figures["uct"]) == (2, 0, 1)


def test_a_designed_burn_takes_the_primary_to_its_encounter():
    """The injected primary that reaches its TCA through a 1 m/s along-track burn two hours before it: integrated
    forward from its designed start with the burn, it is where the geometry (the primary's SGP4 state at the
    TCA, the secondary's designed one; independent of the integration) puts it; without the burn it is about
    3 dv dt = 21.6 km away (along-track drift of a raised near-circular orbit); the simulator lists the burn
    as the truth's and draws none for the pair."""
    from sda.sim.conjunction import design_conjunction, design_true_conjunction

    tca = START + dt.timedelta(hours=3)
    pair = design_true_conjunction(START, tca, 150.0, 11, burn_h=2.0)
    burn = pair["burn"]
    assert burn["t_unix"] == tca.timestamp() - 7200.0 and burn["dv_rtn_ms"] == [0.0, 1.0, 0.0]
    r_geometry = design_conjunction(tca, 150.0, 11)["designed_teme"][:, None, :3]  # TEME km at the TCA
    burns = [(0, burn["t_unix"], tuple(burn["dv_rtn_ms"]))]
    with_burn, _ = dynamics.propagate([1, 2], pair["true_gcrf_start"], T0, tca.timestamp() + 60.0, pair["params"],
                                      burns=burns)
    without, _ = dynamics.propagate([1, 2], pair["true_gcrf_start"], T0, tca.timestamp() + 60.0, pair["params"])
    _, r, _ = with_burn.at([tca.timestamp()])
    _, r_plain, _ = without.at([tca.timestamp()])
    assert np.linalg.norm(r[0, 0] - r_geometry[0, 0]) * 1000.0 < 5.0  # m
    assert np.linalg.norm(r[1, 0] - r_geometry[1, 0]) * 1000.0 < 5.0
    assert 15.0 < np.linalg.norm(r_plain[0, 0] - r_geometry[0, 0]) < 30.0  # km
    assert burn["distance_at_tca_without_burn_m"] > 10_000.0 and abs(pair["achieved_miss_m"] - 150.0) < 5.0
    with pytest.raises(ValueError, match="between --start and the TCA"):
        design_true_conjunction(START, tca, 150.0, 11, burn_h=4.0)


@pytest.mark.parametrize("hours, seed", [(1.3, 7), (2.9, 11), (4.55, 23)])
def test_the_true_pair_misses_by_the_designed_distance(hours, seed):
    """The injected pair's true closest approach (the simulator's force model, the harsher sky's weather) is
    the designed 150 m to within a centimetre or so, whatever the TCA: the truth starts from the designed
    states themselves, not from the secondary's element set (which meets them to 1 m only)."""
    from sda.sim.conjunction import design_true_conjunction
    from sda.sim.weather import Weather

    tca = START + dt.timedelta(hours=hours)
    pair = design_true_conjunction(START, tca, 150.0, seed, Weather(seed, None))
    assert abs(pair["achieved_miss_m"] - 150.0) < 0.05, pair["achieved_miss_m"]
    assert abs(dt.datetime.fromisoformat(pair["achieved_tca"].replace("Z", "+00:00")) - tca) < dt.timedelta(seconds=0.5)


def test_the_simulator_lists_the_designed_burn_and_no_drawn_one_of_the_pair(tmp_path):
    cfg = SimConfig(start=START, end=START + dt.timedelta(minutes=20), landing=tmp_path / "landing",
                    catalog_out=tmp_path / "catalog.tle", objects=5, seed=3, manoeuvre_share=1.0, manoeuvre_rate=50.0,
                    inject_conjunction=True, tca=START + dt.timedelta(minutes=50), conjunction_burn_h=0.5)
    result = simulate(cfg)
    listed = json.loads(next((tmp_path / "landing").rglob("*.events.json")).read_text())["manoeuvres"]
    of_pair = [b for b in listed if b["norad_id"] in (99901, 99902)]
    assert [(b["norad_id"], b["kind"], b["dv_rtn_ms"]) for b in of_pair] == [(99901, "designed", [0.0, 1.0, 0.0])]
    assert of_pair[0]["t_unix"] == (START + dt.timedelta(minutes=20)).timestamp()
    assert any(b["norad_id"] not in (99901, 99902) for b in listed)  # the others still burn
    assert result.injected["burn"]["hours_before_tca"] == 0.5
    with pytest.raises(ValueError, match="needs --inject-conjunction"):
        SimConfig(start=START, end=START + dt.timedelta(hours=1), conjunction_burn_h=1.0).validate()
