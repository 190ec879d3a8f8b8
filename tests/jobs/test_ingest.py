"""ingest: landing files -> bronze + quarantine, exactly once per (path, sha256), through crashes."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from pathlib import Path

import pytest

from jobs import ingest
from sda.lake.tables import TABLES
from sda.transforms import wire

PROJECT_ROOT = Path(__file__).resolve().parents[2]
START, END = "2026-11-21T06:00:00Z", "2099-01-01T00:00:00Z"

RADAR_OK_0 = ('{"sensor": "EGLIN", "frame": 1, "sent": "2026-11-21T06:00:05.000Z", "dets": ['
              '{"t": "2026-11-21T06:00:01.250Z", "range_km": 1234.5, "az_deg": 180.0, "el_deg": 30.0, '
              '"rr_km_s": -2.5, "snr_db": 18.0}, '
              '{"t": "2026-11-21T06:00:02.250Z", "range_km": 1235.5, "az_deg": 180.5, "el_deg": 30.5, '
              '"rr_km_s": -2.4}]}')
RADAR_BAD_NUMBER = ('{"sensor": "EGLIN", "frame": 2, "sent": "2026-11-21T06:00:15.000Z", "dets": ['
                    '{"t": "2026-11-21T06:00:11.250Z", "range_km": 1234.5, "az_deg": "abc", "el_deg": 30.0, '
                    '"rr_km_s": -2.5}]}')
RADAR_OK_3 = ('{"sensor": "BEALE", "frame": 7, "sent": "2026-11-21T06:00:05.000Z", "dets": ['
              '{"t": "2026-11-21T06:00:03.000Z", "range_km": 900, "az_deg": 10.0, "el_deg": 45.0, "rr_km_s": 1.0}]}')
RADAR_FILE = b"\n".join([RADAR_OK_0.encode(), b"{not json", RADAR_BAD_NUMBER.encode(), RADAR_OK_3.encode(),
                         b"\xff\xfe{}"]) + b"\n\n\n"

OPTICAL_OK = "SOCORRO,2026-11-21T06:00:01.250000Z,6.0,-45.0,11.2,2.0"
OPTICAL_FILE = "\n".join([
    "station,timestamp_utc,ra_hours,dec_deg,vmag,exposure_s",
    OPTICAL_OK,
    "SOCORRO,2026-11-21T06:00:02Z,13.5",
    "MAUI,2026-11-21T06:00:03Z,abc,10.0,11.0,2.0",
]).encode() + b"\r\n"
BAD_HEADER_FILE = b"stn,time,ra,dec\n" + OPTICAL_OK.encode() + b"\n"

ISL_OK = "BCN|src=ISL-01|seq=1|t_ms=1795240801250|x_m=7000000|y_m=0|z_m=0|vx_ms=0|vy_ms=7500|vz_ms=0"
ISL_FILE = "\n".join([ISL_OK, "BCN|src=ISL-01|seq=2|t_ms=1795240802250", "HELLO"]).encode() + b"\n"
# a TDM indented with tabs (read leniently): one measurement, its first data line on line 18
TDM_TABS = (PROJECT_ROOT / "tests/include/transforms/tdm_corpus/v1_tabs_radar.kvn").read_bytes()
TDM_LENIENT = "tabs read as blanks on lines 2-4, 6-14, 17-21 (KVN allows blanks only)"


def _land(landing: Path, rel: str, data: bytes) -> Path:
    path = landing / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def landed(settings):
    return _land_hostile(_land_all(settings.landing))


def _land_hostile(land: Path) -> Path:
    """Files refused whole before they are read -- a symlink leading out of the landing zone, a FIFO
    (opening it would block) -- and a TDM read leniently."""
    secret = land.parent / "outside" / "secret.jsonl"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_bytes(RADAR_OK_0.encode() + b"\n")
    (land / "radar" / "leak.jsonl").symlink_to(secret)
    os.mkfifo(land / "optical" / "pipe.csv")
    _land(land, "tdm/tabs.kvn", TDM_TABS)
    return land


def _refusals(land: Path) -> dict[str, str]:
    secret = (land.parent / "outside" / "secret.jsonl").resolve()
    return {"radar/leak.jsonl": f"refused before reading: a symlink to {secret}, outside the landing zone",
            "optical/pipe.csv": "refused before reading: a FIFO, not a regular file"}


def _land_all(land: Path) -> Path:
    _land(land, "radar/a.jsonl", RADAR_FILE)
    _land(land, "optical/o.csv", OPTICAL_FILE)
    _land(land, "optical/bad_header.csv", BAD_HEADER_FILE)
    _land(land, "isl/b.bcn", ISL_FILE)
    # none of these is a landed sensor file
    _land(land, "_truth/radar/t.jsonl", RADAR_OK_0.encode())
    _land(land, "radar/.partial.jsonl", RADAR_OK_0.encode())
    _land(land, "radar/c.jsonl.tmp", RADAR_OK_0.encode())
    _land(land, "radar/notes.txt", b"hello")
    return land


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _run(spark, settings, run_id, end=END):
    return ingest.main(["--start", START, "--end", end, "--run-id", run_id], settings=settings, spark=spark)


def _bronze(spark, settings, kind):
    from sda.lake.tables import BRONZE_BY_KIND

    rows = BRONZE_BY_KIND[kind].read(spark, settings).collect()
    return sorted((r["source_file"], r["record_no"], r["bronze_id"], r["payload"]) for r in rows)


def _quarantine(spark, settings):
    rows = TABLES["quarantine"].read(spark, settings).collect()
    return sorted((r["source_file"], r["record_no"], r["reason"], bytes(r["raw"])) for r in rows)


EXPECTED_QUARANTINE = sorted([
    ("radar/a.jsonl", 1, "invalid JSON", b"{not json"),
    ("radar/a.jsonl", 2, "field az_deg is not a number (detection 0)", RADAR_BAD_NUMBER.encode()),
    ("radar/a.jsonl", 4, "not valid UTF-8", b"\xff\xfe{}"),
    ("optical/o.csv", 2, "expected 6 CSV columns, found 3", b"SOCORRO,2026-11-21T06:00:02Z,13.5"),
    ("optical/o.csv", 3, "field ra_hours is not a number", b"MAUI,2026-11-21T06:00:03Z,abc,10.0,11.0,2.0"),
    ("optical/bad_header.csv", 0, "unexpected CSV header", b"stn,time,ra,dec"),
    ("optical/bad_header.csv", 1, "unexpected CSV header", OPTICAL_OK.encode()),
    ("isl/b.bcn", 1, "missing field x_m", b"BCN|src=ISL-01|seq=2|t_ms=1795240802250"),
    ("isl/b.bcn", 2, "not a BCN message", b"HELLO"),
])


def _expected_bronze():
    radar_sha, optical_sha, isl_sha = _sha(RADAR_FILE), _sha(OPTICAL_FILE), _sha(ISL_FILE)
    return {
        "radar": sorted([
            ("radar/a.jsonl", 0, _sha(f"{radar_sha}:0".encode()), RADAR_OK_0),
            ("radar/a.jsonl", 3, _sha(f"{radar_sha}:3".encode()), RADAR_OK_3),
        ]),
        "optical": [("optical/o.csv", 1, _sha(f"{optical_sha}:1".encode()), OPTICAL_OK)],
        "isl": [("isl/b.bcn", 0, _sha(f"{isl_sha}:0".encode()), ISL_OK)],
    }


def _assert_ingested_once(spark, settings, hostile=True):
    """Every landed record once in bronze or quarantine, per file (the ledger's records + quarantined);
    ``hostile``: with the files of :func:`_land_hostile`."""
    for kind, rows in _expected_bronze().items():
        assert _bronze(spark, settings, kind) == rows
    refusals = _refusals(settings.landing) if hostile else {}
    # refused before reading: no record number, no bytes
    unread = [(path, None, reason, b"") for path, reason in refusals.items()]
    assert _quarantine(spark, settings) == sorted(EXPECTED_QUARANTINE + unread)
    if hostile:
        assert [r[:3] for r in _bronze(spark, settings, "tdm")] == [
            ("tdm/tabs.kvn", 17, _sha(f"{_sha(TDM_TABS)}:17".encode()))]
    ledger = sorted(
        (r["file_path"], r["file_sha256"], r["records"], r["quarantined"], r["status"])
        for r in TABLES["ingested_files"].read(spark, settings).collect()
    )
    assert ledger == sorted([
        ("radar/a.jsonl", _sha(RADAR_FILE), 2, 3, "done"),
        ("optical/o.csv", _sha(OPTICAL_FILE), 1, 2, "done"),
        ("optical/bad_header.csv", _sha(BAD_HEADER_FILE), 0, 2, "done"),
        ("isl/b.bcn", _sha(ISL_FILE), 1, 2, "done"),
    ] + ([("tdm/tabs.kvn", _sha(TDM_TABS), 1, 0, "done")] if hostile else [])
      + [(f, _sha(r.encode()), 0, 1, "done") for f, r in refusals.items()])


# --- wire checks (pure Python) -------------------------------------------------------------------

@pytest.mark.parametrize(
    "kind, text, reason",
    [
        ("radar", RADAR_OK_0, None),
        ("radar", "[1, 2]", "JSON record is not an object"),
        ("radar", '{"frame": 1, "dets": []}', "missing field sensor"),
        ("radar", '{"sensor": "EGLIN", "frame": 1.5, "dets": []}', "field frame is not an integer"),
        ("radar", '{"sensor": "EGLIN", "frame": 1, "dets": [{"t": "2026-11-21T06:00:01Z", "range_km": 1, '
                  '"az_deg": 1, "el_deg": 1}]}', "missing field rr_km_s (detection 0)"),
        ("radar", '{"sensor": "EGLIN", "frame": 1, "dets": [{"t": "yesterday", "range_km": 1, "az_deg": 1, '
                  '"el_deg": 1, "rr_km_s": 0}]}', "field t is not an ISO-8601 time (detection 0)"),
        ("radar", '{"sensor": "EGLIN", "frame": 1, "dets": [{"t": "2026-11-21T06:00:01Z", "range_km": NaN, '
                  '"az_deg": 1, "el_deg": 1, "rr_km_s": 0}]}', "field range_km is not a finite number (detection 0)"),
        ("optical", OPTICAL_OK, None),
        ("optical", "SOCORRO,2026-11-21T06:00:01Z,6.0,-45.0,,", None),  # vmag, exposure optional
        ("optical", "SOCORRO,2026-13-21T06:00:01Z,6.0,-45.0,1,1", "field timestamp_utc is not an ISO-8601 time"),
        ("optical", "SOCORRO,2026-11-21T06:00:01Z,6.0,,1,1", "missing field dec_deg"),
        ("optical", "SOCORRO,2026-11-21T06:00:01Z,nan,1,1,1", "field ra_hours is not a number"),
        ("isl", ISL_OK, None),
        ("isl", ISL_OK.replace("seq=1", "seq=1.5"), "field seq is not an integer"),
        ("isl", ISL_OK.replace("y_m=0", "y_m=zero"), "field y_m is not a number"),
        ("isl", ISL_OK + "|src=ISL-02", "duplicate key src"),
        ("isl", ISL_OK.replace("|seq=1", "|seq"), "malformed key=value pair 'seq'"),
        ("isl", "   ", "blank line"),
    ],
)
def test_check_record_reasons(kind, text, reason):
    assert wire.check_record(kind, text) == reason


def test_file_records_drops_trailing_blank_lines_only():
    records = wire.file_records("isl", b"\n".join([ISL_OK.encode(), b"", ISL_OK.encode()]) + b"\n\n  \n")
    assert [(r.record_no, r.reason) for r in records] == [(0, None), (1, "blank line"), (2, None)]


def test_a_batch_is_one_arrow_table_per_kind_in_the_bronze_columns():
    from sda.lake import schemas

    when = dt.datetime(2026, 11, 21, 23, 59, 59, 500000, tzinfo=dt.timezone.utc)
    files = [ingest.parse_file(ingest.LandedFile(rel, kind, _sha(data), len(data), data))
             for rel, kind, data in (("isl/b.bcn", "isl", ISL_FILE), ("isl/c.bcn", "isl", ISL_OK.encode()))]
    assert not hasattr(files[0], "data")  # a parsed file keeps its records, not its bytes
    bronze, quarantine, counts = ingest.batch_rows(files, when, "run-7", 3)
    assert (bronze["radar"].num_rows, bronze["optical"].num_rows) == (0, 0)
    isl = bronze["isl"]
    assert isl.column_names == [f.name for f in schemas.BRONZE.fields]
    assert isl.to_pylist() == [
        {"bronze_id": _sha(f"{_sha(ISL_FILE)}:0".encode()), "sensor_kind": "isl", "source_file": "isl/b.bcn",
         "record_no": 0, "payload": ISL_OK, "ingest_time": when, "ingest_date": dt.date(2026, 11, 21),
         "run_id": "run-7", "ingest_batch": 3, "format_version": "1.0", "extra_fields": None},
        {"bronze_id": _sha(f"{_sha(ISL_OK.encode())}:0".encode()), "sensor_kind": "isl", "source_file": "isl/c.bcn",
         "record_no": 0, "payload": ISL_OK, "ingest_time": when, "ingest_date": dt.date(2026, 11, 21),
         "run_id": "run-7", "ingest_batch": 3, "format_version": "1.0", "extra_fields": None},
    ]
    # b.bcn's lines 1 (no position) and 2 (not a beacon) are quarantined with their bytes as landed
    assert [(q[4], q[5], bytes(q[8])) for q in quarantine] == [
        ("isl/b.bcn", 1, b"BCN|src=ISL-01|seq=2|t_ms=1795240802250"), ("isl/b.bcn", 2, b"HELLO")]
    assert counts == {"isl/b.bcn": (1, 2), "isl/c.bcn": (1, 0)}


def test_candidate_files():
    assert ingest.is_candidate(Path("a.jsonl"), "radar")
    assert ingest.is_candidate(Path("2026/11/a.jsonl"), "radar")
    assert not ingest.is_candidate(Path(".a.jsonl"), "radar")
    assert not ingest.is_candidate(Path("a.jsonl.tmp"), "radar")
    assert not ingest.is_candidate(Path("a.csv"), "radar")
    assert ingest.is_candidate(Path("a.csv"), "optical")


# --- the job ---------------------------------------------------------------------------------------

def test_ingest_conserves_records_and_keeps_reasons_and_bytes(spark, settings, landed):
    metrics = _run(spark, settings, "run-1")

    assert metrics["files_new"] == 7
    # 13 records of the four plain files, the TDM's measurement, the two files refused before reading
    assert (metrics["records_in"], metrics["records_out"], metrics["quarantined"],
            metrics["duplicates"]) == (16, 5, 11, 0)
    assert metrics["files_refused_unread"] == 2 and metrics["lenient_reads"] == {"tdm/tabs.kvn": TDM_LENIENT}
    assert metrics["records_in"] == metrics["records_out"] + metrics["quarantined"] + metrics["duplicates"]
    _assert_ingested_once(spark, settings)
    bronze = TABLES["radar_frames"].read(spark, settings).collect()
    assert {r["run_id"] for r in bronze} == {"run-1"}
    assert {r["ingest_date"] for r in bronze} == {r["ingest_time"].date() for r in bronze}


def test_rerun_ingests_nothing_new_and_later_files_wait_for_their_interval(spark, settings, landed):
    late_bytes = RADAR_OK_3.encode() + b"\n"
    late = _land(landed, "radar/late.jsonl", late_bytes)
    end_ts = 4_000_000_000  # 2096-10-02T07:06:40Z: the --end of the first two runs, before END
    os.utime(late, (end_ts + 3600, end_ts + 3600))

    first = _run(spark, settings, "run-1", end="2096-10-02T07:06:40Z")
    assert first["files_new"] == 7  # late.jsonl's mtime is after --end
    again = _run(spark, settings, "run-2", end="2096-10-02T07:06:40Z")
    # the refused files too: known to the ledger, not quarantined again
    assert (again["files_new"], again["records_in"], again["files_already_ingested"]) == (0, 0, 7)
    _assert_ingested_once(spark, settings)

    later = _run(spark, settings, "run-3")
    assert (later["files_new"], later["records_in"], later["records_out"]) == (1, 1, 1)
    rows = [r for r in _bronze(spark, settings, "radar") if r[0] == "radar/late.jsonl"]
    assert rows == [("radar/late.jsonl", 0, _sha(f"{_sha(late_bytes)}:0".encode()), RADAR_OK_3)]


def test_known_files_are_not_read_again_and_a_touched_file_is_judged_by_content(spark, settings, landed, monkeypatch):
    _run(spark, settings, "run-1")
    read = []
    load = ingest.load_file
    monkeypatch.setattr(ingest, "load_file", lambda landing, rel, kind: read.append(rel) or load(landing, rel, kind))
    _land(landed, "isl/new.bcn", ISL_FILE.replace(b"seq=1", b"seq=5"))
    metrics = _run(spark, settings, "run-2")
    assert read == ["isl/new.bcn"]  # the known files: not opened
    assert (metrics["files_seen"], metrics["files_new"], metrics["files_already_ingested"]) == (8, 1, 7)
    # same bytes, new mtime: read and hashed again, and known by its content
    touched = landed / "radar" / "a.jsonl"
    os.utime(touched, (touched.stat().st_atime, touched.stat().st_mtime + 10))
    read.clear()
    metrics = _run(spark, settings, "run-3")
    assert read == ["radar/a.jsonl"]
    assert (metrics["files_new"], metrics["records_in"], metrics["files_already_ingested"]) == (0, 0, 8)
    read.clear()
    _run(spark, settings, "run-4")
    assert read == []  # the ledger learnt the new mtime
    ledger = [(r["file_path"], r["file_sha256"]) for r in TABLES["ingested_files"].read(spark, settings).collect()]
    assert sorted(ledger) == sorted({(r[0], r[1]) for r in ledger}) and len(ledger) == 8  # one row per file
    assert [r[1] for r in _bronze(spark, settings, "radar")] == [0, 3]  # a.jsonl's two good records, once


def test_changed_file_is_ingested_again_as_new_content(spark, settings, landed):
    _run(spark, settings, "run-1")
    _land(landed, "isl/b.bcn", ISL_FILE + ISL_OK.replace("seq=1", "seq=9").encode() + b"\n")
    metrics = _run(spark, settings, "run-2")
    assert (metrics["files_new"], metrics["records_in"], metrics["records_out"], metrics["quarantined"]) == (1, 4, 2, 2)


def test_crash_before_ledger_done_then_rerun_neither_loses_nor_duplicates(spark, settings, landed, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash after the bronze append")

    monkeypatch.setattr(ingest, "mark_done", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        _run(spark, settings, "run-1")
    statuses = {r["status"] for r in TABLES["ingested_files"].read(spark, settings).collect()}
    assert statuses == {"planned"}
    assert len(_bronze(spark, settings, "radar")) == 2  # the appends happened
    monkeypatch.undo()

    metrics = _run(spark, settings, "run-1-retry")
    assert (metrics["files_replayed"], metrics["files_new"], metrics["records_in"]) == (7, 0, 16)
    _assert_ingested_once(spark, settings)
    # the replayed rows are the planned ones: same ingest time and run id as the crashed attempt
    assert {r["run_id"] for r in TABLES["isl_beacons"].read(spark, settings).collect()} == {"run-1"}


def test_crash_between_two_bronze_appends_then_rerun(spark, settings, landed, monkeypatch):
    real_append = ingest.append_bronze
    calls = []

    def append_then_crash(spark_, settings_, kind, rows, batch_id):
        calls.append(kind)
        if len(calls) == 2:
            raise RuntimeError("simulated crash between appends")
        real_append(spark_, settings_, kind, rows, batch_id)

    monkeypatch.setattr(ingest, "append_bronze", append_then_crash)
    with pytest.raises(RuntimeError, match="between appends"):
        _run(spark, settings, "run-1")
    monkeypatch.undo()
    assert calls == ["radar", "optical"]

    _run(spark, settings, "run-1-retry")
    _run(spark, settings, "run-1-retry-2")
    _assert_ingested_once(spark, settings)


def test_a_backlog_larger_than_a_batch_goes_in_several_batches_exactly_once(spark, make_settings, monkeypatch):
    """With ``ingest_batch_mb`` below every file's size each new file is a ledger batch of its own
    (planned and written before the next file is read): the tables end as with one batch, and a crash
    in the middle of the second batch is finished by the rerun without loss or duplicate."""
    settings = make_settings("ingest-batches", ingest_batch_mb=1e-6)  # 1 byte
    _land_all(settings.landing)
    # landed in this order (not the paths' order): the backlog's batches follow it
    landed = ["isl/b.bcn", "radar/a.jsonl", "optical/o.csv", "optical/bad_header.csv"]
    first = dt.datetime.fromisoformat(START.replace("Z", "+00:00")).timestamp() + 60
    for k, rel in enumerate(landed):
        os.utime(settings.landing / rel, (first + k, first + k))
    done = []

    def mark_done_then_crash(spark_, settings_, rows):
        if len(done) == 1:
            raise RuntimeError("simulated crash in the second batch")
        done.append(rows)
        real_mark_done(spark_, settings_, rows)

    real_mark_done = ingest.mark_done
    monkeypatch.setattr(ingest, "mark_done", mark_done_then_crash)
    with pytest.raises(RuntimeError, match="second batch"):
        _run(spark, settings, "run-1")
    monkeypatch.undo()
    ledger = TABLES["ingested_files"].read(spark, settings).collect()
    # files go in landing order: isl/b.bcn was batch 1 (done), radar/a.jsonl batch 2 (planned)
    assert sorted((r["file_path"], r["batch_id"], r["status"]) for r in ledger) == [
        ("isl/b.bcn", 1, "done"), ("radar/a.jsonl", 2, "planned")]

    metrics = _run(spark, settings, "run-1-retry")
    assert metrics["batches"] == [2, 3, 4] and (metrics["files_replayed"], metrics["files_new"]) == (1, 2)
    _assert_ingested_once(spark, settings, hostile=False)
    batches = {r["file_path"]: r["batch_id"] for r in TABLES["ingested_files"].read(spark, settings).collect()}
    assert batches == {"isl/b.bcn": 1, "radar/a.jsonl": 2, "optical/o.csv": 3, "optical/bad_header.csv": 4}
