"""The new-object search (sda.orbit.acquisition.tracklets, sda.orbit.acquisition.search) and its numbering and
upkeep rules
(sda.pipeline.provisional), against independent oracles:

* tracklets: three bodies on Keplerian orbits written here (two of them 3 km apart along-track, as a fresh
  launch flies) seen by one radar with noise: each tracklet is one body's;
* the search: the simulator's numerical truth (its own force model) for a fresh launch and uncatalogued
  bodies, the observations labelled by the truth: every object found is one body's, no body twice, and
  every hidden LEO body seen in three passes or more is found, its orbit within a few km of the truth;
* numbering, retirement and merging: hand-computed cases.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from sgp4.api import WGS72, Satrec
from sgp4.exporter import export_tle

from sda.orbit import frames
from sda.orbit.acquisition.search import AcquireSettings, acquire
from sda.orbit.acquisition.tracklets import tracklets
from sda.orbit.estimation.measurements import registry_sigmas
from sda.orbit.sensors import load_sensors
from sda.pipeline import provisional
from tests.include.orbit.estimation.test_iod import kepler

UTC = dt.timezone.utc
# the search as the stage runs it: measurements modelled with their light time, which every simulated sky carries
WITH_LIGHT_TIME = AcquireSettings(config=dataclasses.replace(AcquireSettings().config, light_time=True))
T0 = dt.datetime(2026, 11, 20, tzinfo=UTC).timestamp()
SITE = (39.13611, -121.35139, 110.0)  # Beale


def _radar_rows(positions: dict[int, list], times, rng) -> pd.DataFrame:
    rows = []
    for body, states in positions.items():
        for t, (r, v) in zip(times, states):
            r_e, v_e = frames.teme_to_ecef(np.asarray(r) / 1000.0, np.asarray(v) / 1000.0, t)
            rg, az, el, rr = frames.razel(r_e, v_e, *SITE)
            rows.append({"obs_id": f"{body}-{t:.0f}", "body": body, "sensor_id": "BEALE", "sensor_kind": "radar",
                         "event_time": pd.Timestamp(t, unit="s", tz="UTC"),
                         "range_m": float(rg) * 1000 + rng.normal(0, 20),
                         "az_rad": float(az) + rng.normal(0, 2.6e-4), "el_rad": float(el) + rng.normal(0, 2.6e-4),
                         "range_rate_ms": float(rr) * 1000 + rng.normal(0, 2),
                         "site_lat_deg": SITE[0], "site_lon_deg": SITE[1], "site_alt_m": SITE[2]})
    return pd.DataFrame(rows).sample(frac=1.0, random_state=1).reset_index(drop=True)


def test_tracklets_keep_bodies_a_few_km_apart_separate():
    """Two bodies 3 km apart along-track and a third elsewhere, one radar, 10 s cadence for 4 minutes."""
    rng = np.random.default_rng(7)
    a, inc = 6378e3 + 550e3, math.radians(53.0)
    n = math.sqrt(3.986004418e14 / a**3)
    site = frames.site_teme(*SITE, T0 + 120.0)  # overhead two minutes in
    lat, lon = math.asin(site[2] / np.linalg.norm(site)), math.atan2(site[1], site[0])
    u = math.asin(math.sin(lat) / math.sin(inc))
    node = lon - math.atan2(math.cos(inc) * math.sin(u), math.cos(u))
    m0 = u - n * 120.0
    elements = {1: (a, 0.0, inc, node, 0.0, m0), 2: (a, 0.0, inc, node, 0.0, m0 + 3000.0 / a),
                3: (a + 300e3, 0.0, inc + 0.3, node + 0.1, 0.0, m0)}
    times = T0 + np.arange(0.0, 240.0, 10.0)
    positions = {b: [kepler(*el[:5], el[5], t - T0) for t in times] for b, el in elements.items()}
    obs = _radar_rows(positions, times, rng)
    labels = tracklets(obs)
    by_label = pd.Series(obs["body"].to_numpy()).groupby(labels).agg(lambda s: set(s))
    assert all(len(bodies) == 1 for bodies in by_label), by_label.to_dict()
    assert sorted(Counter(b for bodies in by_label for b in bodies).values()) == [1, 1, 1]


@pytest.fixture(scope="module")
def launch(tmp_path_factory):
    """3 hours of a simulated sky with a fresh launch and 10 % of 40 objects uncatalogued: the hidden bodies'
    observations (by the truth's labels), the hidden bodies, and the LEO ones among them."""
    from sda.sim import scoring
    from sda.sim.simulate import SimConfig, simulate

    work = tmp_path_factory.mktemp("acquire-sim")
    start = dt.datetime(2026, 11, 20, tzinfo=UTC)
    result = simulate(SimConfig(start=start, end=start + dt.timedelta(hours=3), landing=work / "landing",
                                catalog_out=work / "catalog.tle", objects=40, seed=3, tle_age_days=(0.5, 3.0),
                                truth="numerical", uncatalogued_share=0.1, launch=True, late_rate=0.0,
                                reorder_rate=0.0, sky="kind"))
    hidden = set(json.loads(next(work.rglob("*.events.json")).read_text())["uncatalogued"])
    regimes = {o["norad_id"]: o["regime"] for o in map(json.loads, next(work.rglob("*.orbits.jsonl")).read_text()
                                                       .splitlines())}
    leo = {n for n in hidden if regimes.get(n, "LEO") == "LEO"}  # the launch (not in the orbits file) is LEO
    obs = scoring.landed_observations(result, load_sensors())
    obs = obs[obs["true_id"].isin(hidden)].copy()
    obs["event_time"] = pd.to_datetime(obs["event_time"]).dt.tz_localize("UTC")
    return obs.reset_index(drop=True), hidden, leo


def test_the_search_finds_each_hidden_body_once(launch):
    from sda.orbit.manoeuvre.detection import pass_index

    obs, hidden, leo = launch
    found = acquire(obs, registry_sigmas(load_sensors()), WITH_LIGHT_TIME)
    body = dict(zip(obs["obs_id"], obs["true_id"]))
    bodies = []
    for new in found:
        counts = Counter(body[i] for i in new.obs_ids)
        main, n = counts.most_common(1)[0]
        assert n >= 0.9 * len(new.obs_ids), counts
        bodies.append(main)
        assert body[new.founder] == main  # the number's seed is an observation of the body
    assert len(bodies) == len(set(bodies)), Counter(bodies)
    t = (obs["event_time"] - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    passes = pd.Series(pass_index(t, obs["sensor_id"].to_numpy(), 600.0, 1200.0)).groupby(obs["true_id"]).nunique()
    seen3 = {int(b) for b, p in passes.items() if p >= 3 and int(b) in leo}
    assert seen3 and seen3 <= set(bodies), (seen3, bodies)


def test_provisional_numbers_come_from_the_founder():
    digest = hashlib.sha256(b"radar/X#1#0").hexdigest()
    expected = 80000 + int(digest[:12], 16) % 10000
    assert provisional.number_for("radar/X#1#0", set()) == expected
    # taken: the next free one, wrapping at the end of the range
    assert provisional.number_for("radar/X#1#0", {expected}) == 80000 + (expected - 80000 + 1) % 10000
    assert provisional.number_for("radar/X#1#0", set(range(80000, 90000)) - {80000}) == 80000


def _row(norad: int, seen_h: float, acquired_h: float = 0.0, founder: str = "f") -> dict:
    at = dt.datetime(2026, 11, 20, tzinfo=UTC)
    return {"norad_id": norad, "founder": founder, "status": "active", "last_seen": at + dt.timedelta(hours=seen_h),
            "acquired_epoch": at + dt.timedelta(hours=acquired_h), "first_obs": at, "merged_into": None}


def test_retirement_after_the_unseen_time():
    now = dt.datetime(2026, 11, 21, 1, tzinfo=UTC)
    rows = [_row(80001, 12.0), _row(80002, 13.5), _row(80003, 2.0)]
    seen = {80003: dt.datetime(2026, 11, 20, 14, tzinfo=UTC)}  # seen since: kept
    out = provisional.retirements(rows, seen, now, 12.0, "r")
    assert [r["norad_id"] for r in out] == [80001] and out[0]["status"] == "retired"


def _tle(norad: int, mean_anomaly_deg: float) -> tuple[str, str]:
    sat = Satrec()
    sat.sgp4init(WGS72, "i", norad, 26987.0, 1e-4, 0.0, 0.0, 0.001, 0.0, math.radians(53.0),
                 math.radians(mean_anomaly_deg), 15.2 * 2 * math.pi / 1440.0, math.radians(40.0))
    return export_tle(sat)


def test_merging_into_the_catalogued_object_it_follows():
    """A provisional set 0.05 deg of mean anomaly (~6 km) from a catalogued one merges into it; one 1 deg away
    (~120 km) does not; of two provisional sets of one body, the younger merges into the elder."""
    epoch = dt.datetime(1949, 12, 31, tzinfo=UTC) + dt.timedelta(days=26987.0)
    catalogue = {12345: _tle(12345, 10.0)}
    sets = {80001: _tle(80001, 10.05), 80002: _tle(80002, 11.0), 80003: _tle(80003, 11.01)}
    rows = [{**_row(80001, 0), "acquired_epoch": epoch, "last_seen": epoch},
            {**_row(80002, 0), "acquired_epoch": epoch, "last_seen": epoch},
            {**_row(80003, 0), "acquired_epoch": epoch + dt.timedelta(minutes=1), "last_seen": epoch}]
    merged = provisional.merges(rows, {**sets, **catalogue}, catalogue, 25.0, "r")
    out = {r["norad_id"]: r["merged_into"] for r in merged}
    assert out == {80001: 12345, 80003: 80002}
    # seen beside each other by one sensor at one time: two bodies (a launch), never merged
    beside = pd.DataFrame({"sensor_id": ["EGLIN", "EGLIN", "EGLIN", "BEALE"], "event_time": [1.0, 1.0, 2.0, 1.0],
                           "norad_id": [80003, 80002, 80003, 80001]})
    distinct = provisional.co_observed_rows(beside, [80003])
    assert distinct == {frozenset((80002, 80003))}
    merged = provisional.merges(rows, {**sets, **catalogue}, catalogue, 25.0, "r", distinct)
    assert {r["norad_id"]: r["merged_into"] for r in merged} == {80001: 12345}
