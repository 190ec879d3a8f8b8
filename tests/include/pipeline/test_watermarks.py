"""The watermark and lateness rules of sda.pipeline.watermarks, on hand-computed cases."""

from __future__ import annotations

from sda.pipeline.watermarks import is_late, watermarks_at, window_end_us

S = 1_000_000  # microseconds per second


def test_watermark_per_sensor_and_pipeline_minimum():
    per_sensor, pipeline = watermarks_at({"A": 10_000 * S, "B": 9_000 * S}, lateness_s=3600, idle_s=21600)
    assert per_sensor == {"A": 6_400 * S, "B": 5_400 * S}
    assert pipeline == 5_400 * S  # the slower sensor holds cross-sensor windows open


def test_idle_sensor_does_not_hold_windows_open():
    # B is 30,000 s behind A, more than the 21,600 s idle limit: it no longer counts for the minimum
    per_sensor, pipeline = watermarks_at({"A": 100_000 * S, "B": 70_000 * S}, lateness_s=3600, idle_s=21600)
    assert per_sensor["B"] == 66_400 * S
    assert pipeline == 96_400 * S
    # 21,600 s behind exactly is still active
    _, pipeline = watermarks_at({"A": 100_000 * S, "B": 78_400 * S}, lateness_s=3600, idle_s=21600)
    assert pipeline == 74_800 * S


def test_nothing_seen_means_no_watermark():
    assert watermarks_at({}, lateness_s=3600, idle_s=21600) == ({}, None)


def test_window_end_boundaries():
    assert window_end_us(25 * S, 10) == 30 * S
    assert window_end_us(30 * S, 10) == 40 * S  # a window is [start, end): its end belongs to the next one
    assert window_end_us(0, 3600) == 3600 * S


def test_late_rule():
    t = 1_000 * S  # dedup window [1000, 1010), state window [0, 3600)
    assert is_late(t, 1_010 * S, None, 10, 3600)  # watermark at the window's end: final, late
    assert not is_late(t, 1_010 * S - 1, None, 10, 3600)  # one microsecond short: still open
    assert not is_late(t, None, None, 10, 3600)  # nothing seen from the sensor yet
    assert is_late(t, None, 3_600 * S, 10, 3600)  # the state window is final by the pipeline watermark
    assert not is_late(t, 900 * S, 3_599 * S, 10, 3600)


def test_the_newest_event_time_per_sensor_of_a_batchs_arrivals():
    import datetime as dt

    from sda.pipeline.watermarks import newest_per_sensor

    t = lambda minute: dt.datetime(2026, 11, 21, 6, minute)  # noqa: E731 - naive, as collected (local time)
    arrivals = [("EGLIN", "radar", 3, t(4), t(0), 10, "r"), ("EGLIN", "radar", 4, t(9), t(5), 8, "r"),
                ("ISL-01", "isl", 3, t(2), t(1), 2, "r")]
    assert newest_per_sensor(arrivals) == {"EGLIN": {"kind": "radar", "newest_unix_s": t(9).timestamp()},
                                           "ISL-01": {"kind": "isl", "newest_unix_s": t(2).timestamp()}}
    assert newest_per_sensor([]) == {}
