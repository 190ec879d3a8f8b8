"""Stage ``fuse`` on Spark with manoeuvring objects (issue 39, points 2 and 5): gold ``manoeuvres`` against
the simulator's burns, the post-burn orbit, held observations re-associated without loss or double
counting, and the same detections whatever the run split.

The scenario: 40 objects for 12 hours (two 6-hour arc windows), half of them burning twice a day on
average (0.05-2 m/s, numerical truth), and the injected pair, whose primary reaches its encounter with the
secondary (150 m, 1.5 h after the data) through a designed 1 m/s burn at 07:00 (sda.sim.conjunction),
catalogue element sets 0.5-3 days old (the pair's fresh, the primary's pre-burn), no late or reordered
deliveries (so a split by landing time changes nothing upstream). The flow ingest .. fuse runs once over
everything, and in a second lakehouse over the first 8 hours' files, then the rest, its second ``fuse``
killed at its first re-association write and retried; both then run ``fuse`` until it has nothing left to
do (a re-association is a change of ``correlated`` that the next run refits to the same orbit). The second
window is decided again against the first's fused orbits (sda.pipeline.reassociation).

Oracles: the truth's burns (time, delta-v) and bodies (which object each landed measurement is of) and, for
the split, the single run.
"""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest

from sda.lake.tables import TABLES
from sda.orbit.catalog.load import load_catalog
from sda.pipeline import faults
from sda.sim.simulate import SimConfig, simulate
from tests import chain

# two full 12-hour flows with orbit determination and manoeuvre detection: minutes
pytestmark = pytest.mark.slow

SIM_START = dt.datetime(2026, 11, 20, 0, 0, tzinfo=chain.UTC)
SIM_END = SIM_START + dt.timedelta(hours=12)
FLOW = ("ingest", "normalize", "dedup", "correlate", "fuse")
SLACK_S = 120.0
SCREEN = ["--screen-start", chain.iso(SIM_END), "--horizon-h", "3"]
TCA = SIM_END + dt.timedelta(hours=1.5)  # the injected pair's, reached by the primary through a burn at 07:00
# The kinder sky, not the default: in the harsher sky the designed 1 m/s burn of 99901 at 07:00 goes undetected in
# this scenario, and its alert is not the post-burn fit's alone (docs/orbital.md, "In the harsher sky"). Every
# pipeline setting is the service's.
SKY = "kind"


def _settle(spark, settings, name: str) -> list[dict]:
    out = []
    for k in range(3):
        out.append(chain.run_stage(spark, settings, "fuse", f"{name}-settle-{k}"))
        if not out[-1].get("windows"):
            break
    return out


@pytest.fixture(scope="module")
def runs(module_spark, make_settings, tmp_path_factory):
    staging = tmp_path_factory.mktemp("manoeuvre-staging")
    one, two = make_settings("manoeuvre-one"), make_settings("manoeuvre-split")
    result = simulate(SimConfig(start=SIM_START, end=SIM_END, landing=staging, catalog_out=one.catalog_file,
                                objects=40, seed=3, tle_age_days=(0.5, 3.0), manoeuvre_share=0.5,
                                manoeuvre_rate=2.0, late_rate=0.0, reorder_rate=0.0, inject_conjunction=True,
                                tca=TCA, conjunction_burn_h=6.5, sky=SKY))
    files = chain.twin_lakehouses(module_spark, one, two, staging)
    chain.land(files, staging, one.landing)
    single = chain.run_flow(module_spark, one, "run-1", FLOW)["fuse"]
    settle_one = _settle(module_spark, one, "one")
    single["conjunction"] = chain.run_stage(module_spark, one, "conjunction", "run-1", SCREEN)
    early = [f for f in files if chain.file_time(f) < SIM_START + dt.timedelta(hours=8)]
    chain.land(early, staging, two.landing)
    chain.run_flow(module_spark, two, "run-1", FLOW)
    chain.land(sorted(set(files) - set(early)), staging, two.landing)
    chain.run_flow(module_spark, two, "run-2", FLOW[:-1])
    _killed(module_spark, two, "fuse:reassociated-into-correlated")
    chain.run_stage(module_spark, two, "fuse", "run-2")  # the retry, as Airflow runs it
    _settle(module_spark, two, "two")
    burns = json.loads(next(staging.rglob("*.events.json")).read_text())["manoeuvres"]
    body = chain.truth_bodies(result)
    return one, two, burns, single, settle_one, body, result.injected


def _killed(spark, settings, point: str) -> None:
    """The fuse stage killed at ``point`` (which must be reached: the run re-associates)."""
    try:
        faults.KILL_AT.add(point)
        with pytest.raises(faults.SimulatedCrash, match=point):
            chain.run_stage(spark, settings, "fuse", "run-2")
    finally:
        faults.KILL_AT.clear()


