"""sda.orbit.catalog: TLE in the forms CelesTrak and Space-Track serve (zero-padded, blank-padded and Alpha-5
catalogue numbers, two- and three-line, CRLF, BOM), OMM as CSV / JSON / XML, clear rejections.

Expected values are worked out by hand from the literal element sets below, never taken from the code
under test. Checksums of the hand-made lines were computed once (the digit sum of columns 1-68, '-'
counting 1, modulo 10) and pasted."""

import datetime as dt
import json
import math

import pytest
from sgp4.api import WGS72, Satrec

from sda.orbit.catalog import (
    decode_catalog_number,
    encode_catalog_number,
    latest_by_object,
    load_catalog,
    parse_text,
    parse_tle_text,
)

UTC = dt.timezone.utc
MICROSECOND = dt.timedelta(microseconds=1)  # sgp4 truncates the epoch to the microsecond

# ISS (ZARYA) as published, with valid checksums. Epoch 08264.51782528: 2008 is a leap year, so day 264
# is 20 September (31+29+31+30+31+30+31+31 = 244 days to the end of August); 0.51782528 d = 44740.104192 s
# = 12:25:40.104192.
ISS_L1 = "1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927"
ISS_L2 = "2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537"
ISS_EPOCH = dt.datetime(2008, 9, 20, 12, 25, 40, 104192, tzinfo=UTC)

# VANGUARD 1 as Space-Track's legacy output has it: catalogue number blank-padded ("    5", not "00005").
# Epoch 20287.20333880: 2020 is a leap year, day 287 is 13 October (274 days to the end of September);
# 0.20333880 d = 17568.47232 s = 04:52:48.472320.
VANGUARD_L1 = "1     5U 58002B   20287.20333880 -.00000016  00000-0 -22483-4 0  9998"
VANGUARD_L2 = "2     5  34.2443 225.5254 1845686 162.2516 205.2356 10.84869164218149"
VANGUARD_EPOCH = dt.datetime(2020, 10, 13, 4, 52, 48, 472320, tzinfo=UTC)

# Hand-made, blank-padded catalogue number 11, epoch 98001.00000000 = 1998-01-01T00:00 (years 57-99 are 19xx).
OBJ11_L1 = "1    11U 59001A   98001.00000000  .00000012  00000-0  62000-4 0  1004"
OBJ11_L2 = "2    11  32.8700 100.0000 1466000 200.0000 150.0000 11.86000000999991"

# Hand-made Alpha-5 element sets, epoch 24100.50000000 = 2024 (leap) day 100 = 9 April (91 days to the end
# of March), 12:00. A = 10, ..., H = 17, J = 18 (no I), ..., N = 22, P = 23 (no O), ..., T = 27, ..., Z = 33.
ALPHA5_EPOCH = dt.datetime(2024, 4, 9, 12, 0, tzinfo=UTC)
A0001 = ("1 A0001U 24900A   24100.50000000  .00001000  00000-0  20000-4 0  9995",
         "2 A0001  53.0000 120.0000 0001500  90.0000 270.0000 15.06000000 10001")  # 10*10000 + 1 = 100001
T1234 = ("1 T1234U 24901B   24100.50000000  .00001000  00000-0  20000-4 0  9995",
         "2 T1234  97.5000 200.0000 0010000  45.0000 315.0000 14.80000000 10008")  # 27*10000 + 1234 = 271234
Z9999 = ("1 Z9999U 24902C   24100.50000000  .00001000  00000-0  20000-4 0  9992",
         "2 Z9999  70.0000 300.0000 0020000  10.0000 350.0000 14.20000000 10007")  # 33*10000 + 9999 = 339999
I0001 = ("1 I0001U 24903D   24100.50000000  .00001000  00000-0  20000-4 0  9998",  # not Alpha-5: no letter I
         "2 I0001  70.0000 300.0000 0020000  10.0000 350.0000 14.20000000 10002")


