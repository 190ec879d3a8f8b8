"""The renewal rule (sda.orbit.screening.renewal): a fused object's new element set replaces the one screened
before only when the two stray apart by more than the new set's own fit error plus the renewal threshold."""

from __future__ import annotations

import datetime as dt

from sda.orbit.screening.renewal import renew, strays_m

UTC = dt.timezone.utc
L1 = "1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927"
L2 = "2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537"
L2_MOVED = L2.replace("325.0288", "325.0298")  # 0.001 deg of mean anomaly: ~120 m along track
START = dt.datetime(2008, 9, 20, 12, 0, tzinfo=UTC).timestamp()
END = START + 6 * 3600.0
CATALOGUE = [{"norad_id": 25544, "line1": "c1", "line2": "c2", "epoch": "catalogue"},
             {"norad_id": 1, "line1": "o1", "line2": "o2", "epoch": "other"}]
FUSED = {25544: {"line1": L1, "line2": L2, "epoch": "fit", "lines_max_m": 30.0}}


def test_strays_m_measures_the_largest_distance():
    assert strays_m((L1, L2), (L1, L2), START, END) == 0.0
    assert 60.0 < strays_m((L1, L2), (L1, L2_MOVED), START, END) < 250.0


def test_a_fused_object_is_screened_with_its_new_set_when_nothing_was_screened():
    got = renew(CATALOGUE, FUSED, {}, START, END, 500.0)
    assert (got.fused, got.renewed, got.kept) == (1, 0, 0)
    assert got.rows[0] == {"norad_id": 25544, "line1": L1, "line2": L2, "epoch": "fit"}
    assert got.rows[1] == CATALOGUE[1]  # no fused orbit: the catalogue's newest element set


def test_the_screened_set_is_kept_while_it_stays_within_the_threshold():
    screened = {25544: (L1, L2_MOVED, START - 3600.0)}
    kept = renew(CATALOGUE, FUSED, screened, START, END, 500.0)
    assert (kept.fused, kept.renewed, kept.kept) == (1, 0, 1)
    assert kept.rows[0]["line2"] == L2_MOVED
    assert kept.rows[0]["epoch"] == dt.datetime.fromtimestamp(START - 3600.0, UTC)
    renewed = renew(CATALOGUE, FUSED, screened, START, END, 10.0)
    assert (renewed.fused, renewed.renewed, renewed.kept) == (1, 1, 0)
    assert renewed.rows[0]["line2"] == L2
