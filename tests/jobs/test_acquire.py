"""Stage ``acquire`` on Spark (issue 39, points 3 and 5): objects in no catalogue found among the uncorrelated
observations, numbered provisionally, correlated and screened afterwards; the same numbers in a split run
(but for one body at most); nothing lost, nothing doubled.

The scenario: 40 generated objects for 6 hours, 10 % of them left out of the catalogue, and a fresh launch
of 6 objects (550 km, 53 deg, a few kilometres apart), numerical truth. The flow ingest .. acquire runs once
over everything, and in a second lakehouse over the first 3 hours' files, then the rest; a copy of the second
lakehouse from before its first acquire has that acquire killed twice and retried.

Oracles: the simulator's truth (which body each landed measurement is of), and for the split, the single run.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter

import pytest

from sda.lake.tables import TABLES
from sda.pipeline import faults
from sda.pipeline.provisional import FIRST_NUMBER, NUMBERS
from sda.sim.simulate import SimConfig, simulate
from tests import chain

# two full flows with acquisition, and a killed and retried acquire: minutes
pytestmark = pytest.mark.slow

SIM_START = dt.datetime(2026, 11, 20, 0, 0, tzinfo=chain.UTC)
SIM_END = SIM_START + dt.timedelta(hours=6)
FLOW = ("ingest", "normalize", "dedup", "correlate", "fuse", "acquire")
SCREEN = ["--screen-start", chain.iso(SIM_END), "--horizon-h", "3"]
# The kinder sky, not the default: in the harsher sky this scenario's search joins two of the launch's bodies
# (99916 with 34 of 99914's observations, 90 % of one body where 95 % is asked) and the split run numbers 6 objects
# differently where 2 are allowed (docs/acquisition.md, "In the harsher sky"). Every pipeline setting is the service's.
SKY = "kind"


@pytest.fixture(scope="module")
def runs(module_spark, make_settings, tmp_path_factory):
    staging = tmp_path_factory.mktemp("acquire-staging")
    one, two = make_settings("acquire-one"), make_settings("acquire-split")
    result = simulate(SimConfig(start=SIM_START, end=SIM_END, landing=staging, catalog_out=one.catalog_file,
                                objects=40, seed=3, tle_age_days=(0.5, 3.0), truth="numerical",
                                uncatalogued_share=0.1, launch=True, late_rate=0.0, reorder_rate=0.0,
                                sky=SKY))
    files = chain.twin_lakehouses(module_spark, one, two, staging)
    chain.land(files, staging, one.landing)
    single = chain.run_flow(module_spark, one, "run-1", FLOW)
    single["conjunction"] = chain.run_stage(module_spark, one, "conjunction", "run-1", SCREEN)
    early = [f for f in files if chain.file_time(f) < SIM_START + dt.timedelta(hours=3)]
    chain.land(early, staging, two.landing)
    first = chain.run_flow(module_spark, two, "run-1", FLOW[:-1])
    crashed = make_settings("acquire-crashed")
    shutil.copytree(two.lakehouse, crashed.lakehouse, dirs_exist_ok=True)  # a lakehouse is a directory
    first["acquire"] = chain.run_stage(module_spark, two, "acquire", "run-1")
    killed = _killed_and_retried(module_spark, crashed, two)
    chain.land(sorted(set(files) - set(early)), staging, two.landing)
    second = chain.run_flow(module_spark, two, "run-2", FLOW)
    events = json.loads(next(staging.rglob("*.events.json")).read_text())
    body = chain.truth_bodies(result)
    orbits = {o["norad_id"]: o for o in map(json.loads, next(staging.rglob("*.orbits.jsonl")).read_text().splitlines())}
    return one, two, single, (first, second), events, body, orbits, killed


# where the acquire stage is killed, in the order its attempts die: between its registry and catalogue writes and
# the move of the observations it fitted, then after its writes (the search and the upkeep) but before its progress
KILL_POINTS = ("acquire:after-catalogue", "acquire:before-progress")
ACQUIRE_TABLES = ("correlated", "uncorrelated", "catalog", "provisional_objects")


def _killed_and_retried(spark, crashed, uninterrupted) -> list[str]:
    """The acquire stage killed at each of :data:`KILL_POINTS` in ``crashed`` (a copy of ``uninterrupted``'s
    lakehouse from before its acquire), then retried as Airflow would (same run id): the differences of the
    tables it writes from the uninterrupted run's."""
    try:
        for point in KILL_POINTS:
            faults.KILL_AT.clear()
            faults.KILL_AT.add(point)
            with pytest.raises(faults.SimulatedCrash, match=point):
                chain.run_stage(spark, crashed, "acquire", "run-1")
    finally:
        faults.KILL_AT.clear()
    chain.run_stage(spark, crashed, "acquire", "run-1")
    return chain.differences(chain.snapshot(spark, crashed, ACQUIRE_TABLES),
                             chain.snapshot(spark, uninterrupted, ACQUIRE_TABLES))


def _truth_of(spark, settings, body, where: str) -> list[tuple[int, int]]:
    """(norad_id, true body) of the correlated rows matching ``where``."""
    rows = TABLES["correlated"].read(spark, settings).where(where).collect()
    return [(int(r["norad_id"]), chain.body_of(body, r.asDict())) for r in rows]


def _provisional(spark, settings) -> list[dict]:
    return [r.asDict() for r in TABLES["provisional_objects"].read(spark, settings).collect()]