def near(a: dt.datetime, b: dt.datetime) -> bool:
    return abs(a - b) <= MICROSECOND


def test_two_and_three_line_sets_with_and_without_zero_prefix():
    text = f"{ISS_L1}\n{ISS_L2}\n0 ISS (ZARYA)\n{ISS_L1}\n{ISS_L2}\nISS PLAIN NAME\n{ISS_L1}\n{ISS_L2}\n"
    entries, rejected = parse_tle_text(text)
    assert rejected == []
    assert [e.name for e in entries] == ["OBJECT 25544", "ISS (ZARYA)", "ISS PLAIN NAME"]
    assert all(e.norad_id == 25544 for e in entries)
    assert near(entries[0].epoch, ISS_EPOCH)
    perigee, apogee = entries[0].perigee_apogee_km
    assert 330 < perigee < apogee < 360


def test_sgp4_native_reading_of_catalogue_numbers():
    """What the installed sgp4 does by itself (why the loader checks the field before handing it over):
    it reads blank padding and Alpha-5, but also silently accepts I/O and lower case, which are not
    Alpha-5, and line pairs of two different objects."""
    sat = Satrec.twoline2rv(VANGUARD_L1, VANGUARD_L2, WGS72)
    assert (sat.satnum, sat.satnum_str) == (5, "00005")
    assert Satrec.twoline2rv(*T1234, WGS72).satnum == 271234
    assert Satrec.twoline2rv(*I0001, WGS72).satnum == 180001  # the number of "J0001": ambiguous
    assert Satrec.twoline2rv(ISS_L1, ISS_L2.replace("25544", "25545"), WGS72).satnum == 25545  # no complaint


def test_space_track_unpadded_catalogue_numbers():
    entries, rejected = parse_tle_text(f"0 VANGUARD 1\n{VANGUARD_L1}\n{VANGUARD_L2}\n{OBJ11_L1}\n{OBJ11_L2}\n")
    assert rejected == []
    vanguard, obj11 = entries
    assert (vanguard.norad_id, vanguard.name) == (5, "VANGUARD 1")
    assert near(vanguard.epoch, VANGUARD_EPOCH)
    assert (obj11.norad_id, obj11.name) == (11, "OBJECT 11")
    assert near(obj11.epoch, dt.datetime(1998, 1, 1, tzinfo=UTC))
    # stored canonical: zero-padded, otherwise the very same characters (so the same checksum)
    assert vanguard.line1 == VANGUARD_L1.replace("1     5U", "1 00005U")
    assert vanguard.line2 == VANGUARD_L2.replace("2     5 ", "2 00005 ")
    assert obj11.line1[:8] == "1 00011U" and obj11.line1[8:] == OBJ11_L1[8:]
    # the elements are read, not just the number: e = .1845686, n = 10.84869164 rev/day
    assert vanguard.satrec.ecco == pytest.approx(0.1845686, abs=1e-12)
    assert vanguard.satrec.no_kozai == pytest.approx(10.84869164 * 2 * math.pi / 1440.0, rel=1e-12)


def test_alpha5_catalogue_numbers():
    text = "\n".join(["STARLINK-X", *A0001, *T1234, *Z9999, "BAD LETTER", *I0001]) + "\n"
    entries, rejected = parse_tle_text(text)
    assert [(e.norad_id, e.name) for e in entries] == [(100001, "STARLINK-X"), (271234, "OBJECT 271234"),
                                                       (339999, "OBJECT 339999")]
    assert all(near(e.epoch, ALPHA5_EPOCH) for e in entries)
    assert [e.line1 for e in entries] == [A0001[0], T1234[0], Z9999[0]]  # Alpha-5 is already canonical
    [bad] = rejected
    assert bad.where == "line 9" and "I and O" in bad.reason and bad.text == "\n".join(I0001)


