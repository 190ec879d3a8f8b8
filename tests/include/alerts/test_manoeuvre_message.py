"""sda.alerts.manoeuvre_message without Spark: a gold manoeuvres row and its fused orbit as a CCSDS OPM (KVN),
read back by ccsds-ndm to hand-computed values; deterministic bytes; the JSON twin; written once."""

from __future__ import annotations

import datetime as dt
import json
import math

import ccsds_ndm
import pytest

from sda.alerts import manoeuvre_message as mm

UTC = dt.timezone.utc
WINDOW = dt.datetime(2026, 11, 21, 6, 0)  # naive, as Spark hands timestamps back (UTC)
MAN_ID = "0123456789abcdef0123456789abcdef"
FUSED_ID = "fedcba9876543210fedcba9876543210"


def _manoeuvre(**changes) -> dict:
    row = {
        "norad_id": 70017, "window_start": WINDOW, "seq": 0, "manoeuvre_id": MAN_ID,
        "burn_after": dt.datetime(2026, 11, 21, 7, 10), "burn_before": dt.datetime(2026, 11, 21, 7, 40),
        "burn_time": dt.datetime(2026, 11, 21, 7, 25, 30, 250000),
        "dv_r_ms": 0.25, "dv_t_ms": 1.5, "dv_n_ms": -0.125, "dv_ms": 1.5258, "dv_sigma_ms": 0.05,
        "statistic": 123.4, "dof": 12, "log10_p": -20.5, "passes": 2,
        "detected_at": dt.datetime(2026, 11, 21, 7, 48), "observations_after": 40, "reassociated": 10,
        "fused_id": FUSED_ID, "prior_fused_id": "e" * 32, "regime": "LEO", "run_id": "run-7",
    }
    return {**row, **changes}


def _covariance() -> list[float]:
    """7x7 row-major in m, m/s, m^2/kg: diagonal 4, 9, 16 m^2; 1e-4, 4e-4, 9e-4 m^2/s^2; 1e-6 for B;
    x-y 2 m^2; vx-x 0.01 m^2/s; B-x 0.5 (dropped: the OPM's covariance is the 6x6)."""
    cov = [0.0] * 49
    for i, v in enumerate((4.0, 9.0, 16.0, 1e-4, 4e-4, 9e-4, 1e-6)):
        cov[7 * i + i] = v
    cov[1] = cov[7] = 2.0
    cov[3] = cov[21] = 0.01
    cov[6] = cov[42] = 0.5
    return cov


def _orbit(**changes) -> dict:
    row = {
        "fused_id": FUSED_ID, "norad_id": 70017, "window_start": WINDOW,
        "epoch": dt.datetime(2026, 11, 21, 8, 5), "fit_start": dt.datetime(2026, 11, 21, 7, 30),
        "x_km": 6878.137, "y_km": -12.5, "z_km": 0.25, "vx_kms": 0.001, "vy_kms": 7.6125, "vz_kms": -0.5,
        "b_m2_kg": 0.0123, "covariance": _covariance(), "observations": 40, "rms": 1.05, "status": "converged",
        "regime": "LEO",
    }
    return {**row, **changes}


def _parse(text: str):
    message = ccsds_ndm.Opm.from_str(text, "kvn")
    message.validate()
    return message