def _manoeuvres(spark, settings) -> list[dict]:
    return [r.asDict() for r in TABLES["manoeuvres"].read(spark, settings).collect()]


def _unix(t: dt.datetime) -> float:
    return (t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t).timestamp()


def test_burns_after_the_first_window_are_detected(spark, runs):
    """Every burn of 0.5 m/s or more in the second window (two hours before its end at the latest), of an
    object fused in the first, is in a detection's bracket, with the delta-v close to the truth's."""
    one, _, burns, single, *_ = runs
    found = _manoeuvres(spark, one)
    fused = {int(r["norad_id"]) for r in TABLES["fused_orbits"].read(spark, one)
             .where("status = 'converged' AND window_start < timestamp'2026-11-20 06:00:00'").collect()}
    # after the first window, with two hours left to see it again
    big = [b for b in burns if _unix(SIM_START) + 6 * 3600 <= b["t_unix"] <= _unix(SIM_END) - 2 * 3600
           and b["dv_ms"] >= 0.5 and b["norad_id"] in fused]
    assert big and single["manoeuvres"] >= len(big)
    for burn in big:
        match = [m for m in found if m["norad_id"] == burn["norad_id"]
                 and _unix(m["burn_after"]) - SLACK_S <= burn["t_unix"] <= _unix(m["burn_before"]) + SLACK_S]
        assert match, burn
        assert abs(match[0]["dv_ms"] - burn["dv_ms"]) < 0.35 * burn["dv_ms"] + 0.05, (burn, match[0])


def test_each_detection_names_its_post_burn_orbit(spark, runs):
    one = runs[0]
    fused = {r["fused_id"]: r for r in TABLES["fused_orbits"].read(spark, one).collect()}
    for m in _manoeuvres(spark, one):
        orbit = fused[m["fused_id"]]
        assert orbit["norad_id"] == m["norad_id"] and orbit["window_start"] == m["window_start"]
        assert _unix(m["burn_after"]) <= _unix(m["burn_time"]) <= _unix(m["burn_before"]) <= _unix(m["detected_at"])


def test_nothing_lost_nothing_doubled(spark, runs):
    """Every deduplicated observation is in exactly one of correlated and uncorrelated (re-association
    moves rows, it never copies or drops them), in both lakehouses."""
    for settings in runs[:2]:
        chain.assert_each_observation_once(spark, settings)


def test_the_split_run_gives_the_same_detections_and_associations(spark, runs):
    one, two = runs[0], runs[1]

    def state(settings):
        ids = {(r["norad_id"], r["window_start"], r["seq"]): r["manoeuvre_id"] for r in _manoeuvres(spark, settings)}
        moved = {r["obs_id"]: r["norad_id"] for r in TABLES["correlated"].read(spark, settings)
                 .where("correlate_run_id LIKE 'reassociated:%'").collect()}
        orbits = {(r["norad_id"], r["window_start"]): r["fused_id"]
                  for r in TABLES["fused_orbits"].read(spark, settings).collect()}
        return ids, moved, orbits, _associations(spark, settings)

    a, b = state(one), state(two)
    assert a[0] == b[0]
    assert a[1] == b[1]
    assert a[2] == b[2]
    assert a[3] == b[3]


def _associations(spark, settings) -> dict[str, tuple]:
    """obs_id -> (table, object or the object named as nearest, how it got there: the prefixes of its run id)."""
    out = {r["obs_id"]: ("correlated", r["norad_id"], r["correlate_run_id"].rpartition(":")[0])
           for r in TABLES["correlated"].read(spark, settings).collect()}
    out.update({r["obs_id"]: ("uncorrelated", r["nearest_norad_id"], r["reason"])
                for r in TABLES["uncorrelated"].read(spark, settings).collect()})
    return out


def test_the_second_window_is_decided_again_on_the_first_windows_orbits(spark, runs):
    """Re-association ran (a round for the second window), every move is logged, each observation's last logged
    move is where it is now, and the observations it correlated are of the object it chose, against the truth."""
    one, *_, single, _, body, _ = runs
    figures = single["reassociation"]
    assert figures["rounds"] >= 1 and figures["retested"] > 0 and figures["moved"] > 0, figures
    log = sorted((r.asDict() for r in TABLES["reassociations"].read(spark, one).collect()),
                 key=lambda r: (r["run_id"], r["round"]))
    assert all(_unix(r["window_start"]) >= _unix(SIM_START) + 6 * 3600 for r in log)
    now = _associations(spark, one)
    last = {r["obs_id"]: r for r in log}
    for obs_id, move in last.items():
        table, norad, how = now[obs_id]
        assert table == move["to_status"], move
        if table == "correlated" and how == "gated":
            assert norad == move["to_norad_id"], move
    gated = [r for r in TABLES["correlated"].read(spark, one).where("correlate_run_id LIKE 'gated:%'").collect()]
    truth = [chain.body_of(body, r.asDict()) for r in gated]
    right = sum(1 for r, t in zip(gated, truth) if t is not None and int(t) == r["norad_id"])
    assert gated and right >= 0.99 * len(gated), (right, len(gated))