@pytest.mark.parametrize("field, number", [
    ("25544", 25544), ("00005", 5), ("    5", 5), ("   11", 11), ("99999", 99999),
    ("A0000", 100000), ("A0001", 100001), ("H9999", 179999), ("J0000", 180000), ("N9999", 229999),
    ("P0000", 230000), ("T1234", 271234), ("Z9999", 339999),
])
def test_catalogue_number_field(field, number):
    assert decode_catalog_number(field) == number
    assert encode_catalog_number(number) == (field.replace(" ", "0") if field[0] in " 0123456789" else field)


@pytest.mark.parametrize("field", ["I0001", "O1234", "a0001", "5    ", " 5 5 ", "     ", "A001 ", "AB123",
                                   "１２３４５"])
def test_catalogue_number_field_refused(field):
    with pytest.raises(ValueError, match="catalogue number"):
        decode_catalog_number(field)


def test_encode_refuses_what_a_tle_cannot_hold():
    with pytest.raises(ValueError, match="339999"):
        encode_catalog_number(340000)


def test_crlf_trailing_blanks_and_bom(tmp_path):
    """As files arrive from Windows tools and web downloads: BOM, CRLF, names padded to 24 characters,
    trailing blanks after the checksum."""
    text = (
        "\ufeff0 VANGUARD 1              \r\n"
        f"{VANGUARD_L1}   \r\n{VANGUARD_L2}\t\r\n"
        "ISS (ZARYA)             \r\n"
        f"{ISS_L1}\r\n{ISS_L2}\r\n"
    )
    for entries, rejected in (parse_text(text), load_catalog(_write(tmp_path / "c.tle", text.encode("utf-8")))):
        assert rejected == []
        assert [(e.norad_id, e.name) for e in entries] == [(5, "VANGUARD 1"), (25544, "ISS (ZARYA)")]
        assert near(entries[0].epoch, VANGUARD_EPOCH) and near(entries[1].epoch, ISS_EPOCH)
        assert entries[1].line1 == ISS_L1 and entries[1].line2 == ISS_L2  # no \r, no blanks kept
    # a BOM before a two-line set (no name line) must not hide line 1
    entries, rejected = load_catalog(_write(tmp_path / "bom.tle", b"\xef\xbb\xbf" + f"{ISS_L1}\n{ISS_L2}\n".encode()))
    assert rejected == [] and [e.norad_id for e in entries] == [25544]


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_lines_of_the_wrong_length_are_rejected_with_the_reason():
    short = ISS_L1[:68]  # the checksum column lost
    long2 = ISS_L2 + " 1440.0"  # extra columns (Vallado's verification file has them)
    text = f"A\n{short}\n{ISS_L2}\nB\n{ISS_L1}\n{long2}\nC\n{ISS_L1[:60]}\n{ISS_L2}\nD\n{ISS_L1}\n{ISS_L2}\n"
    entries, rejected = parse_tle_text(text)
    assert [e.name for e in entries] == ["D"]
    assert [r.where for r in rejected] == ["line 2", "line 5", "line 8"]
    assert "line 1 has 68 characters, not 69" in rejected[0].reason
    assert "line 2 has 76 characters, not 69" in rejected[1].reason
    assert "line 1 has 60 characters, not 69" in rejected[2].reason


def test_lines_of_two_different_objects_are_rejected():
    entries, rejected = parse_tle_text(f"{ISS_L1}\n{VANGUARD_L2}\n")
    assert entries == []
    assert "catalogue number 25544" in rejected[0].reason and "is 5" in rejected[0].reason


def test_orphan_lines_are_rejected_not_fatal():
    entries, rejected = parse_tle_text(f"{ISS_L1}\nGARBAGE\n{ISS_L1}\n{ISS_L2}\n")
    assert len(entries) == 1
    assert rejected[0].where == "line 1" and "partner" in rejected[0].reason


