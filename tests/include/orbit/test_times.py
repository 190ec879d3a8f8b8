"""sda.orbit.times, the one home of the pipeline's time conversions, against hand-computed instants
(2000-01-01T00:00:00Z is unix 946,684,800 s)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from sda.orbit import times
from sda.orbit.times import as_utc, parse_utc, unix, unix_seconds, utc

Y2K = 946_684_800.0
UTC = dt.timezone.utc


def test_unix_seconds_of_strings_naive_and_aware_timestamps():
    np.testing.assert_array_equal(unix_seconds(pd.Series(["1970-01-01T00:00:01Z", "2000-01-01T00:00:00Z"])),
                                  [1.0, Y2K])
    naive = pd.Series(pd.to_datetime(["2000-01-01 00:00:00.5"]))  # naive = UTC, as the lakehouse stores it
    np.testing.assert_array_equal(unix_seconds(naive), [Y2K + 0.5])
    aware = pd.Series(pd.to_datetime(["2000-01-01T02:00:00+02:00"], utc=True))
    np.testing.assert_array_equal(unix_seconds(aware), [Y2K])
    np.testing.assert_array_equal(unix_seconds(np.array(["2000-01-01T00:00:00"], dtype="datetime64[ns]")), [Y2K])
    assert np.isnan(unix_seconds(pd.Series([pd.NaT], dtype="datetime64[ns]"))[0])


def test_one_instant_both_ways():
    assert unix(dt.datetime(2000, 1, 1)) == Y2K
    assert unix(dt.datetime(2000, 1, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2)))) == Y2K
    assert unix(5) == 5.0
    assert utc(Y2K + 0.0000004) == dt.datetime(2000, 1, 1, tzinfo=UTC)  # to the microsecond
    assert utc(Y2K + 0.0000006) == dt.datetime(2000, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
    assert as_utc(dt.datetime(2000, 1, 1)) == dt.datetime(2000, 1, 1, tzinfo=UTC)
    assert as_utc(dt.datetime(2000, 1, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2)))).tzinfo == UTC


@pytest.mark.parametrize("text", ["2000-01-01T00:00:00Z", " 2000-01-01T00:00:00z ", "2000-01-01T00:00:00",
                                  "2000-01-01T01:00:00+01:00"])
def test_parse_utc_accepts_the_iso_forms(text):
    got = parse_utc(text)
    assert got == dt.datetime(2000, 1, 1, tzinfo=UTC) and got.tzinfo == UTC


def test_parse_utc_refuses_what_is_no_time():
    with pytest.raises(ValueError):
        parse_utc("yesterday")


# 2026-11-21T06:00:00Z is unix 1,795,240,800 s (20,778 days after 1970-01-01, plus 6 h); TAI - UTC has
# been 37 s since 2017-01-01 (IERS Bulletin C), 36 s during 2016.
NOV21_06 = 1_795_240_800 * 10**9


@pytest.mark.parametrize("written, scale, utc_ns", [
    (NOV21_06 + 37 * 10**9, "TAI", NOV21_06),  # 06:00:37 TAI
    (NOV21_06 + 18 * 10**9, "GPS", NOV21_06),  # GPS = TAI - 19 s: 06:00:18 GPS
    (NOV21_06 + 69_184 * 10**6, "TT", NOV21_06),  # TT = TAI + 32.184 s: 06:01:09.184 TT
    (NOV21_06 + 37 * 10**9 + 123_456_789, "TAI", NOV21_06 + 123_456_789),
    # 2016-12-31T12:00:36 TAI: before the leap second TAI - UTC was 36 s -> 12:00:00 UTC (unix 1,483,185,600)
    (1_483_185_636 * 10**9, "TAI", 1_483_185_600 * 10**9),
    # 2017-01-01T00:00:37 TAI, just after it: 00:00:00 UTC (unix 1,483,228,800)
    (1_483_228_837 * 10**9, "TAI", 1_483_228_800 * 10**9),
])
def test_utc_from_tai_gps_and_tt(written, scale, utc_ns):
    assert times.utc_ns_from_scale(written, scale) == utc_ns


def test_no_tai_minus_utc_before_1960():
    with pytest.raises(ValueError, match="before 1960"):
        times.utc_ns_from_scale(-400 * 365 * 86_400 * 10**9, "TAI")
