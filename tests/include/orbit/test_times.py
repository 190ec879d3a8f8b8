"""sda.orbit.times, the one home of the pipeline's time conversions, against hand-computed instants
(2000-01-01T00:00:00Z is unix 946,684,800 s)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

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