def test_text_without_any_element_set_is_a_rejection_not_an_empty_success():
    entries, rejected = parse_text("No GP data found\n")  # what CelesTrak answers for an unknown group
    assert entries == [] and rejected[0].where == "file" and "no element sets" in rejected[0].reason
    entries, rejected = parse_text("CCSDS_OMM_VERS = 2.0\nOBJECT_NAME = ISS (ZARYA)\n")
    assert entries == [] and "KVN" in rejected[0].reason
    assert parse_text("") == ([], []) and parse_text("\n\n") == ([], [])


def test_latest_epoch_per_object():
    older = ISS_L1.replace("08264.51782528", "08263.51782528")
    entries, _ = parse_tle_text(f"{older}\n{ISS_L2}\n{ISS_L1}\n{ISS_L2}\n")
    (latest,) = latest_by_object(entries)
    assert latest.line1 == ISS_L1


# --- OMM: the ISS element set above, as CelesTrak serves it in each format ---------------------------

ISS_OMM_JSON = """[{
    "OBJECT_NAME": "ISS (ZARYA)",
    "OBJECT_ID": "1998-067A",
    "EPOCH": "2008-09-20T12:25:40.104192",
    "MEAN_MOTION": 15.72125391,
    "ECCENTRICITY": 0.0006703,
    "INCLINATION": 51.6416,
    "RA_OF_ASC_NODE": 247.4627,
    "ARG_OF_PERICENTER": 130.536,
    "MEAN_ANOMALY": 325.0288,
    "EPHEMERIS_TYPE": 0,
    "CLASSIFICATION_TYPE": "U",
    "NORAD_CAT_ID": 25544,
    "ELEMENT_SET_NO": 292,
    "REV_AT_EPOCH": 56353,
    "BSTAR": -1.1606e-5,
    "MEAN_MOTION_DOT": -2.182e-5,
    "MEAN_MOTION_DDOT": 0
}]
"""

ISS_OMM_CSV = (
    "OBJECT_NAME,OBJECT_ID,EPOCH,MEAN_MOTION,ECCENTRICITY,INCLINATION,RA_OF_ASC_NODE,ARG_OF_PERICENTER,"
    "MEAN_ANOMALY,EPHEMERIS_TYPE,CLASSIFICATION_TYPE,NORAD_CAT_ID,ELEMENT_SET_NO,REV_AT_EPOCH,BSTAR,"
    "MEAN_MOTION_DOT,MEAN_MOTION_DDOT\r\n"
    "ISS (ZARYA),1998-067A,2008-09-20T12:25:40.104192,15.72125391,.0006703,51.6416,247.4627,130.5360,"
    "325.0288,0,U,25544,292,56353,-.11606E-4,-.2182E-4,0\r\n"
)

ISS_OMM_XML = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<ndm xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xsi:noNamespaceSchemaLocation="https://sanaregistry.org/r/ndmxml_unqualified/ndmxml-2.0.0-master-2.0.xsd">\n'
    '<omm id="CCSDS_OMM_VERS" version="2.0">\n'
    "<header><CREATION_DATE/><ORIGINATOR/></header><body><segment><metadata>"
    "<OBJECT_NAME>ISS (ZARYA)</OBJECT_NAME><OBJECT_ID>1998-067A</OBJECT_ID>"
    "<CENTER_NAME>EARTH</CENTER_NAME><REF_FRAME>TEME</REF_FRAME><TIME_SYSTEM>UTC</TIME_SYSTEM>"
    "<MEAN_ELEMENT_THEORY>SGP4</MEAN_ELEMENT_THEORY></metadata><data><meanElements>"
    "<EPOCH>2008-09-20T12:25:40.104192</EPOCH><MEAN_MOTION>15.72125391</MEAN_MOTION>"
    "<ECCENTRICITY>.0006703</ECCENTRICITY><INCLINATION>51.6416</INCLINATION>"
    "<RA_OF_ASC_NODE>247.4627</RA_OF_ASC_NODE><ARG_OF_PERICENTER>130.5360</ARG_OF_PERICENTER>"
    "<MEAN_ANOMALY>325.0288</MEAN_ANOMALY></meanElements><tleParameters><EPHEMERIS_TYPE>0</EPHEMERIS_TYPE>"
    "<CLASSIFICATION_TYPE>U</CLASSIFICATION_TYPE><NORAD_CAT_ID>25544</NORAD_CAT_ID>"
    "<ELEMENT_SET_NO>292</ELEMENT_SET_NO><REV_AT_EPOCH>56353</REV_AT_EPOCH><BSTAR>-.11606E-4</BSTAR>"
    "<MEAN_MOTION_DOT>-.2182E-4</MEAN_MOTION_DOT><MEAN_MOTION_DDOT>0</MEAN_MOTION_DDOT></tleParameters>"
    "</data></segment></body></omm>\n"
    "</ndm>\n"
)

