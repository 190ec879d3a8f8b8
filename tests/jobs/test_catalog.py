"""jobs/catalog.py on tiny files: good element sets merged by (norad_id, epoch), bad ones quarantined,
reruns change nothing, a missing file is a clear error."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
from pathlib import Path

import pytest

from sda import runtime, screening
from sda.tables import TABLES, ensure_tables

EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)


def load_job():
    return importlib.import_module("jobs.catalog")  # jobs/ is a package on pytest's path


def args(run_id, path=None):
    return argparse.Namespace(start=EPOCH, end=EPOCH + dt.timedelta(hours=1), run_id=run_id, file=str(path) if path else None)


def tle(norad_id, epoch=EPOCH, altitude=700.0):
    return screening.tle_from_elements(norad_id, epoch, altitude, 0.001, 98.0, 10.0 * norad_id, 0.0, 5.0 * norad_id)


def corrupt_checksum(line):
    return line[:-1] + str((int(line[-1]) + 1) % 10)


def write_file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_catalog_load_quarantines_bad_records_and_is_idempotent(spark, settings, tmp_path):
    job = load_job()
    ensure_tables(spark, settings)
    good = [tle(n) for n in (1001, 1002, 1003)]
    bad_checksum = tle(1004)
    text = "\n".join(
        [f"SAT {i}\n{l1}\n{l2}" for i, (l1, l2) in enumerate(good)]
        + ["BROKEN CHECKSUM", bad_checksum[0], corrupt_checksum(bad_checksum[1])]
        + ["ORPHAN", tle(1005)[0]]
    ) + "\n"
    path = write_file(tmp_path / "cat" / "one.tle", text)

    metrics = job.run(spark, settings, args("r1", path))
    assert metrics["element_sets"] == 3 and metrics["inserted"] == 3 and metrics["quarantined"] == 2
    catalog = TABLES["catalog"].read(spark, settings)
    rows = {r["norad_id"]: r for r in catalog.collect()}
    assert sorted(rows) == [1001, 1002, 1003]
    assert rows[1001]["name"] == "SAT 0" and rows[1001]["line1"] == good[0][0]
    assert rows[1001]["epoch"].replace(tzinfo=dt.timezone.utc) == EPOCH
    # 700 km mean altitude, e = 0.001: perigee/apogee ~ 700 -/+ 7 km (give or take the few km
    # between the TLE's Kozai mean motion and SGP4's Brouwer semi-major axis)
    assert rows[1001]["perigee_km"] == pytest.approx(693.0, abs=5.0)
    assert rows[1001]["apogee_km"] == pytest.approx(707.0, abs=5.0)
    # apogee - perigee = 2 a e = 2 x ~7075 km x 0.001
    assert rows[1001]["apogee_km"] - rows[1001]["perigee_km"] == pytest.approx(14.15, abs=0.02)
    quarantine = TABLES["quarantine"].read(spark, settings).where("stage = 'catalog'").collect()
    reasons = sorted(r["reason"] for r in quarantine)
    assert len(reasons) == 2
    assert any("checksum" in r for r in reasons) and any("without its partner" in r for r in reasons)

    again = job.run(spark, settings, args("r2", path))
    assert again["inserted"] == 0
    assert TABLES["catalog"].read(spark, settings).count() == 3
    assert TABLES["quarantine"].read(spark, settings).where("stage = 'catalog'").count() == 2

    # a newer epoch of one object is kept beside the old one (history by epoch)
    newer = tle(1001, EPOCH + dt.timedelta(hours=6))
    path2 = write_file(tmp_path / "cat" / "two.tle", f"{newer[0]}\n{newer[1]}\n")
    assert job.run(spark, settings, args("r3", path2))["inserted"] == 1
    epochs = [r["epoch"] for r in TABLES["catalog"].read(spark, settings).where("norad_id = 1001").orderBy("epoch").collect()]
    assert len(epochs) == 2 and epochs[1] - epochs[0] == dt.timedelta(hours=6)


def test_sgp4_refused_element_set_is_quarantined(spark, settings, tmp_path):
    job = load_job()
    ensure_tables(spark, settings)
    l1, l2 = tle(2001)
    # eccentricity field " 0010000" -> "9990000" (0.999): SGP4 accepts the text but not the orbit;
    # fix the checksum so only SGP4 objects
    bad2 = l2[:26] + "9990000" + l2[33:68]
    bad2 += str(sum(int(c) if c.isdigit() else (1 if c == "-" else 0) for c in bad2) % 10)
    path = write_file(tmp_path / "cat" / "sgp4.tle", f"{l1}\n{bad2}\n")
    metrics = job.run(spark, settings, args("r1", path))
    assert metrics["element_sets"] == 0 and metrics["quarantined"] == 1
    [row] = TABLES["quarantine"].read(spark, settings).where("stage = 'catalog'").collect()
    assert "SGP4" in row["reason"]
    assert row["raw"].decode().startswith(l1)


def test_missing_file_is_a_clear_error(spark, settings, tmp_path):
    job = load_job()
    ensure_tables(spark, settings)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        job.run(spark, settings, args("r1", tmp_path / "nope.tle"))
    with pytest.raises(FileNotFoundError, match=str(settings.catalog_file)):
        job.run(spark, settings, args("r1"))


def test_checksum():
    job = load_job()
    line = "1 25544U 98067A   20194.88612269 -.00002218  00000-0 -31515-4 0  9992"
    assert job.tle_checksum_ok(line)
    assert not job.tle_checksum_ok(corrupt_checksum(line))
    assert runtime.RUN_ID_RE.match("r1")
