"""normalize: bronze -> silver observations (SI units, registry join, physical limits, obs_id)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from pathlib import Path

import pytest

from jobs import normalize
from sda.lake.tables import BRONZE_BY_KIND, TABLES, ensure_tables
from tests.seed import append_rows

PROJECT_ROOT = Path(__file__).resolve().parents[2]
UTC = dt.timezone.utc
INGEST = dt.datetime(2026, 11, 21, 6, 5, 0, tzinfo=UTC)
T1 = dt.datetime(2026, 11, 21, 6, 0, 1, 250000, tzinfo=UTC)
T1_MS = 1795240801250  # T1 in unix milliseconds


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def det(t="2026-11-21T06:00:01.250Z", range_km=1234.5, az_deg=180.0, el_deg=30.0, rr_km_s=-2.5):
    return {"t": t, "range_km": range_km, "az_deg": az_deg, "el_deg": el_deg, "rr_km_s": rr_km_s, "snr_db": 15.0}


def frame(sensor="EGLIN", dets=(), number=1, sent="2026-11-21T06:00:05.000Z"):
    return json.dumps({"sensor": sensor, "frame": number, "sent": sent, "dets": list(dets)})


def optical(station="SOCORRO", ts="2026-11-21T06:00:01.250000Z", ra="6.0", dec="-45.0"):
    return f"{station},{ts},{ra},{dec},11.2,2.0"


def beacon(src="ISL-01", t_ms=T1_MS, x=7000000, y=0, z=0, vx=0, vy=7500, vz=0, seq=1):
    return f"BCN|src={src}|seq={seq}|t_ms={t_ms}|x_m={x}|y_m={y}|z_m={z}|vx_ms={vx}|vy_ms={vy}|vz_ms={vz}"


def write_bronze(spark, settings, kind, source_file, payloads, ingest_time=INGEST, batch=1, wire_version=("1.0", None)):
    """Append bronze rows as ingest would (bronze_id from the file name and record number; ``wire_version``: the
    format version and added fields of every row)."""
    ensure_tables(spark, settings)
    rows = [(_sha(f"{source_file}:{no}"), kind, source_file, no, payload, ingest_time, ingest_time.date(), "ingest-run",
             batch, *wire_version)
            for no, payload in enumerate(payloads)]
    append_rows(spark, settings, BRONZE_BY_KIND[kind], rows)
    return [r[0] for r in rows]


def _run(spark, settings, run_id="norm-1"):
    return normalize.main(["--start", "2026-11-21T06:00:00Z", "--end", "2026-11-21T06:15:00Z", "--run-id", run_id],
                          settings=settings, spark=spark)


def _silver(spark, settings):
    return sorted((r.asDict() for r in TABLES["observations"].read(spark, settings).collect()),
                  key=lambda r: (r["sensor_id"], r["event_time"], r["obs_id"]))


def _quarantine(spark, settings):
    rows = TABLES["quarantine"].read(spark, settings).where("stage = 'normalize'").collect()
    return sorted((r["source_file"], r["record_no"], r["item_no"], r["reason"]) for r in rows)


def _utc(ts: dt.datetime) -> dt.datetime:
    return ts.astimezone(UTC)  # collected timestamps are naive local time


def _conserved(m):
    assert m["records_in"] == m["records_out"] + m["quarantined"] + m["duplicates"]


def test_unit_conversion_per_kind(spark, settings):
    radar_ids = write_bronze(spark, settings, "radar", "radar/f.jsonl", [frame(dets=[det()])])
    write_bronze(spark, settings, "optical", "optical/o.csv", [optical()])
    write_bronze(spark, settings, "isl", "isl/b.bcn", [beacon()])

    metrics = _run(spark, settings)

    assert (metrics["records_in"], metrics["records_out"], metrics["quarantined"],
            metrics["duplicates"]) == (3, 3, 0, 0)
    radar, isl, socorro = _silver(spark, settings)  # sorted by sensor id: EGLIN, ISL-01, SOCORRO
    assert (radar["sensor_id"], radar["sensor_kind"]) == ("EGLIN", "radar")
    assert radar["range_m"] == 1234500.0
    assert radar["az_rad"] == pytest.approx(math.pi, rel=1e-12)
    assert radar["el_rad"] == pytest.approx(math.pi / 6, rel=1e-12)
    assert radar["range_rate_ms"] == -2500.0
    assert _utc(radar["event_time"]) == T1 and radar["event_date"] == dt.date(2026, 11, 21)
    assert _utc(radar["ingest_time"]) == INGEST
    assert (radar["site_lat_deg"], radar["site_lon_deg"], radar["site_alt_m"]) == (30.57222, -86.21444, 34.0)
    assert (radar["bronze_id"], radar["source_file"], radar["run_id"]) == (radar_ids[0], "radar/f.jsonl", "norm-1")
    assert radar["ra_rad"] is None and radar["x_m"] is None

    assert socorro["sensor_kind"] == "optical"
    assert socorro["ra_rad"] == pytest.approx(math.pi / 2, rel=1e-12)
    assert socorro["dec_rad"] == pytest.approx(-math.pi / 4, rel=1e-12)
    assert _utc(socorro["event_time"]) == T1
    assert socorro["site_alt_m"] == 1510.0 and socorro["range_m"] is None

    assert isl["sensor_kind"] == "isl"
    state = (isl["x_m"], isl["y_m"], isl["z_m"], isl["vx_ms"], isl["vy_ms"], isl["vz_ms"])
    assert state == (7e6, 0.0, 0.0, 0.0, 7500.0, 0.0)
    assert _utc(isl["event_time"]) == T1
    assert isl["site_lat_deg"] is None

    # obs_id = sha256 of sensor|kind|event time in microseconds|wire values as landed (12 slots)
    wire_values = ["1234.5", "180.0", "30.0", "-2.5"] + [""] * 8
    assert radar["obs_id"] == _sha("|".join(["EGLIN", "radar", "1795240801250000", *wire_values]))


def test_each_impossible_value_is_quarantined_with_its_reason(spark, settings):
    late = "2026-11-21T06:10:01.000Z"  # ingest 06:05:00 + 300 s clock skew = 06:10:00
    dets = [
        det(),                                  # 0 good
        det(range_km=0.0),                      # 1
        det(range_km=100001.0),                 # 2
        det(el_deg=91.0),                       # 3
        det(el_deg=0.5),                        # 4 Eglin's minimum elevation is 1 deg
        det(az_deg=360.0),                      # 5
        det(az_deg=-1.0),                       # 6
        det(rr_km_s=12.5),                      # 7
        det(t=late),                            # 8
        det(range_km=100000.0, el_deg=1.0, az_deg=0.0, rr_km_s=-12.0),  # 9 every limit, inclusive: good
        det(t="2026-11-21T04:04:59.000Z"),      # 10 two hours old: kept (lateness is judged by event-time
                                                #    windows downstream)
    ]
    write_bronze(spark, settings, "radar", "radar/f.jsonl", [frame(dets=dets), frame(sensor="NOPE", dets=[det()])])
    write_bronze(spark, settings, "optical", "optical/o.csv", [
        optical(dec="91.0"), optical(ra="24.0"), optical(ra="-0.5"), optical(station="EGLIN"),
        optical(ra="23.9", dec="-90"),
    ])
    write_bronze(spark, settings, "isl", "isl/b.bcn", [
        beacon(x=6000000), beacon(x=100001000), beacon(vy=12500), beacon(src="ISL-09"), beacon(x=6378000, vy=12000),
    ])

    metrics = _run(spark, settings)

    assert _quarantine(spark, settings) == sorted([
        ("radar/f.jsonl", 0, 1, "range 0.0 km outside (0, 100000]"),
        ("radar/f.jsonl", 0, 2, "range 100001.0 km outside (0, 100000]"),
        ("radar/f.jsonl", 0, 3, "elevation 91.0 deg outside [-90, 90]"),
        ("radar/f.jsonl", 0, 4, "elevation 0.5 deg below the site minimum 1.0 deg"),
        ("radar/f.jsonl", 0, 5, "azimuth 360.0 deg outside [0, 360)"),
        ("radar/f.jsonl", 0, 6, "azimuth -1.0 deg outside [0, 360)"),
        ("radar/f.jsonl", 0, 7, "range rate 12.5 km/s beyond 12 km/s"),
        ("radar/f.jsonl", 0, 8,
         "event time 2026-11-21 06:10:01 is more than 300.0 s after ingest time 2026-11-21 06:05:00"),
        ("radar/f.jsonl", 1, 0, "unknown sensor id NOPE"),
        ("optical/o.csv", 0, None, "declination 91.0 deg outside [-90, 90]"),
        ("optical/o.csv", 1, None, "right ascension 24.0 h outside [0, 24)"),
        ("optical/o.csv", 2, None, "right ascension -0.5 h outside [0, 24)"),
        ("optical/o.csv", 3, None, "sensor EGLIN is a radar sensor but reported in optical format"),
        ("isl/b.bcn", 0, None, "position magnitude 6000.000 km outside [6378, 100000]"),
        ("isl/b.bcn", 1, None, "position magnitude 100001.000 km outside [6378, 100000]"),
        ("isl/b.bcn", 2, None, "speed 12.500 km/s beyond 12 km/s"),
        ("isl/b.bcn", 3, None, "unknown sensor id ISL-09"),
    ])
    # the good detections of the bad frame are kept: a bad detection refuses only itself
    kept = sorted((r["sensor_id"], r["range_m"], r["x_m"], r["dec_rad"]) for r in _silver(spark, settings))
    assert kept == [("EGLIN", 1234500.0, None, None), ("EGLIN", 1234500.0, None, None),
                    ("EGLIN", 100000000.0, None, None), ("ISL-01", None, 6378000.0, None),
                    ("SOCORRO", None, None, pytest.approx(-math.pi / 2))]
    assert (metrics["records_in"], metrics["records_out"], metrics["quarantined"],
            metrics["duplicates"]) == (22, 5, 17, 0)
    _conserved(metrics)
    raw = TABLES["quarantine"].read(spark, settings).where("source_file = 'isl/b.bcn' AND record_no = 3").first()["raw"]
    assert bytes(raw) == beacon(src="ISL-09").encode()


def test_radar_frames_that_do_not_parse_are_quarantined_once_and_empty_frames_give_no_rows(spark, settings):
    # ingest refuses such records, but bronze is the replayable log: normalize must not trust it
    dets = [None, det(t="not a time"), det()]
    write_bronze(spark, settings, "radar", "radar/f.jsonl", [
        "{not json",                                               # 0: one row, the frame's reason
        frame(dets=[]),                                            # 1: a frame with no detections: no row
        json.dumps({"sensor": "EGLIN", "frame": 3, "dets": dets}),  # 2: a null detection, a bad time, a good one
        json.dumps({"frame": 4, "dets": [det()]}),                 # 3: no sensor: the frame is refused whole
    ])

    metrics = _run(spark, settings)

    assert _quarantine(spark, settings) == sorted([
        ("radar/f.jsonl", 0, None, "unparseable radar frame"),
        ("radar/f.jsonl", 2, 0, "missing or unparseable detection time"),
        ("radar/f.jsonl", 2, 1, "missing or unparseable detection time"),
        ("radar/f.jsonl", 3, None, "unparseable radar frame"),
    ])
    [good] = _silver(spark, settings)
    assert (good["sensor_id"], good["range_m"], _utc(good["event_time"])) == ("EGLIN", 1234500.0, T1)
    assert (metrics["records_in"], metrics["records_out"], metrics["quarantined"],
            metrics["duplicates"]) == (5, 1, 4, 0)


def test_redelivered_copies_share_obs_id_and_count_as_duplicates(spark, settings):
    # the same detection re-sent in another frame (other frame number, send time and file), and a
    # second detection that is new
    write_bronze(spark, settings, "radar", "radar/a.jsonl", [frame(dets=[det()])])
    write_bronze(spark, settings, "optical", "optical/o.csv", [optical(), optical()])  # a row repeated in one file
    first = _run(spark, settings, "norm-1")
    assert (first["records_in"], first["records_out"], first["duplicates"]) == (3, 2, 1)

    resent = frame(number=99, sent="2026-11-21T06:01:00.000Z", dets=[det(), det(t="2026-11-21T06:00:11.250Z")])
    write_bronze(spark, settings, "radar", "radar/b.jsonl", [resent])
    second = _run(spark, settings, "norm-2")
    assert (second["records_in"], second["records_out"], second["quarantined"], second["duplicates"]) == (2, 1, 0, 1)
    _conserved(second)

    silver = _silver(spark, settings)
    eglin = [r for r in silver if r["sensor_id"] == "EGLIN"]
    assert [(_utc(r["event_time"]), r["source_file"]) for r in eglin] == [
        (T1, "radar/a.jsonl"), (T1 + dt.timedelta(seconds=10), "radar/b.jsonl"),
    ]
    assert len([r for r in silver if r["sensor_id"] == "SOCORRO"]) == 1


def test_retry_after_crash_before_progress_commit_is_a_no_op(spark, settings, monkeypatch):
    write_bronze(spark, settings, "radar", "radar/a.jsonl", [frame(dets=[det(), det(range_km=-1.0)])])
    write_bronze(spark, settings, "isl", "isl/b.bcn", [beacon(), beacon(seq=2)])  # seq is not a measurement

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash before commit_progress")

    monkeypatch.setattr(normalize.runtime, "commit_progress", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        _run(spark, settings, "norm-1")
    monkeypatch.undo()
    before = (_silver(spark, settings), _quarantine(spark, settings))

    retry = _run(spark, settings, "norm-1-retry")
    assert (retry["records_in"], retry["records_out"], retry["quarantined"], retry["duplicates"]) == (4, 2, 1, 1)
    assert (_silver(spark, settings), _quarantine(spark, settings)) == before
    assert len(before[0]) == 2 and len(before[1]) == 1
    assert all(r["run_id"] == "norm-1" for r in before[0])

    nothing = _run(spark, settings, "norm-2")
    assert nothing["records_in"] == 0