# Space-Track's gp class: every value a string, more keys, a 'Z'-less epoch with a shorter fraction
ISS_OMM_SPACE_TRACK_JSON = json.dumps([{
    "CCSDS_OMM_VERS": "3.0", "COMMENT": "GENERATED VIA SPACE-TRACK.ORG API", "ORIGINATOR": "18 SPCS",
    "OBJECT_NAME": "ISS (ZARYA)", "OBJECT_ID": "1998-067A", "CENTER_NAME": "EARTH", "REF_FRAME": "TEME",
    "TIME_SYSTEM": "UTC", "MEAN_ELEMENT_THEORY": "SGP4", "EPOCH": "2008-09-20T12:25:40.104192",
    "MEAN_MOTION": "15.72125391", "ECCENTRICITY": "0.00067030", "INCLINATION": "51.6416",
    "RA_OF_ASC_NODE": "247.4627", "ARG_OF_PERICENTER": "130.5360", "MEAN_ANOMALY": "325.0288",
    "EPHEMERIS_TYPE": "0", "CLASSIFICATION_TYPE": "U", "NORAD_CAT_ID": "25544", "ELEMENT_SET_NO": "292",
    "REV_AT_EPOCH": "56353", "BSTAR": "-0.000011606", "MEAN_MOTION_DOT": "-0.00002182", "MEAN_MOTION_DDOT": "0",
    "DECAY_DATE": None, "TLE_LINE0": "0 ISS (ZARYA)", "TLE_LINE1": ISS_L1, "TLE_LINE2": ISS_L2,
}])


@pytest.mark.parametrize("kind", ["csv", "json", "xml", "space-track json"])
def test_omm_formats_load_to_the_tle(kind):
    text = {"csv": ISS_OMM_CSV, "json": ISS_OMM_JSON, "xml": ISS_OMM_XML,
            "space-track json": ISS_OMM_SPACE_TRACK_JSON}[kind]
    entries, rejected = parse_text(text)
    assert rejected == [] and len(entries) == 1
    e = entries[0]
    assert (e.norad_id, e.name) == (25544, "ISS (ZARYA)")
    assert near(e.epoch, ISS_EPOCH)
    # the very lines of the equivalent TLE, so the same element set in gold whichever format came in
    assert (e.line1, e.line2) == (ISS_L1, ISS_L2)
    deg = math.pi / 180.0
    s = e.satrec
    assert s.inclo == pytest.approx(51.6416 * deg, abs=1e-12)
    assert s.nodeo == pytest.approx(247.4627 * deg, abs=1e-12)
    assert s.ecco == pytest.approx(0.0006703, abs=1e-12)
    assert s.argpo == pytest.approx(130.5360 * deg, abs=1e-12)
    assert s.mo == pytest.approx(325.0288 * deg, abs=1e-12)
    assert s.no_kozai == pytest.approx(15.72125391 * 2 * math.pi / 1440.0, rel=1e-12)  # rad/min
    assert s.bstar == pytest.approx(-0.11606e-4, rel=1e-12)
    tle = Satrec.twoline2rv(ISS_L1, ISS_L2, WGS72)
    _, r_tle, _ = tle.sgp4(tle.jdsatepoch, tle.jdsatepochF + 0.5)
    _, r_omm, _ = s.sgp4(tle.jdsatepoch, tle.jdsatepochF + 0.5)
    assert max(abs(a - b) for a, b in zip(r_tle, r_omm)) < 1e-6  # km, half a day later


