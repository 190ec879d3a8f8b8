"""sda.alerts.cdm: CCSDS CDM (KVN) parsing/writing and Pc from real CARA / TSX-TDX CDMs."""

from __future__ import annotations

import csv
import re
from datetime import datetime, timezone

import numpy as np
import pytest

from sda.alerts.cdm import new_cdm, parse_cdm, pc_from_cdm, write_cdm
from sda.alerts.cdm_model import CdmError
from sda.orbit.pc import rtn_basis

CARA_EXAMPLE = "000025994_conj_000037558_20210324_151047_20210323_154356"
_KVN_LINE = re.compile(r"^(COMMENT( .*)?|[A-Z0-9_]+ += \S.*?( \[[^\[\]]*\])?)$")


def _files(shared_data, sub):
    files = sorted((shared_data / "cdm" / sub).glob("*.cdm"))
    assert files, f"no CDMs in {sub}"
    return files


def _pc_table(shared_data):
    with open(shared_data / "pc" / "cara_real_cdm_pc_table.csv") as fh:
        return {r["Conjunction_ID"]: r for r in csv.DictReader(fh)}


# ------------------------------------------------------------------ parsing
def test_parse_real_cara_cdm_fields(shared_data):
    cdm = parse_cdm((shared_data / "cdm" / "cara_real" / f"{CARA_EXAMPLE}.cdm").read_text())
    assert cdm.version == "1.0"
    assert cdm.originator == "CARA"
    assert cdm.message_id == CARA_EXAMPLE
    assert cdm.header["MESSAGE_FOR"] == "TERRA"
    assert cdm.creation_date == datetime(2021, 3, 23, 15, 43, 56, tzinfo=timezone.utc)
    assert cdm.tca == datetime(2021, 3, 24, 15, 10, 47, 417000, tzinfo=timezone.utc)
    assert cdm.miss_distance_m == 108.0 and cdm.relative.unit("MISS_DISTANCE") == "m"
    assert cdm.relative_speed_ms == 11073.0
    np.testing.assert_array_equal(cdm.relative_position_rtn_m, [-5.5, 73.7, -78.2])
    np.testing.assert_array_equal(cdm.relative_velocity_rtn_ms, [52.5, -8157.0, -7488.6])
    assert cdm.collision_probability == 2.117e-02
    assert cdm.relative["COLLISION_PROBABILITY_METHOD"] == "FOSTER-1992"
    assert cdm.hbr_m == 15.0
    assert "SCREENING_OPTION = Covariance" in cdm.header.comments
    o1, o2 = cdm.object1, cdm.object2
    assert (o1.name, o1.designator, o1.object_name, o1.ref_frame) == (
        "OBJECT1", "000025994", "TERRA", "EME2000")
    assert o2.object_name == "IRIDIUM 33 DEB" and o2["INTERNATIONAL_DESIGNATOR"] == "1997-051XT"
    np.testing.assert_array_equal(o1.state_km, [
        3.146975532131119380e+01, 1.068529615130502634e+03, 6.991045229035728880e+03,
        7.032447307172804862e+00, -2.596820803888302720e+00, 3.643332059915923571e-01])
    assert o1.unit("X") == "km" and o1.unit("X_DOT") == "km/s"
    C = o1.cov_rtn
    assert C.shape == (6, 6) and np.array_equal(C, C.T)
    assert C[0, 0] == 1.265652366685803010e+01  # CR_R
    assert C[1, 0] == -2.584549971465440876e+01  # CT_R
    assert C[2, 1] == -8.011494203009111859e-01  # CN_T
    assert C[3, 0] == 2.587969671701851118e-02  # CRDOT_R
    assert C[5, 4] == -1.232721246600000086e-06  # CNDOT_TDOT
    assert C[5, 5] == 1.158660294200000003e-05  # CNDOT_NDOT
    assert o1.unit("CRDOT_RDOT") == "m**2/s**2"
    assert o2.get_float("OBS_USED") == 32.0


