"""make run's simulated window (sda.sim.scenario): one side of a fit-window boundary always holds the
minimum tracking, worked by hand on 6-hour windows (boundaries at 00, 06, 12, 18 UTC)."""

from __future__ import annotations

import datetime as dt

import pytest

from sda.sim.scenario import window_start

UTC = dt.timezone.utc


def at(hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, 28, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(("now", "expected"), [
    (at(10), at(7)),            # no boundary inside 07:00-10:00: 3 h
    (at(8, 30), at(5, 30)),     # 06:00 boundary, 2.5 h after it: 3 h
    (at(8), at(5)),             # 2 h after it exactly: 3 h (05:00-06:00 and 06:00-08:00)
    (at(7, 30), at(4)),         # 1.5 h after it: starts 2 h before it, 3.5 h
    (at(7, 59), at(4)),         # a minute short of 2 h after it: 3 h 59 min, 2 h before the boundary
    (at(6, 1), at(3, 1)),       # a minute after it: 3 h, all but a minute of it before the boundary
    (at(6), at(3)),             # on the boundary: nothing after it, 3 h before
])
def test_window_start(now, expected):
    assert window_start(now, arc_h=6.0, hours=3.0, min_fit_hours=2.0) == expected


def test_each_minute_of_a_day_leaves_two_hours_on_one_side_of_a_boundary():
    for minute in range(0, 24 * 60, 7):
        now = at(0) + dt.timedelta(minutes=minute)
        start = window_start(now, arc_h=6.0, hours=3.0, min_fit_hours=2.0)
        assert dt.timedelta(hours=3) <= now - start < dt.timedelta(hours=4)
        boundary = at(0) + dt.timedelta(hours=6 * (minute // 360))
        pieces = [now - start] if start >= boundary else [boundary - start, now - boundary]
        assert max(pieces) >= dt.timedelta(hours=2), (now, start)


def test_a_minimum_longer_than_the_fit_window_is_refused():
    with pytest.raises(ValueError, match="longer than the fit window"):
        window_start(at(10), arc_h=1.0, hours=3.0, min_fit_hours=2.0)
