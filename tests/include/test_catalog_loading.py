import json

import pytest
from sgp4 import exporter, omm
from sgp4.api import Satrec

from sda.catalog import latest_by_object, load_catalog, parse_text, parse_tle_text

# ISS (ZARYA) as published, with valid checksums.
ISS_L1 = "1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927"
ISS_L2 = "2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537"


def test_two_and_three_line_sets_with_and_without_zero_prefix():
    text = f"{ISS_L1}\n{ISS_L2}\n0 ISS (ZARYA)\n{ISS_L1}\n{ISS_L2}\nISS PLAIN NAME\n{ISS_L1}\n{ISS_L2}\n"
    entries, rejected = parse_tle_text(text)
    assert rejected == []
    assert [e.name for e in entries] == ["OBJECT 25544", "ISS (ZARYA)", "ISS PLAIN NAME"]
    assert all(e.norad_id == 25544 for e in entries)
    # epoch 2008 day 264.51782528 -> 2008-09-20 12:25:40.104 UTC
    assert entries[0].epoch.isoformat().startswith("2008-09-20T12:25:40.1")
    perigee, apogee = entries[0].perigee_apogee_km
    assert 330 < perigee < apogee < 360


def test_orphan_lines_are_rejected_not_fatal():
    entries, rejected = parse_tle_text(f"{ISS_L1}\nGARBAGE\n{ISS_L1}\n{ISS_L2}\n")
    assert len(entries) == 1
    assert rejected[0].where == "line 1" and "partner" in rejected[0].reason


def test_latest_epoch_per_object():
    older = ISS_L1.replace("08264.51782528", "08263.51782528")
    entries, _ = parse_tle_text(f"{older}\n{ISS_L2}\n{ISS_L1}\n{ISS_L2}\n")
    (latest,) = latest_by_object(entries)
    assert latest.line1 == ISS_L1


def test_omm_json_csv_xml_agree_with_tle():
    sat = Satrec.twoline2rv(ISS_L1, ISS_L2)
    fields = exporter.export_omm(sat, "ISS (ZARYA)")
    as_json = json.dumps([fields])
    header = ",".join(fields)
    as_csv = header + "\n" + ",".join(str(fields[k]) for k in fields) + "\n"
    for text in (as_json, as_csv):
        entries, rejected = parse_text(text)
        assert rejected == [] and len(entries) == 1
        e = entries[0]
        assert e.norad_id == 25544 and e.name == "ISS (ZARYA)"
        _, r_tle, _ = sat.sgp4(sat.jdsatepoch, sat.jdsatepochF + 0.5)
        _, r_omm, _ = e.satrec.sgp4(sat.jdsatepoch, sat.jdsatepochF + 0.5)
        assert max(abs(a - b) for a, b in zip(r_tle, r_omm)) < 1e-3  # km, half a day later


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_catalog(tmp_path / "nope.tle")


def test_real_catalogue_loads_completely(shared_data):
    entries, rejected = load_catalog(shared_data / "catalog" / "celestrak_active_2025-10.tle")
    debris, rejected_debris = load_catalog(shared_data / "catalog" / "celestrak_cosmos2251_debris_2025-10.tle")
    assert (len(entries), len(debris)) == (12801, 606)  # counts from the data README
    assert rejected == rejected_debris == []
    assert len(latest_by_object(entries + debris)) == 13407
