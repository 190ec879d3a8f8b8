"""The sensor wire formats' versions (sda.transforms.versions, through sda.transforms.wire.file_records): no
version is 1.0, a newer minor version's added fields are read and kept, another major version refuses the
whole file. The files are written here by hand; the expected records are worked out from them."""

from __future__ import annotations

import pytest

from sda.transforms import versions, wire

DET = '{"t": "2026-11-21T06:00:01.250Z", "range_km": 1234.5, "az_deg": 180.0, "el_deg": 30.0, "rr_km_s": -2.5'
FRAME = '{{{version}"sensor": "EGLIN", "frame": 1, "sent": "2026-11-21T06:00:05.000Z", "dets": [{det}}}]{tail}}}'
BEACON = "BCN|{version}src=ISL-01|seq=1|t_ms=1795240801250|x_m=7000000|y_m=0|z_m=0|vx_ms=0|vy_ms=7500|vz_ms=0"
HEADER = "station,timestamp_utc,ra_hours,dec_deg,vmag,exposure_s"
ROW = "SOCORRO,2026-11-21T06:00:01.250000Z,6.0,-45.0,11.2,2.0"


def _frame(version: str = "", det_extra: str = "", tail: str = "") -> str:
    return FRAME.format(version=f'"version": "{version}", ' if version else "", det=DET + det_extra, tail=tail)


def _records(kind: str, *lines: str) -> list[tuple]:
    return [(r.record_no, r.reason, r.version, r.extras)
            for r in wire.file_records(kind, "\n".join(lines).encode() + b"\n")]


def test_a_record_without_a_version_is_version_1_0():
    assert _records("radar", _frame()) == [(0, None, "1.0", None)]
    assert _records("isl", BEACON.format(version="")) == [(0, None, "1.0", None)]
    assert _records("optical", HEADER, ROW) == [(1, None, "1.0", None)]


def test_declared_versions_are_read_and_the_optical_version_line_is_no_record():
    assert _records("radar", _frame("1.0")) == [(0, None, "1.0", None)]
    assert _records("isl", BEACON.format(version="version=1.0|")) == [(0, None, "1.0", None)]
    assert _records("optical", "#version=1.0", HEADER, ROW, ROW) == [(2, None, "1.0", None), (3, None, "1.0", None)]


def test_a_newer_minor_versions_added_fields_are_read_and_kept_by_name():
    radar = _frame("1.3", det_extra=', "rcs_dbsm": -3.5, "track": "T7"', tail=', "beam": {"id": 2}')
    assert _records("radar", radar) == [
        (0, None, "1.3", {"beam": '{"id":2}', "dets.0.rcs_dbsm": "-3.5", "dets.0.track": "T7"})]
    assert _records("isl", BEACON.format(version="version=1.1|") + "|snr_db=14.5") == [
        (0, None, "1.1", {"snr_db": "14.5"})]
    assert _records("optical", "#version=1.2", HEADER + ",mag_err,filter", ROW + ",0.1,V") == [
        (2, None, "1.2", {"mag_err": "0.1", "filter": "V"})]


def test_an_added_optical_column_is_refused_in_version_1_0_and_a_row_must_have_its_files_columns():
    # version 1.0 has exactly its six columns: every line refused, as for any unexpected header
    assert [r[1] for r in _records("optical", "#version=1.0", HEADER + ",filter", ROW + ",V")] == \
        ["unexpected CSV header"] * 3
    assert _records("optical", "#version=1.1", HEADER + ",filter", ROW) == [
        (2, "expected 7 CSV columns, found 6", None, None)]
    assert _records("optical", "#version=1.1", HEADER + ",,x", ROW + ",1,2")[0][1].startswith("unexpected CSV header:")
    # a version-1 column cannot come again among the added ones
    assert _records("optical", "#version=1.1", HEADER + ",vmag", ROW + ",1")[0][1].startswith("unexpected CSV header:")


def test_another_major_version_refuses_the_whole_file_naming_the_version():
    data = ("\n".join([_frame("1.0"), _frame("2.0"), _frame()]) + "\n").encode()
    [rec] = wire.file_records("radar", data)
    assert (rec.record_no, rec.raw, rec.text) == (1, data, None)  # the whole file, at the line declaring 2.0
    assert rec.reason == ("radar format version 2.0 is not read here (this reader reads version 1.x): "
                          "the whole file is quarantined")
    [opt] = wire.file_records("optical", b"#version=3.1\n" + HEADER.encode() + b"\n" + ROW.encode() + b"\n")
    assert (opt.record_no, opt.reason.split(" is not")[0]) == (0, "optical format version 3.1")
    [isl] = wire.file_records("isl", (BEACON.format(version="version=0.9|") + "\n").encode())
    assert "isl format version 0.9" in isl.reason


@pytest.mark.parametrize("declared", ["1", "v1.0", "1.0.2", "", "1.x"])
def test_a_malformed_version_refuses_its_record_only(declared):
    lines = _records("radar", _frame("1.0"), _frame().replace('{"sensor"', f'{{"version": "{declared}", "sensor"'))
    assert lines == [(0, None, "1.0", None), (1, "field version is not a MAJOR.MINOR version", None, None)]
    assert [r[1] for r in _records("isl", BEACON.format(version=f"version={declared}|"))] == [
        "field version is not a MAJOR.MINOR version"]


def test_a_malformed_optical_version_line_refuses_every_line():
    assert [r[1] for r in _records("optical", "#version=one", HEADER, ROW)] == \
        ["field version is not a MAJOR.MINOR version"] * 3


def test_read_version_in_isolation():
    assert versions.read_version("radar", None) == ("1.0", None)
    assert versions.read_version("radar", "1.17") == ("1.17", None)
    assert versions.read_version("radar", 1.0)[1] == "field version is not a MAJOR.MINOR version"  # a number
    with pytest.raises(versions.UnknownMajor, match="radar format version 10.0 "):
        versions.read_version("radar", "10.0")
