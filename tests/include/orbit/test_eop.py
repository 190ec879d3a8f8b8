"""sda.orbit.eop: CelesTrak EOP CSV parsing and interpolation, on a hand-written snippet with hand-computed
values (including the 2016-12-31 leap second); and sda.orbit.frames.Eop's zero default."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from sda.orbit import frames
from sda.orbit.eop import EopTable, unix_to_mjd

# CelesTrak's layout (https://celestrak.org/SpaceData/EOP-format.php); round, made-up values around
# the real leap second at the end of 2016-12-31 (TAI-UTC 36 -> 37 s, UT1-UTC jumps by +1 s).
CSV = """\
DATE,MJD,X,Y,UT1-UTC,LOD,DPSI,DEPS,DX,DY,DAT,DATA_TYPE
2016-12-30,57752,0.100000,0.250000,-0.4070000,0.0010000,-0.100000,-0.010000,0.000100,-0.000100,36,O
2016-12-31,57753,0.102000,0.254000,-0.4080000,0.0010000,-0.100000,-0.010000,0.000100,-0.000100,36,O
2017-01-01,57754,0.106000,0.256000,0.5910000,0.0010000,-0.100000,-0.010000,0.000100,-0.000100,37,O
2017-01-02,57755,0.110000,0.260000,0.5900000,,,,,,37,P
"""


def unix(*args) -> float:
    return dt.datetime(*args, tzinfo=dt.timezone.utc).timestamp()


@pytest.fixture(scope="module")
def table() -> EopTable:
    return EopTable.from_csv_text(CSV)


def test_mjd_of_unix_times():
    assert float(unix_to_mjd(0.0)) == 40587.0
    assert float(unix_to_mjd(unix(2016, 12, 30))) == 57752.0


def test_parses_the_columns(table):
    assert table.mjd.tolist() == [57752.0, 57753.0, 57754.0, 57755.0]
    assert table.xp_arcsec.tolist() == [0.1, 0.102, 0.106, 0.11]
    assert table.yp_arcsec.tolist() == [0.25, 0.254, 0.256, 0.26]
    assert table.dut1_s.tolist() == [-0.407, -0.408, 0.591, 0.59]
    assert table.dat_s.tolist() == [36.0, 36.0, 37.0, 37.0]


def test_on_a_row_the_row_values(table):
    eop = table.at(unix(2016, 12, 31))
    assert isinstance(eop, frames.Eop) and isinstance(eop.dut1_s, float)
    assert (eop.dut1_s, eop.xp_arcsec, eop.yp_arcsec) == pytest.approx((-0.408, 0.102, 0.254), abs=1e-12)
    assert table.at(unix(2017, 1, 1)).dut1_s == pytest.approx(0.591, abs=1e-12)  # new day: DAT 37 in force
    assert table.at(unix(2017, 1, 2)).dut1_s == pytest.approx(0.590, abs=1e-12)  # the last row is inside


def test_linear_interpolation_within_a_day(table):
    # 2016-12-30 06:00 = MJD 57752.25: a quarter of the way to the next row
    eop = table.at(unix(2016, 12, 30, 6))
    assert eop.xp_arcsec == pytest.approx(0.100 + 0.25 * 0.002, abs=1e-12)  # 0.1005
    assert eop.yp_arcsec == pytest.approx(0.250 + 0.25 * 0.004, abs=1e-12)  # 0.251
    assert eop.dut1_s == pytest.approx(-0.407 + 0.25 * -0.001, abs=1e-12)  # -0.40725


def test_interpolation_across_the_leap_second(table):
    # 2016-12-31 12:00: UT1-TAI goes -36.408 -> -36.409, so -36.4085 + DAT 36 = -0.4085 s.
    # (Interpolating UT1-UTC itself would give (-0.408 + 0.591) / 2 = +0.0915 s, 0.5 s wrong.)
    eop = table.at(unix(2016, 12, 31, 12))
    assert eop.dut1_s == pytest.approx(-0.4085, abs=1e-12)
    assert eop.xp_arcsec == pytest.approx(0.104, abs=1e-12)
    assert eop.yp_arcsec == pytest.approx(0.255, abs=1e-12)
    # one second before midnight: still DAT 36, UT1-TAI -36.409 + 0.001 / 86400
    assert table.at(unix(2016, 12, 31, 23, 59, 59)).dut1_s == pytest.approx(-0.409 + 0.001 / 86400, abs=1e-9)


def test_arrays_in_arrays_out(table):
    t = np.array([unix(2016, 12, 30, 6), unix(2016, 12, 31, 12), unix(2017, 1, 1, 18)])
    eop = table.at(t)
    assert eop.dut1_s.shape == (3,)
    # 2017-01-01 18:00: 0.591 + 0.75 * -0.001 = 0.59025
    assert np.allclose(eop.dut1_s, [-0.40725, -0.4085, 0.59025], atol=1e-12, rtol=0)
    assert np.allclose(eop.xp_arcsec, [0.1005, 0.104, 0.109], atol=1e-12, rtol=0)


def test_outside_the_table_raises(table):
    with pytest.raises(ValueError, match="outside the EOP table"):
        table.at(unix(2016, 12, 29, 23, 59, 59))
    with pytest.raises(ValueError, match="outside the EOP table"):
        table.at(np.array([unix(2016, 12, 31), unix(2017, 1, 2, 0, 0, 1)]))


def test_without_a_dat_column_leap_seconds_come_from_the_jump():
    rows = [ln.rsplit(",", 2)[0] for ln in CSV.splitlines()]  # drop DAT and DATA_TYPE
    table = EopTable.from_csv_text("\n".join(rows) + "\n")
    assert table.at(unix(2016, 12, 31, 12)).dut1_s == pytest.approx(-0.4085, abs=1e-12)
    assert table.at(unix(2017, 1, 1, 18)).dut1_s == pytest.approx(0.59025, abs=1e-12)


def test_blank_rows_skipped_unsorted_rows_sorted_and_files_read(tmp_path):
    header, *rows = CSV.splitlines()
    text = "\n".join([header, rows[2], rows[0], "2017-01-03,57756,,,,,,,,,37,P", rows[3], rows[1]]) + "\n"
    path = tmp_path / "EOP-All.csv"
    path.write_text(text)
    table = EopTable.from_csv(path)
    assert table.mjd.tolist() == [57752.0, 57753.0, 57754.0, 57755.0]
    assert table.at(unix(2016, 12, 31, 12)).dut1_s == pytest.approx(-0.4085, abs=1e-12)
    with path.open() as fh:
        assert EopTable.from_csv(fh).mjd.tolist() == table.mjd.tolist()


def test_bad_files_are_refused():
    with pytest.raises(ValueError, match="lacks column"):
        EopTable.from_csv_text("DATE,MJD,X,Y\n2017-01-01,57754,0.1,0.2\n")
    with pytest.raises(ValueError, match="fewer than two"):
        EopTable.from_csv_text(CSV.splitlines()[0] + "\n" + CSV.splitlines()[1] + "\n")


def test_a_table_drives_the_frame_chain(table):
    t = np.array([unix(2016, 12, 30, 6), unix(2016, 12, 31, 12)])
    r = np.array([[7000.0, 0.0, 0.0], [0.0, 42164.0, 0.0]])
    v = np.array([[0.0, 7.5, 0.0], [-3.07, 0.0, 0.0]])
    eop = table.at(t)
    r_e, v_e = frames.teme_to_ecef(r, v, t, eop=eop)
    r_back, v_back = frames.ecef_to_teme(r_e, v_e, t, eop=eop)
    assert np.allclose(r_back, r, atol=1e-9) and np.allclose(v_back, v, atol=1e-12)
    # the UT1 correction is a rotation by omega * dut1 about z: 7000 km * 7.29e-5 * 0.407 s = 0.208 km
    r_none, _ = frames.teme_to_ecef(r, v, t)
    assert np.linalg.norm(r_e[0] - r_none[0]) == pytest.approx(7000.0 * frames.OMEGA_EARTH * 0.40725, rel=1e-3)


def test_zero_eop_is_the_default_chain():
    t = np.array([1.5e9, 1.7e9])
    r = np.array([[5094.18, 6127.64, 6380.34], [-1033.48, 7901.30, 6380.36]])
    v = np.array([[-4.746, 0.786, 5.532], [-3.226, -2.872, 5.532]])
    zero = frames.Eop()
    assert np.array_equal(frames.gmst(t, zero), frames.gmst(t))
    for a, b in zip(frames.teme_to_ecef(r, v, t, eop=zero), frames.teme_to_ecef(r, v, t)):
        assert np.allclose(a, b, atol=1e-12, rtol=0)
    assert np.allclose(frames.site_teme(40.0, -70.0, 10.0, t, eop=zero), frames.site_teme(40.0, -70.0, 10.0, t),
                       atol=1e-12, rtol=0)
