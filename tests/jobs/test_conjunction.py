"""jobs/conjunction.py on a ten-object synthetic catalogue with a constructed close pair: the Spark
chain finds what the single-process chain (itself checked against brute force in
tests/include/test_screening.py) finds; reruns give the same rows and emit no outbox file twice."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json

import pytest

from sda import schemas, screening
from sda.tables import TABLES, ensure_tables

UTC = dt.timezone.utc
EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
ELEMENTS = {  # as tests/include/test_screening.py: 101/102 cross at the node at EPOCH ~160 m apart
    101: (700.0, 0.0001, 98.0, 0.0, 0.0, 0.0),
    102: (702.0, 0.0001, 53.0, -0.01, 0.0, -0.02),
    201: (800.0, 0.0010, 60.0, 40.0, 0.0, 10.0),
    202: (800.0, 0.0012, 60.0, 40.0, 0.0, 10.01),
    301: (550.0, 0.0002, 53.0, 100.0, 0.0, 200.0),
    302: (560.0, 0.0003, 97.6, 250.0, 30.0, 40.0),
    303: (1200.0, 0.0100, 87.0, 10.0, 80.0, 300.0),
    401: (35786.0, 0.0002, 0.05, 0.0, 0.0, 120.0),
    402: (20000.0, 0.7000, 63.4, 270.0, 270.0, 0.0),
    403: (400.0, 0.0005, 51.6, 300.0, 0.0, 0.0),
}


def load_job():
    return importlib.import_module("jobs.conjunction")  # jobs/ is a package on pytest's path


def args(run_id):
    return argparse.Namespace(start=EPOCH - dt.timedelta(hours=4), end=EPOCH - dt.timedelta(hours=3), run_id=run_id,
                              screen_start=None, horizon_h=6.0)


def write_catalog(spark, settings):
    rows = []
    for norad_id, elements in ELEMENTS.items():
        l1, l2 = screening.tle_from_elements(norad_id, EPOCH, *elements)
        [sat] = screening.satrecs_from_lines([l1], [l2])
        a, e, re = sat.a * sat.radiusearthkm, sat.ecco, sat.radiusearthkm
        rows.append((norad_id, f"OBJ {norad_id}", EPOCH, l1, l2, a * (1 - e) - re, a * (1 + e) - re, "test", EPOCH, "test"))
    # an older, far-away element set of 101: screening must use the newest epoch only
    l1, l2 = screening.tle_from_elements(101, EPOCH - dt.timedelta(days=3), 1500.0, 0.0001, 10.0, 0.0, 0.0, 0.0)
    rows.append((101, "OBJ 101", EPOCH - dt.timedelta(days=3), l1, l2, 1500.0, 1500.0, "test", EPOCH, "test"))
    spark.createDataFrame(rows, schemas.CATALOG).write.format("delta").mode("append").save(TABLES["catalog"].path(settings))


def snapshot(spark, settings, table):
    return sorted(tuple(v for k, v in r.asDict().items() if k != "run_id") for r in TABLES[table].read(spark, settings).collect())


def test_conjunction_job_matches_reference_and_reruns_emit_nothing_twice(spark, settings):
    job = load_job()
    ensure_tables(spark, settings)
    write_catalog(spark, settings)

    metrics = job.run(spark, settings, args("run-1"))
    assert metrics["objects"] == 10 and metrics["pairs_all"] == 45
    assert metrics["pairs_all"] >= metrics["pairs_altitude"] >= metrics["pairs_grid"] >= metrics["pairs_linear"] >= 2

    # the same chain in one process (checked against brute force in the include tests)
    ids = sorted(ELEMENTS)
    sats = screening.satrecs_from_lines(*zip(*[screening.tle_from_elements(n, EPOCH, *ELEMENTS[n]) for n in ids]))
    start = (EPOCH - dt.timedelta(hours=3)).timestamp()
    reference, ref_metrics = screening.screen(ids, sats, start, start + 6 * 3600, 5.0, 60.0)
    for key in ("pairs_altitude", "pairs_grid", "pair_steps_grid", "pairs_linear", "pair_steps_linear"):
        assert metrics[key] == ref_metrics[key], key

    rows = {r["event_id"]: r for r in TABLES["conjunctions"].read(spark, settings).collect()}
    expected = {screening.event_id(e.primary_id, e.secondary_id, e.tca_unix): e for e in reference.itertuples()}
    assert set(rows) == set(expected) and len(rows) == metrics["events"] >= 5
    for eid, row in rows.items():
        ref = expected[eid]
        assert (row["primary_id"], row["secondary_id"]) == (ref.primary_id, ref.secondary_id)
        assert row["tca"].replace(tzinfo=UTC).timestamp() == pytest.approx(ref.tca_unix, abs=1e-3)
        assert row["miss_m"] == pytest.approx(ref.miss_km * 1000, abs=1e-3)
        assert row["primary_id"] < row["secondary_id"] and row["miss_m"] < 5000
        assert row["screen_start"] == (EPOCH - dt.timedelta(hours=3)).replace(tzinfo=None)

    # exactly one approach under the 1 km alert distance: 101/102 at the node, ~160 m -> red
    [alert] = TABLES["alerts"].read(spark, settings).collect()
    assert (alert["primary_id"], alert["secondary_id"]) == (101, 102)
    assert alert["level"] == "red" and alert["miss_m"] < 200 and "alert distance" in alert["reason"]
    assert abs(alert["tca"].replace(tzinfo=UTC) - EPOCH) < dt.timedelta(seconds=30)
    files = sorted(settings.outbox.glob("*.json"))
    assert [f.name for f in files] == [f"alert-{alert['alert_id']}.json"] and alert["outbox_file"] == str(files[0])
    message = json.loads(files[0].read_text())
    assert message["alert_id"] == alert["alert_id"] and message["level"] == "red"
    mtime = files[0].stat().st_mtime_ns
    assert metrics["alerts"] == 1 and metrics["outbox_written"] == 1

    before = {t: snapshot(spark, settings, t) for t in ("conjunctions", "alerts")}
    again = job.run(spark, settings, args("run-2"))
    assert again["events"] == metrics["events"] and again["outbox_written"] == 0 and again["outbox_unchanged"] == 1
    assert {t: snapshot(spark, settings, t) for t in ("conjunctions", "alerts")} == before
    assert sorted(settings.outbox.iterdir()) == files  # no temp files left, no second message
    assert files[0].stat().st_mtime_ns == mtime


def test_alert_levels_and_atomic_outbox(tmp_path):
    job = load_job()
    assert job.alert_level(150.0, 1.0)[0] == "red"
    assert job.alert_level(250.0, 1.0)[0] == "yellow"
    path = tmp_path / "box" / "a.json"
    assert job.write_outbox_file(path, "x\n") is True
    assert job.write_outbox_file(path, "x\n") is False
    assert job.write_outbox_file(path, "y\n") is True and path.read_text() == "y\n"
    assert [p.name for p in path.parent.iterdir()] == ["a.json"]


def test_cli_arguments():
    job = load_job()
    ns = job.parser().parse_args(["--start", "2026-11-21T00:00Z", "--end", "2026-11-21T01:00Z", "--run-id", "r",
                                  "--screen-start", "2026-11-21T02:00:00Z", "--horizon-h", "6"])
    ns = job._validate(ns)
    assert ns.screen_start == dt.datetime(2026, 11, 21, 2, tzinfo=UTC) and ns.horizon_h == 6.0
    with pytest.raises(ValueError, match="--horizon-h"):
        job._validate(argparse.Namespace(screen_start=None, horizon_h=-1.0))
    with pytest.raises(ValueError, match="screen-start"):
        job._validate(argparse.Namespace(screen_start="yesterday", horizon_h=None))