def test_hbr_comment_forms(shared_data):
    table = _pc_table(shared_data)
    for f in _files(shared_data, "cara_real"):
        cdm = parse_cdm(f.read_text())
        assert cdm.hbr_m == pytest.approx(float(table[f.stem]["HBR_m"]), abs=1e-9), f.name
    syn = shared_data / "cdm" / "cara_synthetic"
    assert parse_cdm((syn / "OmitronTestCase_Test01_HighPc.cdm").read_text()).hbr_m == 20.0
    assert parse_cdm((syn / "OmitronTestCase_Test05_MinMiss.cdm").read_text()).hbr_m == 6.0
    assert parse_cdm((syn / "OmitronTestCase_Test07_NonPDCovariance.cdm").read_text()).hbr_m == 52.8
    tsx = parse_cdm(_files(shared_data, "tsx_tdx_series")[0].read_text())
    assert tsx.hbr_m is None
    with pytest.raises(CdmError, match="hard-body radius"):
        pc_from_cdm(tsx)


def test_synthetic_relative_velocity_labelled_metres(shared_data):
    f = shared_data / "cdm" / "cara_synthetic" / "OmitronTestCase_Test01_HighPc.cdm"
    assert "RELATIVE_VELOCITY_T                = 13928.205451             [m]" in f.read_text()
    cdm = parse_cdm(f.read_text())
    assert cdm.relative.unit("RELATIVE_VELOCITY_T") == "m/s"
    assert cdm.relative.get_float("RELATIVE_VELOCITY_T") == 13928.205451
    assert any("RELATIVE_VELOCITY_T" in w for w in cdm.warnings)
    assert "[m/s]" in [ln for ln in write_cdm(cdm).splitlines() if "RELATIVE_VELOCITY_T" in ln][0]
    assert np.isnan(cdm.object1.get_float("RECOMMENDED_OD_SPAN"))


def test_all_reference_cdms_parse(shared_data):
    for sub in ("cara_real", "cara_synthetic", "tsx_tdx_series"):
        for f in _files(shared_data, sub):
            cdm = parse_cdm(f.read_text())
            assert cdm.object1.state_km.shape == (6,) and cdm.object2.cov_rtn.shape == (6, 6)


def test_relative_position_in_primary_rtn_matches_states(shared_data):
    """Independent check of the RTN basis on real data: the CDM's RELATIVE_POSITION_R/T/N
    (secondary - primary in the primary's RTN frame, written to 0.1 m)."""
    for sub, tol_r, tol_v in (("cara_real", 0.051, 0.051), ("tsx_tdx_series", 1e-6, 1e-6)):
        for f in _files(shared_data, sub):
            cdm = parse_cdm(f.read_text())
            o1, o2 = cdm.object1, cdm.object2
            M = rtn_basis(o1.position_m, o1.velocity_ms)
            dr = M.T @ (o2.position_m - o1.position_m)
            dv = M.T @ (o2.velocity_ms - o1.velocity_ms)
            np.testing.assert_allclose(dr, cdm.relative_position_rtn_m, atol=tol_r, rtol=0)
            np.testing.assert_allclose(dv, cdm.relative_velocity_rtn_ms, atol=tol_v, rtol=0)


def test_malformed_cdms_are_rejected():
    with pytest.raises(CdmError):
        parse_cdm("this is not a CDM\n")
    with pytest.raises(CdmError, match="OBJECT1 and OBJECT2"):
        parse_cdm("CCSDS_CDM_VERS = 1.0\nTCA = 2020-01-01T00:00:00\nOBJECT = OBJECT1\nX = 1 [km]\n")


# ------------------------------------------------------------------ writing
@pytest.mark.parametrize("sub", ["cara_real", "cara_synthetic", "tsx_tdx_series"])
def test_write_parse_round_trip(shared_data, sub):
    for f in _files(shared_data, sub):
        cdm = parse_cdm(f.read_text())
        text = write_cdm(cdm)
        for line in text.splitlines():
            assert _KVN_LINE.match(line), line
        back = parse_cdm(text)
        assert back == cdm, f.name
        assert back.hbr_m == cdm.hbr_m
        np.testing.assert_array_equal(back.object1.state_km, cdm.object1.state_km)
        np.testing.assert_array_equal(back.object2.cov_rtn, cdm.object2.cov_rtn)
        assert write_cdm(back) == text


