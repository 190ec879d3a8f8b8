"""sda.pipeline.space_weather without Spark: which row of an interval wins, and Kp as it is spoken. The table
written and read through Spark is tested with ingest (tests/jobs/test_ingest_space_weather.py)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from sda.pipeline import space_weather

UTC = dt.timezone.utc
T0, T3 = dt.datetime(2026, 11, 21, 0, tzinfo=UTC), dt.datetime(2026, 11, 21, 3, tzinfo=UTC)
NINE, TWELVE = dt.datetime(2026, 11, 21, 9, tzinfo=UTC), dt.datetime(2026, 11, 21, 12, tzinfo=UTC)


@pytest.mark.parametrize("kp, symbol", [(0.0, "0o"), (1 / 3, "0+"), (2 / 3, "1-"), (4 / 3, "1+"), (5 / 3, "2-"),
                                        (2.0, "2o"), (14 / 3, "5-"), (5.0, "5o"), (22 / 3, "7+"), (9.0, "9o")])
def test_kp_symbol(kp, symbol):
    assert space_weather.kp_symbol(kp) == symbol


def test_the_newest_issue_wins_then_the_larger_path_then_the_larger_sha():
    rows = pa.table({
        "interval_start": [T3, T0, T0, T3, T3, T0],
        "issued": [NINE, NINE, TWELVE, NINE, NINE, NINE],
        "source_file": ["b.txt", "a.txt", "a.txt", "c.txt", "c.txt", "z.txt"],
        "source_sha256": ["1", "1", "1", "2", "3", "9"],
        "kp": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    })
    newest = space_weather.newest_per_interval(rows)
    # 00:00: the 12:00 issue (row 1) beats the 09:00 ones whatever their paths; 03:00: c.txt beats b.txt, and of
    # the two c.txt (rewritten with the same issue time) the larger sha256
    assert newest.to_pydict() == {"interval_start": [T0, T3], "issued": [TWELVE, NINE],
                                  "source_file": ["a.txt", "c.txt"], "source_sha256": ["1", "3"], "kp": [3.0, 5.0]}
    assert space_weather.newest_per_interval(rows.take([5, 4, 3, 2, 1, 0])).to_pydict() == newest.to_pydict()


def test_the_issue_of_a_file_is_that_of_its_intervals():
    assert space_weather.issue_of(pa.table({"issued": [NINE, NINE]})) == "2026-11-21T09:00:00Z"
    assert space_weather.issue_of(pa.table({"issued": pa.array([], pa.timestamp("us", tz="UTC"))})) is None
    assert space_weather.issue_of(None) is None


def test_before_the_table_exists_the_pandas_read_is_empty(settings):
    frame = space_weather.read_pandas(None, settings)
    assert frame.empty and list(frame.columns) == ["interval_start", "interval_end", "kp", "ap", "ap_daily",
                                                   "f107_obs", "f107_adj", "f107_obs_ctr81", "f107_adj_ctr81",
                                                   "f107_obs_lst81", "f107_adj_lst81", "observed", "issued",
                                                   "source_file"]
