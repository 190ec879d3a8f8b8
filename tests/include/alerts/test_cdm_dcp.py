"""CARA's density-forecast (DCP) comments in CDMs: read as printed in CARA's real messages, written and read
back, and the cross-correlated Pc of the 53 real CDMs against tests.cdm_reference (ccsds-ndm-py, quadrature)
and, with the density uncertainty set to zero, against CARA's Pc2D_NoAdj."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from sda.alerts.cdm import parse_cdm, pc_from_cdm, write_cdm
from sda.alerts.cdm_model import CdmError, Dcp, Entry
from tests.cdm_reference import pc_of_cdm, read_cdm

STEM = "000043613_conj_000051418_20220204_181230_20220129_152147"


def _files(shared_data):
    files = sorted((shared_data / "cdm" / "cara_real").glob("*.cdm"))
    assert len(files) == 53
    return files


def _table(shared_data):
    with open(shared_data / "pc" / "cara_real_cdm_pc_table.csv") as fh:
        return {r["Conjunction_ID"]: r for r in csv.DictReader(fh)}


def test_reads_caras_printed_dcp_values(shared_data):
    cdm = parse_cdm((shared_data / "cdm" / "cara_real" / f"{STEM}.cdm").read_text())
    d1, d2 = cdm.object1.dcp, cdm.object2.dcp
    assert d1.sigma == 2.013152860000000099e-01 and d2.sigma == 1.928476289999999926e-01
    np.testing.assert_array_equal(d1.rtn, [1.744779558750229942e+00, 2.182516140057652956e+04,
                                           1.007622273388133038e+00, -2.427203128558650747e+01,
                                           1.371734058030000050e-02, 9.991789355000000369e-04])
    np.testing.assert_array_equal(d2.rtn[:3], [-2.257686915115630200e+03, 4.895147030601886217e+05,
                                               1.253157575698160002e+02])


def test_dcp_round_trip_and_incomplete_set(shared_data):
    cdm = parse_cdm((shared_data / "cdm" / "cara_real" / f"{STEM}.cdm").read_text())
    written = Dcp(0.123456789012345678, [1e-3, -2.5e4, 3.0, -4.0, 5e-5, 6.0])
    cdm.object2.set_dcp(written)
    back = parse_cdm(write_cdm(cdm))
    assert back.object2.dcp.sigma == written.sigma
    np.testing.assert_array_equal(back.object2.dcp.rtn, written.rtn)
    assert sum("DCP" in c for c in back.object2.comments) == 3  # replaced, not added
    ref = read_cdm(write_cdm(cdm))["objects"][1]["dcp"]  # the independent reader
    assert ref[0] == written.sigma and np.array_equal(ref[1], written.rtn)
    cdm.object1.entries = [e for e in cdm.object1.entries if not e.value.startswith("DCP Sensitivity Vector RTN Vel")]
    with pytest.raises(CdmError, match="incomplete"):
        _ = cdm.object1.dcp
    cdm.object1.entries.append(Entry("COMMENT", "DCP Sensitivity Vector RTN Vel = 1 2 3 [km]"))
    with pytest.raises(CdmError, match="expected"):
        _ = cdm.object1.dcp


def test_real_cdms_cross_correlated_pc_matches_the_reference(shared_data):
    """Both readers apply CARA's correction; they agree for every Pc the quadrature resolves (>= 1e-10), and the
    correction moves many of CARA's own messages by more than 1 % (DCP along-track sensitivities of 10^4-10^5 m)."""
    moved = 0
    for f in _files(shared_data):
        text = f.read_text()
        ours = pc_from_cdm(parse_cdm(text)).pc_2d
        plain = pc_from_cdm(parse_cdm(text), cross_correlation=False).pc_2d
        if plain >= 1e-10:
            assert ours == pytest.approx(pc_of_cdm(read_cdm(text)), rel=1e-3), f.stem
            moved += abs(ours / plain - 1.0) > 0.01
    assert moved >= 10


def test_zero_density_uncertainty_gives_caras_pc2d_noadj(shared_data):
    table = _table(shared_data)
    for f in _files(shared_data):
        cdm = parse_cdm(f.read_text())
        for o in cdm.objects:
            o.set_dcp(Dcp(0.0, o.dcp.rtn))
        again = parse_cdm(write_cdm(cdm))
        assert pc_from_cdm(again).pc_2d == pytest.approx(float(table[f.stem]["Pc2D_NoAdj"]), rel=1e-3), f.stem
