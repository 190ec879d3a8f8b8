"""ingest of CSSI space-weather files: each file once (bronze ``space_weather_lines``, a record per line), its
3-hour intervals MERGEd into ``silver.space_weather`` where the newest issue wins per interval, whatever order
the files come in, a bad line quarantined with why, and what the run received in its metrics."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from jobs import ingest
from sda.lake.tables import TABLES
from sda.pipeline import space_weather

START, END = "2026-11-21T06:00:00Z", "2099-01-01T00:00:00Z"
A_PATH, B_PATH = "space_weather/SW-20261121T0600Z.txt", "space_weather/SW-20261121T0900Z.txt"

OBS_20 = ("2026 11 20 2636  8 20 23 17 13 10 13 17 20 133   7   9   6   5   4   5   6   7   6 0.3 1  78 110.0 0 "
          "111.0 107.6 112.9 113.7 108.2")


def _cssi(updated: str, daily: list[str]) -> bytes:
    lines = ["DATATYPE CssiSpaceWeather", "VERSION 1.2", f"UPDATED {updated} UTC",
             "# yy mm dd BSRN ND Kp Kp Kp Kp Kp Kp Kp Kp Sum Ap  Ap  Ap  Ap  Ap  Ap  Ap  Ap  Avg Cp C9 ISN F10.7 Q "
             "Ctr81 Lst81 F10.7 Ctr81 Lst81",
             "NUM_OBSERVED_POINTS 1", "BEGIN OBSERVED", OBS_20, "END OBSERVED", "",
             f"NUM_DAILY_PREDICTED_POINTS {len(daily)}", "BEGIN DAILY_PREDICTED", *daily, "END DAILY_PREDICTED"]
    return ("\n".join(lines) + "\n").encode()


# Issued at 06:00: the 21st's first two intervals observed (Kp 3o, 4-), the rest of the 21st and the 22nd
# forecast quiet (1+). 14 lines.
A = _cssi("2026 Nov 21 06:00:00", [
    "2026 11 21 2636  9 30 37 13 13 13 13 13 13 145  15  22   5   5   5   5   5   5   8 0.3 2  78 105.0   "
    "110.7 107.5 107.8 113.5 108.2",
    "2026 11 22 2636 10 13 13 13 13 13 13 13 13 104   5   5   5   5   5   5   5   5   5 0.2 1  78 105.0   "
    "110.7 107.4 107.9 113.5 108.2",
])
# Issued at 09:00, after a storm's onset: 06-09 on the 21st observed at Kp 7+ (ap 179), the 22nd now forecast
# at Kp 4o; its line 14 (0-based 13) has a Kp of 9.5. 15 lines.
B_BAD = ("2026 11 23 2636 11 40 40 95 40 40 40 40 40 375  27  27  27  27  27  27  27  27  27 0.9 4  78 105.0   "
         "110.7 107.4 107.9 113.5 108.2")
B = _cssi("2026 Nov 21 09:00:00", [
    "2026 11 21 2636  9 30 37 73 13 13 13 13 13 205  15  22 179   5   5   5   5   5  30 1.4 6  78 105.0   "
    "110.7 107.5 107.8 113.5 108.2",
    "2026 11 22 2636 10 40 40 40 40 40 40 40 40 320  27  27  27  27  27  27  27  27  27 0.9 4  78 105.0   "
    "110.7 107.4 107.9 113.5 108.2",
    B_BAD,
])
B_REASON = "CSSI line 14: kp3 = 95: Kp x 10 outside 0-90 (Kp 0-9)"

# (interval start, Kp, ap, observed, issued, section, source file, line), worked out by hand from the files
KP_20, AP_20 = [2.0, 7 / 3, 5 / 3, 4 / 3, 1.0, 4 / 3, 5 / 3, 2.0], [7, 9, 6, 5, 4, 5, 6, 7]


def _day(day: int, kps, aps, observed: int, issued: str, section: str, path: str, line: int) -> list[tuple]:
    return [(f"2026-11-{day}T{3 * i:02d}:00", kps[i], aps[i], i < observed, issued, section, path, line)
            for i in range(8)]


AFTER_A = (_day(20, KP_20, AP_20, 8, "2026-11-21T06:00", "OBSERVED", A_PATH, 6)
           + _day(21, [3.0, 11 / 3] + [4 / 3] * 6, [15, 22] + [5] * 6, 2, "2026-11-21T06:00", "DAILY_PREDICTED",
                  A_PATH, 11)
           + _day(22, [4 / 3] * 8, [5] * 8, 0, "2026-11-21T06:00", "DAILY_PREDICTED", A_PATH, 12))
NEWEST = (_day(20, KP_20, AP_20, 8, "2026-11-21T09:00", "OBSERVED", B_PATH, 6)
          + _day(21, [3.0, 11 / 3, 22 / 3] + [4 / 3] * 5, [15, 22, 179] + [5] * 5, 3, "2026-11-21T09:00",
                 "DAILY_PREDICTED", B_PATH, 11)
          + _day(22, [4.0] * 8, [27] * 8, 0, "2026-11-21T09:00", "DAILY_PREDICTED", B_PATH, 12))
SUMMARY_B = {"files": 1, "newest_issue": "2026-11-21T09:00:00Z", "interval": [START, END], "observed_intervals": 1,
             "max_observed_kp": 22 / 3, "storm_observed": True, "max_forecast_kp": 4.0}


def _land(settings, rel: str, data: bytes, mtime: float) -> Path:
    path = settings.landing / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))
    return path


def _run(spark, settings, run_id):
    return ingest.main(["--start", START, "--end", END, "--run-id", run_id], settings=settings, spark=spark)


def _table(spark, settings) -> list[tuple]:
    from pyspark.sql import functions as F

    when = "yyyy-MM-dd'T'HH:mm"  # the session time zone is UTC
    df = TABLES["space_weather"].read(spark, settings).select(
        F.date_format("interval_start", when), "kp", "ap", "observed", F.date_format("issued", when), "section",
        "source_file", "record_no")
    return sorted(tuple(r) for r in df.collect())


def _ledger(spark, settings) -> list[tuple]:
    return sorted((r["file_path"], r["sensor_kind"], r["records"], r["quarantined"], r["status"])
                  for r in TABLES["ingested_files"].read(spark, settings).collect())


def _quarantine(spark, settings) -> list[tuple]:
    return sorted((r["source_file"], r["record_no"], r["reason"], bytes(r["raw"]))
                  for r in TABLES["quarantine"].read(spark, settings).collect())


def test_a_newer_issue_overrides_forecasts_and_a_rerun_takes_nothing(spark, settings):
    _land(settings, A_PATH, A, 1.8e9)
    first = _run(spark, settings, "run-1")
    assert (first["files_new"], first["records_in"], first["records_out"], first["quarantined"]) == (1, 14, 14, 0)
    assert _table(spark, settings) == AFTER_A
    # from 06:00 on, A observed nothing yet; it forecasts 1+ (4/3) everywhere
    assert first["space_weather"] == {"files": 1, "newest_issue": "2026-11-21T06:00:00Z", "interval": [START, END],
                                      "observed_intervals": 0, "max_observed_kp": None, "storm_observed": False,
                                      "max_forecast_kp": 4 / 3}

    _land(settings, B_PATH, B, 1.8e9 + 10_800)
    second = _run(spark, settings, "run-2")
    assert (second["files_new"], second["records_in"], second["records_out"], second["quarantined"]) == (1, 15, 14, 1)
    assert _table(spark, settings) == NEWEST  # the storm observed at 06-09, the 22nd's forecast B's
    assert second["space_weather"] == SUMMARY_B
    assert _quarantine(spark, settings) == [(B_PATH, 13, B_REASON, B_BAD.encode())]
    lines = sorted((r["source_file"], r["record_no"], r["payload"], r["sensor_kind"])
                   for r in TABLES["space_weather_lines"].read(spark, settings).collect())
    assert len(lines) == 14 + 14 and [r[1] for r in lines if r[0] == B_PATH] == [n for n in range(15) if n != 13]
    assert (B_PATH, 2, "UPDATED 2026 Nov 21 09:00:00 UTC", "space_weather") in lines
    assert (B_PATH, 8, "", "space_weather") in lines  # a blank line is a record of the file too
    frame = space_weather.read_pandas(spark, settings, dt.datetime(2026, 11, 21, 7, tzinfo=dt.timezone.utc),
                                      dt.datetime(2026, 11, 21, 12, tzinfo=dt.timezone.utc))
    assert [(t.isoformat(), kp, ap, observed) for t, kp, ap, observed in
            frame[["interval_start", "kp", "ap", "observed"]].itertuples(index=False)] == [
        ("2026-11-21T06:00:00+00:00", 22 / 3, 179, True), ("2026-11-21T09:00:00+00:00", 4 / 3, 5, False)]

    before = TABLES["space_weather"].read(spark, settings).collect()
    again = _run(spark, settings, "run-3")
    assert (again["files_new"], again["records_in"], again["files_already_ingested"]) == (0, 0, 2)
    assert "space_weather" not in again  # no file received: nothing to report
    assert sorted(map(tuple, TABLES["space_weather"].read(spark, settings).collect())) == sorted(map(tuple, before))
    assert TABLES["space_weather_lines"].read(spark, settings).count() == 28
    assert _ledger(spark, settings) == [(A_PATH, "space_weather", 14, 0, "done"),
                                        (B_PATH, "space_weather", 14, 1, "done")]


def test_the_older_issue_landing_last_changes_nothing_even_through_a_crash(spark, settings, monkeypatch):
    _land(settings, B_PATH, B, 1.8e9)
    assert _run(spark, settings, "run-1")["space_weather"] == SUMMARY_B
    _land(settings, A_PATH, A, 1.8e9 + 10_800)

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash before the ledger says done")

    monkeypatch.setattr(ingest, "mark_done", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        _run(spark, settings, "run-2")
    monkeypatch.undo()
    assert _table(spark, settings) == NEWEST  # A merged before the crash: older everywhere, it replaced nothing
    retry = _run(spark, settings, "run-2-retry")
    assert (retry["files_replayed"], retry["files_new"], retry["records_in"]) == (1, 0, 14)
    assert _table(spark, settings) == NEWEST
    # what the run received: A's issue; what the table says of the run's interval: B's observation
    assert retry["space_weather"] == {**SUMMARY_B, "newest_issue": "2026-11-21T06:00:00Z"}
    assert _quarantine(spark, settings) == [(B_PATH, 13, B_REASON, B_BAD.encode())]
    assert TABLES["space_weather_lines"].read(spark, settings).count() == 28
