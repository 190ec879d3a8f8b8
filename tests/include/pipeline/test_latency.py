"""sda.pipeline.latency: the landing-to-alert histogram, against counts made by hand."""

from __future__ import annotations

from sda.pipeline import latency


def test_the_histogram_counts_each_file_at_or_below_each_bound():
    got = latency.histogram([70.0, 12.0, 50.0, 60.0, 5.0])
    assert got["count"] == 5 and got["sum"] == 197.0 and got["max"] == 70.0
    # at or below 5: 5; 10: 5; 15: 5, 12; 30, 45: the same two; 60: + 50, 60; 90 and beyond: + 70
    assert [got["buckets"][str(b)] for b in latency.BUCKETS] == [1, 1, 2, 2, 2, 4, 5, 5, 5, 5, 5, 5, 5]


def test_nothing_landed_is_an_empty_histogram():
    got = latency.histogram([])
    assert got == {"count": 0, "sum": 0, "max": None, "buckets": {str(b): 0 for b in latency.BUCKETS}}


def test_past_the_last_bound_only_the_count_holds_it():
    got = latency.histogram([7200.0])
    assert got["count"] == 1 and set(got["buckets"].values()) == {0}