def test_opm_reads_back_to_hand_computed_values():
    text = mm.opm_text(_manoeuvre(), _orbit(), "SAT-1 [DTC]", "2020-001A", originator="TEST-ORG")
    opm = _parse(text)
    assert opm.version == "3.0"
    header, meta, data = opm.header, opm.segment.metadata, opm.segment.data
    # the later of detected_at (07:48) and the re-fit's epoch (08:05)
    assert header.creation_date == "2026-11-21T08:05:00.000000"
    assert (header.originator, header.message_id) == ("TEST-ORG", f"TEST-ORG-OPM-{MAN_ID}")
    assert (meta.object_name, meta.object_id) == ("SAT-1 (DTC)", "2020-001A")  # brackets cannot be in a KVN value
    assert (meta.center_name, meta.ref_frame, meta.time_system) == ("EARTH", "TEME", "UTC")
    sv = data.state_vector
    assert sv.epoch == "2026-11-21T08:05:00.000000"
    assert (sv.x, sv.y, sv.z, sv.x_dot, sv.y_dot, sv.z_dot) == (6878.137, -12.5, 0.25, 0.001, 7.6125, -0.5)
    assert data.spacecraft_parameters.mass == 1000.0  # the placeholder
    cov = data.covariance_matrix
    assert cov.cov_ref_frame == "TEME"
    # m^2 -> km^2: / 1e6; m^2/s -> km^2/s: / 1e6; m^2/s^2 -> km^2/s^2: / 1e6
    assert (cov.cx_x, cov.cy_x, cov.cy_y, cov.cz_z) == (4e-6, 2e-6, 9e-6, 1.6e-5)
    assert (cov.cx_dot_x, cov.cx_dot_y, cov.cx_dot_x_dot, cov.cy_dot_y_dot, cov.cz_dot_z_dot) == (
        1e-8, 0.0, 1e-10, 4e-10, 9e-10)
    [man] = data.maneuver_parameters
    assert man.man_epoch_ignition == "2026-11-21T07:25:30.250000"
    assert (man.man_duration, man.man_delta_mass, man.man_ref_frame) == (0.0, -0.001, "RTN")
    assert (man.man_dv_1, man.man_dv_2, man.man_dv_3) == (0.00025, 0.0015, -0.000125)  # km/s
    comments = " | ".join(man.comment)
    assert "after 2026-11-21T07:10:00.000000Z, not after 2026-11-21T07:40:00.000000Z" in comments
    assert "delta-v 1.526 m/s, 1-sigma 0.05 m/s" in comments
    assert "statistic 123.4 with 12 degrees of freedom, log10 p = -20.500" in comments and "2 pass(es)" in comments
    assert "mass change is unknown" in comments
    assert "MAN_DV_1             = 0.00025 [km/s]" in text.splitlines()


def test_creation_date_is_detected_at_when_later_than_the_epoch():
    opm = _parse(mm.opm_text(_manoeuvre(detected_at=dt.datetime(2026, 11, 21, 9, 0, 0, 5)), _orbit()))
    assert opm.header.creation_date == "2026-11-21T09:00:00.000005"
    assert opm.header.originator == "SDA-FUSION" and opm.segment.metadata.object_name == "NORAD 70017"
    assert opm.segment.metadata.object_id == "UNKNOWN"


def test_same_rows_same_bytes():
    text = mm.opm_text(_manoeuvre(), _orbit(), "SAT-1", "2020-001A")
    assert mm.opm_text(_manoeuvre(), _orbit(), "SAT-1", "2020-001A") == text
    # aware and naive (UTC) times are the same instants
    aware = {k: v.replace(tzinfo=UTC) if isinstance(v, dt.datetime) else v for k, v in _manoeuvre().items()}
    assert mm.opm_text(aware, _orbit(), "SAT-1", "2020-001A") == text
    assert mm.json_text(aware, _orbit(), "SAT-1", "2020-001A") == mm.json_text(_manoeuvre(), _orbit(), "SAT-1",
                                                                                "2020-001A")


def test_json_twin_holds_everything_the_opm_says():
    text = mm.json_text(_manoeuvre(), _orbit(), "SAT-1", "2020-001A")
    body = json.loads(text)
    assert body["format"] == "sda-manoeuvre/1" and body["name"] == "SAT-1"
    assert body["manoeuvre"]["burn_time"] == "2026-11-21T07:25:30.250000Z" and body["manoeuvre"]["dv_t_ms"] == 1.5
    assert body["orbit"]["epoch"] == "2026-11-21T08:05:00.000000Z" and len(body["orbit"]["covariance"]) == 49
    parts = mm.from_json(text)
    assert parts["manoeuvre"]["burn_time"] == dt.datetime(2026, 11, 21, 7, 25, 30, 250000, tzinfo=UTC)
    assert mm.opm_text(**parts) == mm.opm_text(_manoeuvre(), _orbit(), "SAT-1", "2020-001A")


def test_refused_inputs_and_a_missing_covariance():
    with pytest.raises(ValueError, match="names fused orbit"):
        mm.opm_text(_manoeuvre(), _orbit(fused_id="other"))
    with pytest.raises(ValueError, match="no delta-v"):
        mm.opm_text(_manoeuvre(dv_t_ms=None), _orbit())
    cov = _covariance()
    cov[0] = math.nan
    text = mm.opm_text(_manoeuvre(dv_sigma_ms=math.nan), _orbit(covariance=cov))
    opm = _parse(text)
    assert opm.segment.data.covariance_matrix is None and "CX_X" not in text
    assert "no covariance" in text and "1-sigma unknown m/s" in text


