"""The catalogue out (sda.orbit.ndm, sda.pipeline.export): OMM (KVN, XML) and OEM with covariance,
valid per ccsds-ndm and read back to the same values. Expected values are read off the TLE by hand."""

from __future__ import annotations

import argparse
import datetime as dt

import ccsds_ndm
import numpy as np
import pytest
from sgp4.api import Satrec, jday

from sda.orbit import catalog, ndm
from sda.pipeline import export

# the ISS element set of the sgp4 package's documentation (checksums valid)
L1 = "1 25544U 98067A   19343.69339541  .00001764  00000-0  38792-4 0  9991"
L2 = "2 25544  51.6439 211.2001 0007417  17.6667  85.6398 15.50103472202482"
ROW = ndm.CatalogRow(25544, "ISS (ZARYA)", L1, L2, 408.0, 421.0)
CREATED = dt.datetime(2019, 12, 10, tzinfo=dt.timezone.utc)
# day 343.69339541 of 2019: 9 December, 0.69339541 d = 59,909.363424 s = 16:38:29.363424
EPOCH = dt.datetime(2019, 12, 9, 16, 38, 29, 363424, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("fmt", ["kvn", "xml"])
def test_omm_reads_back_to_the_tle_columns(fmt):
    [es] = ndm.TleSource([ROW]).element_sets()
    text = ndm.write_omm(es, fmt, CREATED)
    omm = ccsds_ndm.Omm.from_str(text, fmt)
    meta, data = omm.segment.metadata, omm.segment.data
    assert (meta.object_name, meta.object_id, meta.ref_frame, meta.mean_element_theory) == (
        "ISS (ZARYA)", "1998-067A", "TEME", "SGP4")
    me, tle = data.mean_elements, data.tle_parameters
    assert dt.datetime.fromisoformat(str(me.epoch).replace("Z", "")).replace(tzinfo=dt.timezone.utc) == EPOCH
    assert (me.mean_motion, me.eccentricity, me.inclination) == (15.50103472, 0.0007417, 51.6439)
    assert (me.ra_of_asc_node, me.arg_of_pericenter, me.mean_anomaly) == (211.2001, 17.6667, 85.6398)
    assert (tle.norad_cat_id, tle.element_set_no, tle.rev_at_epoch) == (25544, 999, 20248)
    assert (tle.bstar, tle.mean_motion_dot, tle.mean_motion_ddot) == (3.8792e-5, 1.764e-5, 0.0)


def test_omm_xml_gives_the_same_sgp4_orbit_through_the_catalogue_loader():
    [es] = ndm.TleSource([ROW]).element_sets()
    [entry], rejected = catalog.parse_text(ndm.write_omm(es, "xml", CREATED))
    assert not rejected and entry.norad_id == 25544
    original = Satrec.twoline2rv(L1, L2)
    jd, fr = jday(2019, 12, 10, 0, 0, 0.0)
    _, r0, v0 = original.sgp4(jd, fr)
    _, r1, v1 = entry.satrec.sgp4(jd, fr)
    assert np.allclose(r0, r1, atol=1e-6) and np.allclose(v0, v1, atol=1e-9)  # km, km/s


@pytest.mark.parametrize("fmt", ["kvn", "xml"])
def test_oem_reads_back_states_and_covariance(fmt):
    times = ndm.times_between(EPOCH, EPOCH + dt.timedelta(days=1), 43_200.0)  # epoch, +12 h, +1 day
    eph = ndm.TleSource([ROW]).ephemeris(25544, times)
    seg = ccsds_ndm.Oem.from_str(ndm.write_oem(eph, fmt, CREATED), fmt).segments[0]
    states = np.asarray(seg.data.state_vector_numpy)
    assert states.shape == (3, 6) and seg.metadata.ref_frame == "TEME"
    sat = Satrec.twoline2rv(L1, L2)
    jd, fr = jday(2019, 12, 9, 16, 38, 29.363424)
    _, r, v = sat.sgp4(jd, fr)
    assert np.array_equal(states, np.hstack([eph.r_km, eph.v_km_s]))  # repr() text reads back exactly
    assert np.allclose(states[0], [*r, *v], rtol=0, atol=1e-9)
    assert [c.cov_ref_frame for c in seg.data.covariance_matrix] == ["RTN"] * 3
    covs = np.asarray(seg.data.covariance_matrix_numpy)
    assert np.array_equal(covs, eph.cov_rtn)
    # LEO at the element set's epoch: sigma R, T, N = 100, 500, 200 m -> 0.01, 0.25, 0.04 km^2
    assert np.allclose(np.diag(covs[0])[:3], [0.01, 0.25, 0.04], rtol=1e-12)
    # one day on: 100 + 50, 500 + 1000 + 100, 200 + 50 m (the LEO growth law) -> km^2
    assert np.allclose(np.diag(covs[2])[:3], [0.150**2, 1.600**2, 0.250**2], rtol=1e-12)


def test_export_writes_one_file_per_object(tmp_path):
    source = ndm.TleSource([ROW])
    omm = export.write(source, argparse.Namespace(kind="omm", out=tmp_path / "omm", format="xml"), CREATED)
    assert [p.name for p in omm] == ["25544.omm.xml"]
    args = argparse.Namespace(kind="oem", out=tmp_path / "oem", format="kvn", objects="25544", start=EPOCH,
                              stop=EPOCH + dt.timedelta(minutes=2), step_s=60.0)
    [oem] = export.write(source, args, CREATED)
    assert oem.read_text().count("COV_REF_FRAME = RTN") == 3
    with pytest.raises(KeyError):
        export.write(source, argparse.Namespace(**{**vars(args), "objects": "99999"}), CREATED)