def test_the_screening_takes_the_post_burn_orbit(spark, runs):
    """An object whose newest usable fused orbit is a post-burn re-fit is screened on that orbit's element
    set, however short its fit (the pre-burn orbit is known wrong)."""
    one = runs[0]
    rows = [r.asDict() for r in TABLES["fused_orbits"].read(spark, one)
            .where("status = 'converged' AND line1 IS NOT NULL").collect()]
    newest: dict[int, dict] = {}
    for r in rows:
        usable = r["epoch_unix"] - r["fit_start_unix"] >= 5400 or r["prior_source"] == "manoeuvre"
        if usable and (r["norad_id"] not in newest or r["window_start"] > newest[r["norad_id"]]["window_start"]):
            newest[r["norad_id"]] = r
    after_burn = {n: r for n, r in newest.items() if r["prior_source"] == "manoeuvre"}
    screened = {int(r["norad_id"]): r["line1"] for r in TABLES["screening_state"].read(spark, one).collect()}
    assert after_burn
    for norad, r in after_burn.items():
        assert screened[norad] == r["line1"], norad


def test_a_settled_rerun_changes_nothing(spark, runs, module_spark):
    one, _, _, _, settle, _, _ = runs
    assert not settle[-1].get("windows")
    before = sorted((r["norad_id"], r["seq"], r["manoeuvre_id"]) for r in _manoeuvres(spark, one))
    again = chain.run_stage(module_spark, one, "fuse", "run-again")
    assert not again.get("windows")
    assert sorted((r["norad_id"], r["seq"], r["manoeuvre_id"]) for r in _manoeuvres(spark, one)) == before


def _sgp4_distance_km(lines: dict, a: int, b: int, times) -> np.ndarray:
    from sgp4.api import WGS72, Satrec

    from sda.orbit import frames

    sats = [Satrec.twoline2rv(*lines[n], WGS72) for n in (a, b)]
    _, r, _ = frames.propagate(sats, np.asarray(times, float))
    return np.linalg.norm(r[0] - r[1], axis=-1)


def test_a_designed_burn_into_a_close_approach_is_alerted_from_the_post_burn_fit(spark, runs):
    """The primary's pre-burn orbit (its catalogue element set, SGP4, the pipeline not asked) passes nowhere near
    the secondary within the screening's horizon; the truth meets it 150 m apart after the burn. The burn is
    detected, and the screening on the post-burn fit finds the close approach near the truth's TCA and alerts it
    (MANEUVERABLE = YES of the primary)."""
    one, *_, injected = runs
    primary, secondary, burn = injected["primary"], injected["secondary"], injected["burn"]
    t_tca = dt.datetime.fromisoformat(injected["achieved_tca"].replace("Z", "+00:00"))
    lines = {e.norad_id: (e.line1, e.line2) for e in load_catalog(one.catalog_file)[0]}
    horizon = _unix(SIM_END) + np.arange(0.0, 3 * 3600.0 + 1.0, 1.0)
    assert injected["achieved_miss_m"] < 200.0 and burn["distance_at_tca_without_burn_m"] > 20_000.0
    assert _sgp4_distance_km(lines, primary, secondary, horizon).min() > 5.0  # the screening threshold
    [found] = [m for m in _manoeuvres(spark, one) if m["norad_id"] == primary]
    assert _unix(found["burn_after"]) - SLACK_S <= burn["t_unix"] <= _unix(found["burn_before"]) + SLACK_S
    assert abs(found["dv_ms"] - 1.0) < 0.35, found
    events = [r.asDict() for r in TABLES["conjunctions"].read(spark, one).collect()
              if {r["primary_id"], r["secondary_id"]} == {primary, secondary}]
    assert events, "the close approach after the burn was not screened"
    event = min(events, key=lambda e: e["miss_m"])
    assert abs(_unix(event["tca"]) - t_tca.timestamp()) < 30.0 and event["miss_m"] < 1000.0, event
    [alert] = [a.asDict() for a in TABLES["alerts"].read(spark, one).collect()
               if {a["primary_id"], a["secondary_id"]} == {primary, secondary}]
    assert alert["level"] in ("red", "yellow"), alert
    assert (alert["p_maneuverable"] if alert["primary_id"] == primary else alert["s_maneuverable"]) is True