def test_the_uncatalogued_objects_are_acquired_each_once(spark, runs):
    """Each provisional object's observations are of one uncatalogued body, no body got two numbers, and every
    hidden body the radars saw in three passes or more is acquired."""
    one, _, single, _, events, body, *_ = runs
    hidden = set(events["uncatalogued"])
    found = _provisional(spark, one)
    assert single["acquire"]["acquired"] == len(found) > 0
    pairs = _truth_of(spark, one, body, f"norad_id >= {FIRST_NUMBER} AND norad_id < {FIRST_NUMBER + NUMBERS}")
    per_object: dict[int, Counter] = {}
    for norad, true_id in pairs:
        per_object.setdefault(norad, Counter())[true_id] += 1
    bodies = {}
    for norad, counts in per_object.items():
        true_id, n = counts.most_common(1)[0]
        assert true_id in hidden and n >= 0.95 * sum(counts.values()), (norad, counts)
        assert true_id not in bodies, f"{true_id} acquired twice: {bodies.get(true_id)} and {norad}"
        bodies[true_id] = norad
    assert {r["norad_id"] for r in found} == set(per_object)
    assert all(FIRST_NUMBER <= r["norad_id"] < FIRST_NUMBER + NUMBERS and r["status"] == "active" for r in found)
    launch = [n for n in hidden if n >= 99911]
    assert sum(n in bodies for n in launch) >= len(launch) - 1, (launch, bodies)


def test_nothing_lost_nothing_doubled(spark, runs):
    for settings in runs[:2]:
        chain.assert_each_observation_once(spark, settings)


def test_killed_and_retried_equals_an_uninterrupted_run(runs):
    """Killed after its registry and catalogue writes (before the fitted observations moved), then after all its
    writes (before its progress), and retried: the same objects, numbers, element sets and moved rows as the
    uninterrupted run of the same data, nothing doubled (the tables are compared row by row)."""
    assert runs[7] == []


def test_the_split_run_gives_the_same_numbers(spark, runs):
    """The same bodies get the same provisional numbers when the data come in two parts; in the second part,
    the objects acquired in the first are correlated by the catalogue as any other."""
    one, two, _, (first, second), _, body, *_ = runs
    a = {r["norad_id"]: r["founder"] for r in _provisional(spark, one)}
    b = {r["norad_id"]: r["founder"] for r in _provisional(spark, two)}
    assert first["acquire"]["acquired"] > 0
    assert set(a) & set(b) and all(a[n] == b[n] for n in set(a) & set(b))
    # the search is sequential over a lookback: a split may link one tracklet differently (measured: 1 body of
    # 11 numbered differently), so at most one body may differ; the rest have the same number and founder
    assert len(set(a) ^ set(b)) <= 2, (a, b)
    early = set(first["acquire"]["acquired_ids"])
    where = f"norad_id IN ({','.join(map(str, early))})"
    acquired = _truth_of(spark, two, body, where + " AND correlate_run_id LIKE 'acquired:%'")
    later = _truth_of(spark, two, body, where + " AND correlate_run_id NOT LIKE 'acquired:%'")
    assert later, "no observation of an acquired object was correlated to it afterwards"
    of = {n: Counter(t for m, t in acquired if m == n).most_common(1)[0][0] for n in early}
    right = sum(of[n] == t for n, t in later)
    assert right >= 0.95 * len(later), (right, len(later))


def test_the_screening_includes_acquired_objects(spark, runs):
    one = runs[0]
    ids = {r["norad_id"] for r in _provisional(spark, one)}
    screened = {int(r["norad_id"]) for r in TABLES["screening_state"].read(spark, one).collect()}
    catalog = {int(r["norad_id"]) for r in TABLES["catalog"].read(spark, one).where("source = 'provisional'").collect()}
    assert ids and ids <= catalog and ids <= screened


def test_a_provisional_object_the_catalogue_learns_is_merged(spark, runs):
    """The catalogue later loads the true element set of one acquired body under its real number: the next run
    merges the provisional object into it, moves its observations there and keeps the registry row; the
    provisional number leaves the catalogue that correlation and screening use. (Runs last: it changes
    the single lakehouse.)"""
    from sda.lake.orbits import active_catalog

    one, _, _, _, _, body, known, _ = runs
    pairs = _truth_of(spark, one, body, f"norad_id >= {FIRST_NUMBER} AND norad_id < {FIRST_NUMBER + NUMBERS}")
    of = {n: Counter(t for m, t in pairs if m == n).most_common(1)[0][0] for n, _ in pairs}
    chosen = sorted((known[b]["age_days"], n, b) for n, b in of.items() if b in known)
    assert chosen, (of, sorted(known)[:5])
    _, provisional_id, body_id = chosen[0]
    path = one.catalog_file.parent / "later.tle"
    path.write_text("\n".join(known[body_id]["true"]) + "\n")
    before = {r["obs_id"] for r in TABLES["correlated"].read(spark, one).where(f"norad_id = {provisional_id}")
              .collect()}
    chain.run_stage(spark, one, "catalog", "catalog-2", ["--file", str(path)])
    out = chain.run_stage(spark, one, "acquire", "run-merge")
    assert out["merged_ids"] == {provisional_id: body_id}
    row = [r for r in _provisional(spark, one) if r["norad_id"] == provisional_id][0]
    assert row["status"] == "merged" and row["merged_into"] == body_id and row["founder"]
    after = {r["obs_id"]: r for r in TABLES["correlated"].read(spark, one).where(
        f"obs_id IN ({','.join(repr(i) for i in sorted(before))})").collect()}
    assert set(after) == before
    assert all(r["norad_id"] == body_id and r["correlate_run_id"].startswith(f"merged:{provisional_id}:")
               for r in after.values())
    assert provisional_id not in {int(r["norad_id"]) for r in active_catalog(spark, one).collect()}