def test_new_cdm_round_trip_exact_numbers():
    rng = np.random.default_rng(7)
    s1 = np.array([6778.137 + 1e-9 / 3, 0.1, -0.2, 0.0, 7.6686, 1e-3 / 7])
    s2 = s1 + [0.01 / 3, -0.02, 0.005, 0.0, -7.6, 7.6]
    covs = []
    for _ in range(2):
        A = rng.normal(size=(6, 6)) * [10, 50, 5, 0.01, 0.05, 0.005]
        covs.append(A @ A.T)
    cdm = new_cdm(tca="2025-10-04T12:00:00.123456", originator="SDA-FUSION", message_id="TEST-1",
                  creation_date="2025-10-03T00:00:00", state1_km=s1, cov1_rtn=covs[0],
                  state2_km=s2, cov2_rtn=covs[1], hbr_m=12.5,
                  object1={"OBJECT_DESIGNATOR": "25544", "OBJECT_NAME": "ISS (ZARYA)"},
                  relative={"COLLISION_PROBABILITY": 1.234e-5,
                            "COLLISION_PROBABILITY_METHOD": "FOSTER-1992"})
    back = parse_cdm(write_cdm(cdm))
    assert back == cdm
    np.testing.assert_array_equal(back.object1.state_km, s1)
    np.testing.assert_array_equal(back.object2.state_km, s2)
    np.testing.assert_array_equal(back.object1.cov_rtn, covs[0])
    np.testing.assert_array_equal(back.object2.cov_rtn, covs[1])
    assert back.hbr_m == 12.5
    assert back.object1.object_name == "ISS (ZARYA)"
    assert back.collision_probability == 1.234e-5
    assert back.tca == datetime(2025, 10, 4, 12, 0, 0, 123456, tzinfo=timezone.utc)
    assert back.miss_distance_m == pytest.approx(np.linalg.norm((s2 - s1)[:3]) * 1000)
    # and the Pc from the written message equals the Pc from the numbers
    assert pc_from_cdm(back).pc_2d == pc_from_cdm(cdm).pc_2d
    back.set_hbr_m(3.0)
    assert parse_cdm(write_cdm(back)).hbr_m == 3.0


# ------------------------------------------------------------------ Pc from CDMs
def test_real_cdms_match_cara_pc2d_noadj(shared_data):
    table = _pc_table(shared_data)
    files = _files(shared_data, "cara_real")
    assert len(files) == 53
    mismatches = []
    for f in files:
        expected = float(table[f.stem]["Pc2D_NoAdj"])
        res = pc_from_cdm(parse_cdm(f.read_text()), cross_correlation=False)
        if not res.pc_2d == pytest.approx(expected, rel=1e-3):
            mismatches.append((f.stem, res.pc_2d, expected))
    assert not mismatches, mismatches


def test_real_cdms_validity(shared_data):
    """CARA found no 2-D usage violation for its low-relative-velocity examples (123-495 m/s):
    they must stay valid; only the 0.33 m/s 48901/48903 formation pass is flagged."""
    table = _pc_table(shared_data)
    flagged = []
    for f in _files(shared_data, "cara_real"):
        res = pc_from_cdm(parse_cdm(f.read_text()), cross_correlation=False)
        if "low relative velocity" in table[f.stem]["Comment"]:
            assert res.valid, (f.stem, res.reason)
        if not res.valid:
            flagged.append(f.stem)
            assert np.isnan(res.pc) and res.pc_2d == pytest.approx(
                float(table[f.stem]["Pc2D_NoAdj"]), rel=1e-3)
    assert flagged == ["000048901_conj_000048903_20211219_182317_20211217_232706"]


def test_tsx_tdx_series_flagged_invalid(shared_data):
    files = _files(shared_data, "tsx_tdx_series")
    assert len(files) == 16
    for f in files:
        cdm = parse_cdm(f.read_text())
        res = pc_from_cdm(cdm, hbr_m=5.0)
        assert res.rel_speed_ms < 1.0
        assert res.rel_speed_ms == pytest.approx(cdm.relative_speed_ms, rel=1e-6)
        assert res.miss_m == pytest.approx(cdm.miss_distance_m, rel=1e-6)
        assert not res.valid, f.name
        assert np.isnan(res.pc)
        assert "extended" in res.reason or "offset" in res.reason


def test_synthetic_alfano_cdms_match_alfano_vectors(shared_data):
    """CARA's Alfano 05 / 07 CDMs (RTN covariances) give the same Pc as the ECI test vectors."""
    import json

    cases = {c["case"]: c for c in json.loads(
        (shared_data / "pc" / "alfano2009_cases.json").read_text())["cases"]}
    for n in (5, 7):
        cdm = parse_cdm((shared_data / "cdm" / "cara_synthetic" / f"AlfanoTestCase0{n}.cdm").read_text())
        res = pc_from_cdm(cdm)
        assert res.valid
        assert res.pc == pytest.approx(cases[n]["expected"]["cara_Pc2D_Foster"], rel=1e-3)
