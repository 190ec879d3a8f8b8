"""TDM written the way agencies write it (tdm_corpus/, laid out as the CCSDS 503.0-B-2 annex examples):
indented with blanks or tabs, comments in the header, metadata and data, blank lines, versions 1.0 and
2.0, day-of-year epochs, TAI / GPS / TT epochs, ranges in seconds, participants by name, and the
conventions the pipeline cannot represent, refused one measurement at a time. Every expected value is
worked out by hand from the file (c = 299,792.458 km/s; TAI - UTC = 37 s in 2026)."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import pytest

from sda.transforms import tdm, wire

CORPUS = Path(__file__).parent / "tdm_corpus"
UTC = dt.timezone.utc
# the catalogue's names as normalize hands them over (tdm.object_aliases of gold catalog)
OBJECTS = {"ISS ZARYA": 25544, "1998 067A": 25544, "COSMOS 2251 DEB": None}


def records(name: str, data: bytes | None = None) -> list[wire.Record]:
    return wire.file_records("tdm", data if data is not None else (CORPUS / name).read_bytes())


def interpret(rec: wire.Record) -> dict:
    out = tdm.interpret(rec.text, OBJECTS)
    return {k: v for k, v in out.items() if v is not None}


def test_v1_tab_indented_radar_is_read_leniently_with_day_of_year_epochs():
    [rec] = records("v1_tabs_radar.kvn")
    assert (rec.record_no, rec.reason) == (17, None)  # RANGE on line 18
    assert rec.lenient == "tabs read as blanks on lines 2-4, 6-14, 17-21 (KVN allows blanks only)"
    payload = json.loads(rec.text)
    assert payload["version"] == "1.0"
    assert payload["header"] == {"CREATION_DATE": "2026-325T07:00:00", "ORIGINATOR": "EXAMPLE-AGENCY"}
    assert payload["metadata"]["PARTICIPANT_1"] == "AN/FPS-85"  # bronze keeps what was written
    assert payload["lines"] == [[17, "RANGE", "2026-325T06:00:01.5", "1498.96229"],
                                [18, "ANGLE_1", "2026-325T06:00:01.5", "181.5"],
                                [19, "ANGLE_2", "2026-325T06:00:01.5", "35.25"],
                                [20, "DOPPLER_INSTANTANEOUS", "2026-325T06:00:01.5", "-2.5"]]
    # AN/FPS-85 is Eglin's designation; day 325 of 2026 is 21 November; received 1498.96229 km / c = 5 ms
    # after the reflection
    assert interpret(rec) == {
        "sensor_id": "EGLIN", "sensor_kind": "radar", "norad_id": 25544, "range_km": 1498.96229, "az_deg": 181.5,
        "el_deg": 35.25, "rr_km_s": -2.5, "event_time": dt.datetime(2026, 11, 21, 6, 0, 1, 495000, tzinfo=UTC)}


def test_v2_blank_indented_tai_seconds_and_names():
    recs = records("v2_blanks_tai.kvn")
    # the file: an indented header COMMENT on line 2, blanks after lines, blank lines between blocks
    assert [(r.record_no, r.reason, r.lenient) for r in recs] == [(21, None, None), (25, None, None)]
    first, second = (interpret(r) for r in recs)
    # Cape Cod -> CAPECOD; ISS (ZARYA) -> 25544 from the catalogue's names. Range: c * 0.008 s / 2 =
    # 1199.169832 km. 06:00:37.010 TAI = 06:00:00.010 UTC, received 0.004 s after the reflection
    assert first == {"sensor_id": "CAPECOD", "sensor_kind": "radar", "norad_id": 25544, "range_km": 1199.169832,
                     "az_deg": 10.0, "el_deg": 45.5,
                     "event_time": dt.datetime(2026, 11, 21, 6, 0, 0, 6000, tzinfo=UTC)}
    # c * 0.006 / 2 = 899.377374 km; 06:00:47.010 TAI = 06:00:10.010 UTC, less 0.003 s
    assert second["range_km"] == pytest.approx(899.377374, abs=1e-9)
    assert second["event_time"] == dt.datetime(2026, 11, 21, 6, 0, 10, 7000, tzinfo=UTC)
    # without the catalogue's names the object is refused, naming what it is not
    assert tdm.interpret(recs[0].text)["parse_error"] == (
        "TDM line 22: PARTICIPANT_2 'ISS (ZARYA)' (the tracked object) is not a NORAD catalogue number, nor a name "
        "or international designator the catalogue knows")


def test_a_byte_order_mark_and_crlf_line_ends_read_leniently():
    data = b"\xef\xbb\xbf" + (CORPUS / "v2_blanks_tai.kvn").read_bytes().replace(b"\n", b"\r\n")
    recs = records("", data)
    assert [(r.record_no, r.reason) for r in recs] == [(21, None), (25, None)]
    assert recs[0].lenient == "a UTF-8 byte-order mark before line 1 (removed)"
    assert interpret(recs[0])["range_km"] == 1199.169832


@pytest.mark.parametrize("old, new, line, message", [
    # a keyword the standard does not have, in the indented file: the landed line 16, not a shifted one
    (b"   RANGE_UNITS = s", b"   RANGE_UNITZ = s", 16, "KVN parsing error at line 16, column 1: "
                                                        "Context: Unexpected TDM Metadata key"),
    # a bad value after the blank line 25, which the validated text leaves out
    (b"ANGLE_2 = 2026-11-21T06:00:47.010 47.0", b"ANGLE_2 = 2026-11-21T06:00:47.010 x47.0", 28,
     "KVN parsing error at line 28, column 35: Context: Invalid float"),
])
def test_a_refused_file_names_its_landed_line(old, new, line, message):
    data = (CORPUS / "v2_blanks_tai.kvn").read_bytes().replace(old, new)
    [rec] = records("", data)
    assert rec.record_no == line - 1 and rec.raw == data
    assert rec.reason.startswith(f"TDM line {line}: TDM refused by ccsds-ndm: {message}"), rec.reason


def test_gps_and_tt_epochs_teme_and_gcrf_angles():
    teme, gcrf = (interpret(r) for r in records("gps_tt_optical.kvn"))
    # GEODSS Socorro -> SOCORRO, 1998-067A -> 25544; 06:00:18 GPS = 06:00:00 UTC; TEME is taken as it is
    assert teme == {"sensor_id": "SOCORRO", "sensor_kind": "optical", "norad_id": 25544, "ra_hours": 8.0,
                    "dec_deg": -20.5, "event_time": dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)}
    # 06:01:09.184 TT = 06:00:00 UTC
    assert gcrf["event_time"] == dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    assert gcrf["sensor_kind"] == "optical" and gcrf["norad_id"] == 25544


def test_gcrf_angles_are_rotated_to_teme_as_astropy_does():
    astropy_coords = pytest.importorskip("astropy.coordinates")
    from astropy import units as u
    from astropy.time import Time
    from astropy.utils import iers

    gcrf = interpret(records("gps_tt_optical.kvn")[1])
    t = Time("2026-11-21T06:01:09.184", scale="tt")  # astropy's own TT -> UTC
    direction = astropy_coords.GCRS(ra=200.0 * u.deg, dec=10.0 * u.deg, distance=1 * u.au, obstime=t)
    # offline: no IERS download; the bundled table's UT1-UTC (< 0.9 s) moves TEME by ~1e-11 rad here
    with (iers.conf.set_temp("auto_download", False), iers.conf.set_temp("auto_max_age", None),
          iers.conf.set_temp("iers_degraded_accuracy", "ignore")):
        teme = direction.transform_to(astropy_coords.TEME(obstime=t)).cartesian
    ra = math.degrees(math.atan2(teme.y.value, teme.x.value)) % 360.0
    dec = math.degrees(math.atan2(teme.z.value, math.hypot(teme.x.value, teme.y.value)))
    assert gcrf["ra_hours"] * 15.0 == pytest.approx(ra, abs=0.1 / 3600)
    assert gcrf["dec_deg"] == pytest.approx(dec, abs=0.1 / 3600)


def test_what_the_envelope_cannot_represent_is_refused_per_measurement_naming_it():
    recs = records("unsupported.kvn")
    # ccsds-ndm takes the file (ITRF2014, from the SANA registry, is validated as EME2000): one record
    # per measurement, the first of each on lines 13, 29, 42, 53, 64, 74 and 86
    assert [(r.record_no, r.reason) for r in recs] == [(n - 1, None) for n in (13, 29, 42, 53, 64, 74, 86)]
    outcomes = [tdm.interpret(r.text, OBJECTS)["parse_error"] for r in recs]
    assert outcomes == [
        None,
        "TDM line 29: RANGE_UNITS RU is not supported: range units are the ranging system's own, their length "
        "follows the transmit frequency, and the standard defines no conversion to km",
        "TDM line 42: RADEC in REFERENCE_FRAME ITRF2014: supported are EME2000, ICRF, GCRF and TEME",
        "TDM line 53: ANGLE_TYPE XSYE is not supported: AZEL and RADEC are",
        "TDM line 64: no measurement the observation envelope carries (keywords: CLOCK_BIAS)",
        "TDM line 74: TIME_SYSTEM TDB is not supported: UTC, TAI, GPS, TT are",
        "TDM line 86: PARTICIPANT_2 'COSMOS 2251 DEB' (the tracked object) names more than one catalogue object",
    ]
    # the supported one: 1000 km two-way, received 1000 / c = 3.335641 ms after the reflection
    assert interpret(recs[0]) == {"sensor_id": "EGLIN", "sensor_kind": "radar", "norad_id": 25544,
                                  "range_km": 1000.0, "az_deg": 90.0, "el_deg": 30.0,
                                  "event_time": dt.datetime(2026, 11, 21, 5, 59, 59, 996664, tzinfo=UTC)}


def test_object_aliases_from_catalogue_names_and_designators():
    catalogue = [(25544, "ISS (ZARYA)", "1 25544U 98067A   26325.2"), (22675, "COSMOS 2251", "1 22675U 93036A  "),
                 (34427, "COSMOS 2251 DEB", "1 34427U 93036SX "), (34428, "COSMOS 2251 DEB", "1 34428U 93036SY "),
                 (99901, None, "1 99901U          ")]
    assert tdm.object_aliases(catalogue) == {
        "ISS ZARYA": 25544, "1998 067A": 25544, "COSMOS 2251": 22675, "1993 036A": 22675,
        "COSMOS 2251 DEB": None, "1993 036SX": 34427, "1993 036SY": 34428}


def test_an_unknown_sensor_name_is_kept_for_the_registry_check():
    record = json.loads(records("unsupported.kvn")[0].text)
    record["metadata"]["PARTICIPANT_1"] = "DSS-25"
    out = tdm.interpret(json.dumps(record))
    assert (out["sensor_id"], out["parse_error"]) == ("DSS-25", None)  # normalize: "unknown sensor id DSS-25"


def test_an_xml_message_in_gcrf_and_with_a_byte_order_mark_is_read():
    xml = (Path(__file__).parent / "tdm_examples" / "e6_four_way.xml").read_text()
    xml = xml.replace("<ANGLE_TYPE>AZEL</ANGLE_TYPE>",
                      "<ANGLE_TYPE>RADEC</ANGLE_TYPE><REFERENCE_FRAME>GCRF</REFERENCE_FRAME>", 1)
    recs = records("", b"\xef\xbb\xbf" + xml.encode())
    # XML may start with a byte-order mark: not lenient; the records are those of the file as it was
    assert [(r.record_no, r.reason, r.lenient) for r in recs] == [(26, None, None), (38, None, None)]
    assert json.loads(recs[0].text)["metadata"]["REFERENCE_FRAME"] == "GCRF"