def test_written_once(tmp_path):
    man, orbit = _manoeuvre(), _orbit()
    opm_name, json_name = mm.file_names(MAN_ID)
    assert (opm_name, json_name) == (f"OPM-{MAN_ID}.opm", f"OPM-{MAN_ID}.json")
    assert not mm.emitted(tmp_path, MAN_ID)
    assert mm.emit(man, orbit, tmp_path, "SAT-1", "2020-001A") == 2
    assert mm.emitted(tmp_path, MAN_ID)
    first = (tmp_path / opm_name).read_bytes()
    assert mm.emit(man, orbit, tmp_path, "SAT-1", "2020-001A") == 0  # publishing twice writes once
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([opm_name, json_name])
    # a crash between the twin and the OPM: the OPM is written from the twin, whatever the inputs say now
    (tmp_path / opm_name).unlink()
    assert mm.emit(man, orbit, tmp_path, "RENAMED", "2020-001A") == 1
    assert (tmp_path / opm_name).read_bytes() == first


def test_a_revision_is_a_detection_of_the_same_object_whose_bracket_overlaps():
    old = _manoeuvre()  # bracket 07:10 .. 07:40
    at = dt.datetime  # brevity
    assert mm.revises(_manoeuvre(manoeuvre_id="b", burn_after=at(2026, 11, 21, 7, 40)), old)  # touching
    assert mm.revises(_manoeuvre(manoeuvre_id="b", burn_after=at(2026, 11, 21, 6, 0),
                                 burn_before=at(2026, 11, 21, 7, 10, 0, 1)), old)
    assert not mm.revises(_manoeuvre(manoeuvre_id="b", burn_after=at(2026, 11, 21, 7, 40, 0, 1),
                                     burn_before=at(2026, 11, 21, 8, 0)), old)  # just after it: another burn
    assert not mm.revises(_manoeuvre(norad_id=70018), old)  # another object


def test_a_published_manoeuvre_no_detection_keeps_is_withdrawn_once(tmp_path):
    """Two published manoeuvres; the current rows keep one (revised: a new id, its bracket overlapping) and not
    the other: that one is withdrawn, naming the window's new fit, at the later of its detection and that fit's
    epoch; once."""
    kept, gone = _manoeuvre(), _manoeuvre(manoeuvre_id="a" * 32, norad_id=70018, fused_id="f" * 32)
    mm.emit(kept, _orbit(), tmp_path)
    mm.emit(gone, _orbit(norad_id=70018, fused_id="f" * 32), tmp_path)
    revision = _manoeuvre(manoeuvre_id="b" * 32, burn_after=dt.datetime(2026, 11, 21, 7, 20), fused_id="c" * 32)
    assert mm.published_ids(tmp_path) == sorted([MAN_ID, "a" * 32])
    [withdrawn] = mm.to_withdraw(tmp_path, [revision])
    assert withdrawn["manoeuvre_id"] == "a" * 32 and withdrawn["norad_id"] == 70018
    refit = _orbit(norad_id=70018, fused_id="d" * 32, epoch=dt.datetime(2026, 11, 21, 8, 50))
    with pytest.raises(ValueError, match="still stands"):
        mm.withdrawal_text(withdrawn, _orbit(norad_id=70018, fused_id="f" * 32))
    assert mm.withdraw(withdrawn, refit, tmp_path) == 1
    body = json.loads((tmp_path / f"OPM-{'a' * 32}.withdrawal.json").read_text())
    assert body["format"] == "sda-manoeuvre-withdrawal/1"
    assert body["creation_date"] == "2026-11-21T08:50:00.000000Z"  # the re-fit's epoch, after detected_at 07:48
    assert body["withdraws"] == {"message_id": f"SDA-FUSION-OPM-{'a' * 32}",
                                 "files": [f"OPM-{'a' * 32}.opm", f"OPM-{'a' * 32}.json"]}
    assert body["orbit"]["fused_id"] == "d" * 32 and body["manoeuvre"]["burn_time"] == "2026-11-21T07:25:30.250000Z"
    assert mm.withdraw(withdrawn, refit, tmp_path) == 0  # written once
    assert mm.published_ids(tmp_path) == [MAN_ID] and mm.to_withdraw(tmp_path, [revision]) == []
    # with no current row at all, the revised message is withdrawn too
    assert [m["manoeuvre_id"] for m in mm.to_withdraw(tmp_path, [])] == [MAN_ID]