def test_omm_xml_with_a_namespace_and_a_bom():
    xml = "\ufeff" + ISS_OMM_XML.replace("<ndm ", '<ndm xmlns="urn:ccsds:recommendation:navigation:schema:ndmxml" ')
    entries, rejected = parse_text(xml)
    assert rejected == [] and [e.norad_id for e in entries] == [25544]


def test_omm_problems_are_rejected_per_record():
    good = json.loads(ISS_OMM_JSON)[0]
    records = [
        {**good, "NORAD_CAT_ID": 100001},  # fits a TLE as Alpha-5
        {**good, "NORAD_CAT_ID": 340000},  # does not
        {k: v for k, v in good.items() if k != "BSTAR"},
        {**good, "MEAN_ELEMENT_THEORY": "SGP4-XP"},
        {**good, "EPOCH": "yesterday"},
        "not a record",
    ]
    entries, rejected = parse_text(json.dumps(records))
    assert [(e.norad_id, e.line1[2:7]) for e in entries] == [(100001, "A0001")]
    assert [r.where for r in rejected] == ["record 1", "record 2", "record 3", "record 4", "record 5"]
    assert "339999" in rejected[0].reason
    assert "BSTAR" in rejected[1].reason
    assert "SGP4-XP" in rejected[2].reason
    assert "EPOCH" in rejected[3].reason
    assert "not an object" in rejected[4].reason


def test_omm_epoch_forms():
    good = json.loads(ISS_OMM_JSON)[0]
    for epoch in ("2008-09-20T12:25:40.104192Z", "2008-264T12:25:40.104192"):  # 'Z'; CCSDS day-of-year form
        [e], rejected = parse_text(json.dumps([{**good, "EPOCH": epoch}]))
        assert rejected == [] and near(e.epoch, ISS_EPOCH)


def test_malformed_omm_files_are_rejections():
    assert "XML" in parse_text("<ndm><omm>")[1][0].reason
    assert "JSON" in parse_text("[{")[1][0].reason
    assert "segment" in parse_text("<ndm></ndm>")[1][0].reason


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_catalog(tmp_path / "nope.tle")


# --- the real catalogues in ../shared/data --------------------------------------------------------

def _count_sets(path) -> tuple[int, set[int], list[str]]:
    """Independent count: lines beginning '1 ' followed by a line beginning '2 ', plain Python."""
    lines = path.read_text().splitlines()
    pairs = [(i, lines[i]) for i in range(len(lines) - 1)
             if lines[i].startswith("1 ") and lines[i + 1].startswith("2 ")]
    names = [lines[i - 1].strip() for i, _ in pairs]
    return len(pairs), {int(l1[2:7]) for _, l1 in pairs}, names


def test_real_catalogue_loads_completely(shared_data):
    active_file = shared_data / "catalog" / "celestrak_active_2025-10.tle"
    debris_file = shared_data / "catalog" / "celestrak_cosmos2251_debris_2025-10.tle"
    entries, rejected = load_catalog(active_file)
    debris, rejected_debris = load_catalog(debris_file)
    assert rejected == rejected_debris == []
    for loaded, path in ((entries, active_file), (debris, debris_file)):
        count, ids, names = _count_sets(path)
        assert len(loaded) == count
        assert {e.norad_id for e in loaded} == ids
        assert [e.name for e in loaded] == names
    assert (len(entries), len(debris)) == (12801, 606)  # also the data README's counts
    assert len(latest_by_object(entries + debris)) == 13407
