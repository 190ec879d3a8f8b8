"""CDMs another tool can read: the independent reader and 2-D Pc of tests/cdm_reference.py checked against
NASA CARA's own figures, and sda.alerts.cdm reading an ITRF message as the standard defines it.

The end-to-end check (every CDM of a pipeline run read with ccsds-ndm-py, its Pc recomputed from the message
alone) is in tests/jobs/test_fuse.py, whose run already writes CDMs of fused and modelled covariances.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from sda.alerts.cdm import parse_cdm, pc_from_cdm, write_cdm
from tests.cdm_reference import pc2d, pc_of_cdm, read_cdm, rtn_axes

REL = 1e-3  # CARA's own tolerance for its 2-D Pc unit tests
# real CARA CDMs (Pc ~1e-4) whose Pc moves by a factor 3-6 when their covariances are put on axes turned by
# the few degrees between an Earth-fixed and an inertial velocity
TURN_SENSITIVE = ("000040115_conj_000030660_20230721_100115_20230720_061903",
                  "000025994_conj_000026980_20220928_223445_20220924_220647")


def _pc_table(shared_data):
    with open(shared_data / "pc" / "cara_real_cdm_pc_table.csv") as fh:
        return {r["Conjunction_ID"]: r for r in csv.DictReader(fh)}


def test_reference_pc_matches_cara_unit_vectors(shared_data):
    cases = json.loads((shared_data / "pc" / "cara_unit_test_vectors.json").read_text())["cases"]
    checked = 0
    for c in cases:
        if c["hbr_shape"] != "circle" or not c["hbr"]:
            continue
        got = pc2d(c["r1"], c["v1"], np.asarray(c["cov1"]), c["r2"], c["v2"], np.asarray(c["cov2"]), c["hbr"])
        assert got == pytest.approx(c["expected_Pc"], rel=REL), c["id"]
        checked += 1
    assert checked == 9


def test_reference_pc_matches_cara_pc2d_of_the_alfano_cases(shared_data):
    cases = json.loads((shared_data / "pc" / "alfano2009_cases.json").read_text())["cases"]
    expected = {c["case"]: c["expected"]["cara_Pc2D_Foster"] for c in cases}
    got = {c["case"]: pc2d(c["r1"], c["v1"], np.asarray(c["cov1_6x6"]), c["r2"], c["v2"],
                           np.asarray(c["cov2_6x6"]), c["hbr_m"]) for c in cases if expected[c["case"]] is not None}
    assert len(got) == 11
    for case, pc in got.items():
        assert pc == pytest.approx(expected[case], rel=REL), case


def test_real_cara_cdms_read_by_ccsds_ndm_give_caras_pc(shared_data):
    """The 53 real CARA CDMs read with ccsds-ndm-py, R/T/N built from the states as written: CARA's
    Pc2D_NoAdj (the 2-D Pc from the states as written) for each, with the HBR of its COMMENT."""
    table = _pc_table(shared_data)
    files = sorted((shared_data / "cdm" / "cara_real").glob("*.cdm"))
    assert len(files) == 53
    for f in files:
        cdm = read_cdm(f.read_text())
        assert cdm["hbr"] == float(table[f.stem]["HBR_m"]), f.stem
        expected = float(table[f.stem]["Pc2D_NoAdj"])  # CARA's Pc without the cross-correlation correction
        assert pc_of_cdm(cdm, cross_correlation=False) == pytest.approx(expected, rel=REL), f.stem


def _to_itrf(cdm, unix_s: float) -> None:
    """Rewrite an inertial CDM's objects in ITRF (PEF at UT1 = UTC), the covariance on the R/T/N axes of the
    ITRF state, as a sender writing ITRF would. Built here by hand: r_e = R3(theta) r, v_e = R3(theta) v - w x r_e."""
    from sda.orbit import frames, inertial

    theta = float(frames.gmst(unix_s))
    c, s = np.cos(theta), np.sin(theta)
    rot = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
    skew = np.array([[0.0, -frames.OMEGA_EARTH, 0.0], [frames.OMEGA_EARTH, 0.0, 0.0], [0.0, 0.0, 0.0]])
    to_teme = inertial.eme2000_to_teme(int(round(unix_s * 1e9)))
    for o in cdm.objects:
        r, v = to_teme @ o.position_m, to_teme @ o.velocity_ms
        jac = np.block([[rot @ to_teme, np.zeros((3, 3))], [-skew @ rot @ to_teme, rot @ to_teme]])
        r_e, v_e = rot @ r, rot @ v - skew @ (rot @ r)
        big_i = np.kron(np.eye(2), rtn_axes(o.position_m, o.velocity_ms))
        big_e = np.kron(np.eye(2), rtn_axes(r_e, v_e))
        cov = big_e.T @ jac @ big_i @ o.cov_rtn @ big_i.T @ jac.T @ big_e
        o.set_state_km(np.r_[r_e, v_e] / 1000.0)
        o.set_cov_rtn(0.5 * (cov + cov.T))
        o.set("REF_FRAME", "ITRF")


@pytest.mark.parametrize("stem", TURN_SENSITIVE)
def test_sda_reads_an_itrf_cdm_with_rtn_axes_of_the_itrf_state(shared_data, stem):
    """A real CARA CDM rewritten in ITRF (covariance on the ITRF state's R/T/N axes): sda.alerts.cdm gives
    CARA's Pc. The same covariance numbers on the inertial state's axes (the few-degree turn of the velocity
    between the frames: states and covariance axes from different frames) miss it by far."""
    expected = float(_pc_table(shared_data)[stem]["Pc2D_NoAdj"])
    cdm = parse_cdm((shared_data / "cdm" / "cara_real" / f"{stem}.cdm").read_text())
    _to_itrf(cdm, cdm.tca.timestamp())
    itrf = parse_cdm(write_cdm(cdm))
    assert [o.ref_frame for o in itrf.objects] == ["ITRF", "ITRF"]
    assert pc_from_cdm(itrf, cross_correlation=False).pc_2d == pytest.approx(expected, rel=REL)
    # the inconsistency a CDM must not have: these covariances on the R/T/N axes of the inertial states
    mixed = read_cdm((shared_data / "cdm" / "cara_real" / f"{stem}.cdm").read_text())
    for o, written in zip(mixed["objects"], itrf.objects):
        o["cov_rtn"] = written.cov_rtn
    assert abs(pc_of_cdm(mixed, cross_correlation=False) / expected - 1.0) > 1.0
