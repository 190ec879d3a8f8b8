"""jobs/catalog.py on tiny files: good element sets merged by (norad_id, epoch), bad ones quarantined,
reruns change nothing, a missing file is a clear error."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import pytest

from jobs import catalog as job
from sda.lake.tables import TABLES, ensure_tables
from sda.orbit import screening
from sda.pipeline import arguments

EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)


def args(run_id, path=None):
    return argparse.Namespace(start=EPOCH, end=EPOCH + dt.timedelta(hours=1), run_id=run_id,
                              file=str(path) if path else None)


def tle(norad_id, epoch=EPOCH, altitude=700.0):
    return screening.tle_from_elements(norad_id, epoch, altitude, 0.001, 98.0, 10.0 * norad_id, 0.0, 5.0 * norad_id)


def corrupt_checksum(line):
    return line[:-1] + str((int(line[-1]) + 1) % 10)


def write_file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_catalog_load_quarantines_bad_records_and_is_idempotent(spark, settings, tmp_path):
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
    history = TABLES["catalog"].read(spark, settings).where("norad_id = 1001").orderBy("epoch")
    epochs = [r["epoch"] for r in history.collect()]
    assert len(epochs) == 2 and epochs[1] - epochs[0] == dt.timedelta(hours=6)


def test_sgp4_refused_element_set_is_quarantined(spark, settings, tmp_path):
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
    ensure_tables(spark, settings)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        job.run(spark, settings, args("r1", tmp_path / "nope.tle"))
    with pytest.raises(FileNotFoundError, match=str(settings.catalog_file)):
        job.run(spark, settings, args("r1"))


def test_checksum():
    line = "1 25544U 98067A   20194.88612269 -.00002218  00000-0 -31515-4 0  9992"
    assert job.tle_checksum_ok(line)
    assert not job.tle_checksum_ok(corrupt_checksum(line))
    assert arguments.RUN_ID_RE.match("r1")


# --- element sets as Space-Track and CelesTrak write them (checksums computed once and pasted) -----

# VANGUARD 1 with Space-Track's blank-padded catalogue number; epoch 2020 day 287.20333880 =
# 2020-10-13T04:52:48.472320 (leap year: 274 days to the end of September; 0.2033388 d = 17568.47232 s)
VANGUARD = ("1     5U 58002B   20287.20333880 -.00000016  00000-0 -22483-4 0  9998",
            "2     5  34.2443 225.5254 1845686 162.2516 205.2356 10.84869164218149")
VANGUARD_EPOCH = dt.datetime(2020, 10, 13, 4, 52, 48, 472320, tzinfo=dt.timezone.utc)
# Alpha-5: T = 27 (A = 10 ... H = 17, J = 18, ..., N = 22, P = 23, ..., T = 27), Z = 33
T1234 = ("1 T1234U 24901B   24100.50000000  .00001000  00000-0  20000-4 0  9995",
         "2 T1234  97.5000 200.0000 0010000  45.0000 315.0000 14.80000000 10008")
Z9999 = ("1 Z9999U 24902C   24100.50000000  .00001000  00000-0  20000-4 0  9992",
         "2 Z9999  70.0000 300.0000 0020000  10.0000 350.0000 14.20000000 10007")
A0001 = ("1 A0001U 24900A   24100.50000000  .00001000  00000-0  20000-4 0  9995",
         "2 A0001  53.0000 120.0000 0001500  90.0000 270.0000 15.06000000 10001")
ALPHA5_EPOCH = dt.datetime(2024, 4, 9, 12, 0, tzinfo=dt.timezone.utc)  # 2024 day 100.5
ISS = ("1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927",
       "2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537")
CELESTRAK_URL = "https://celestrak.org/NORAD/elements/gp.php?GROUP=active&FORMAT=tle"


def utc(ts):
    return ts.replace(tzinfo=dt.timezone.utc)


def test_checksum_of_space_track_and_alpha5_lines():
    for line in (*VANGUARD, *T1234, *Z9999, *A0001):
        assert job.tle_checksum_ok(line), line
        assert not job.tle_checksum_ok(corrupt_checksum(line))
    # blank padding weighs what zero padding does: the canonical stored line keeps its checksum
    assert job.tle_checksum_ok(VANGUARD[0].replace("1     5U", "1 00005U"))
    assert not job.tle_checksum_ok(VANGUARD[0][:68])  # too short to have one


def test_epoch_history_across_files_and_reloads(spark, settings, tmp_path):
    ensure_tables(spark, settings)
    later = EPOCH + dt.timedelta(days=1, hours=3)
    ids = (3001, 3002, 3003)
    first = write_file(tmp_path / "cat" / "first.tle", "".join(f"{l1}\n{l2}\n" for l1, l2 in (tle(n) for n in ids)))
    second = write_file(tmp_path / "cat" / "second.tle",
                        "".join(f"{l1}\n{l2}\n" for l1, l2 in (tle(n, later, 710.0) for n in ids)))
    assert job.run(spark, settings, args("h1", first))["inserted"] == 3
    assert job.run(spark, settings, args("h2", second))["inserted"] == 3
    rows = TABLES["catalog"].read(spark, settings).collect()
    history = {n: sorted(utc(r["epoch"]) for r in rows if r["norad_id"] == n) for n in ids}
    assert history == {n: [EPOCH, later] for n in ids}
    # each epoch keeps its own element set
    by_key = {(r["norad_id"], utc(r["epoch"])): r for r in rows}
    assert by_key[(3001, later)]["line1"] == tle(3001, later, 710.0)[0]
    assert by_key[(3001, EPOCH)]["line1"] == tle(3001)[0]
    # reloading either file, or both epochs at once, adds nothing
    for n, path in enumerate((first, second)):
        again = job.run(spark, settings, args(f"h-again-{n}", path))
        assert again["inserted"] == 0 and again["duplicates"] == 3
    both = write_file(tmp_path / "cat" / "both.tle", first.read_text() + second.read_text())
    assert job.run(spark, settings, args("h-both", both))["inserted"] == 0
    assert TABLES["catalog"].read(spark, settings).count() == 6


def test_space_track_and_alpha5_lines_load_and_checksums_are_still_checked(spark, settings, tmp_path):
    ensure_tables(spark, settings)
    text = (
        "\ufeff0 VANGUARD 1\r\n" + "\r\n".join(VANGUARD) + "\r\n"
        "0 ALPHA T\r\n" + "\r\n".join(T1234) + "  \r\n"
        "0 ALPHA Z\r\n" + "\r\n".join(Z9999) + "\r\n"
        "0 BAD CHECKSUM\r\n" + A0001[0] + "\r\n" + corrupt_checksum(A0001[1]) + "\r\n"
        "0 TRUNCATED\r\n" + ISS[0][:68] + "\r\n" + ISS[1] + "\r\n"
    )
    path = tmp_path / "cat" / "spacetrack.3le"
    path.parent.mkdir(parents=True)
    path.write_bytes(text.encode("utf-8"))
    metrics = job.run(spark, settings, args("st1", path))
    assert (metrics["inserted"], metrics["quarantined"]) == (3, 2)
    rows = {r["norad_id"]: r for r in TABLES["catalog"].read(spark, settings).collect()}
    assert sorted(rows) == [5, 271234, 339999]
    assert rows[5]["name"] == "VANGUARD 1" and utc(rows[5]["epoch"]) == VANGUARD_EPOCH
    assert rows[5]["line1"] == VANGUARD[0].replace("1     5U", "1 00005U")  # canonical, same checksum
    assert rows[271234]["name"] == "ALPHA T" and rows[271234]["line1"] == T1234[0]
    assert utc(rows[339999]["epoch"]) == ALPHA5_EPOCH
    quarantined = TABLES["quarantine"].read(spark, settings).where("stage = 'catalog'")
    reasons = sorted(r["reason"] for r in quarantined.collect())
    assert any("norad 100001: TLE checksum mismatch" in r for r in reasons)
    assert any("line 14: TLE line 1 has 68 characters, not 69" in r for r in reasons)


def celestrak_argv(run_id, *extra):
    end = EPOCH + dt.timedelta(hours=1)
    return ["--start", EPOCH.isoformat(), "--end", end.isoformat(), "--run-id", run_id, *extra]


def catalog_run_metrics(spark, settings):
    return TABLES["run_metrics"].read(spark, settings).where("stage = 'catalog'").count()


def test_celestrak_group_is_kept_in_landing_and_loaded(spark, settings, monkeypatch):
    # CelesTrak's FORMAT=tle: names padded to 24 characters, CRLF line ends
    served = "".join(f"{name:<24}\r\n{l1}\r\n{l2}\r\n" for name, (l1, l2) in
                     (("ISS (ZARYA)", ISS), ("VANGUARD 1", VANGUARD), ("ALPHA T", T1234)))
    asked = []
    monkeypatch.setattr(job, "fetch_celestrak",
                        lambda group, fmt="tle", timeout_s=30.0: asked.append((group, fmt)) or served)
    metrics = job.main(celestrak_argv("ct1", "--celestrak", "active"), settings=settings, spark=spark)
    assert asked == [("active", "tle")]
    [kept] = (settings.landing / "catalog").iterdir()
    assert kept.name.startswith("celestrak-active-") and kept.suffix == ".tle"
    assert kept.read_bytes() == served.encode("utf-8")  # the raw answer, replayable
    assert metrics["file"] == str(kept) and metrics["celestrak_url"] == CELESTRAK_URL
    assert metrics["inserted"] == 3 and metrics["quarantined"] == 0
    rows = {r["norad_id"]: r for r in TABLES["catalog"].read(spark, settings).collect()}
    assert sorted(rows) == [5, 25544, 271234]
    assert rows[25544]["name"] == "ISS (ZARYA)" and rows[25544]["source"] == str(kept)
    # replaying the kept file changes nothing
    assert job.run(spark, settings, args("ct2", kept))["inserted"] == 0


def test_celestrak_offline_fails_clearly_and_writes_nothing(spark, settings, monkeypatch, capsys):
    import urllib.error
    import urllib.request

    def offline(url, *a, **k):
        raise urllib.error.URLError(OSError(101, "Network is unreachable"))

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(SystemExit) as stop:
        job.main(celestrak_argv("off1", "--celestrak", "active"), settings=settings, spark=spark)
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert CELESTRAK_URL in err and "URLError" in err and "Network is unreachable" in err
    assert not (settings.landing / "catalog").exists()
    assert TABLES["catalog"].read(spark, settings).count() == 0
    assert TABLES["quarantine"].read(spark, settings).count() == 0
    assert catalog_run_metrics(spark, settings) == 0

    # an answer without element sets (CelesTrak's reply to an unknown group) is refused the same way
    monkeypatch.setattr(job, "fetch_celestrak", lambda group, fmt="tle", timeout_s=30.0: "No GP data found")
    with pytest.raises(SystemExit) as stop:
        job.main(celestrak_argv("off2", "--celestrak", "no-such-group"), settings=settings, spark=spark)
    assert stop.value.code == 1 and "No GP data found" in capsys.readouterr().err
    assert not (settings.landing / "catalog").exists() and catalog_run_metrics(spark, settings) == 0


def test_file_and_celestrak_are_alternatives(spark, settings, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        job.main(celestrak_argv("x1", "--file", str(tmp_path / "a.tle"), "--celestrak", "active"),
                 settings=settings, spark=spark)
    assert stop.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    for bad in ("active/../x", "act ive", "ümlaut", ""):
        with pytest.raises(SystemExit) as stop:
            job.main(celestrak_argv("x2", "--celestrak", bad), settings=settings, spark=spark)
        assert stop.value.code == 2 and "letters, digits and '-'" in capsys.readouterr().err
    with pytest.raises(arguments.StageArgumentError, match="alternatives"):
        job.run(spark, settings, argparse.Namespace(**vars(args("x3", tmp_path / "a.tle")), celestrak="active"))
