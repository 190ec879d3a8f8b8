"""sda.alerts.publish without Spark: the alerts open after a run, by level (hand-made rows)."""

from __future__ import annotations

from sda.alerts.publish import open_by_level


def _alert(alert_id: str, version: int, status: str, level: str) -> dict:
    return {"alert_id": alert_id, "version": version, "status": status, "level": level}


def test_open_alerts_by_level_take_each_alerts_newest_version_and_leave_out_the_closed():
    current = [_alert("A", 1, "new", "yellow"), _alert("B", 2, "updated", "red"), _alert("C", 1, "new", "yellow"),
               _alert("D", 3, "closed", "none")]  # D closed earlier, still read for its recent TCA
    history = [_alert("A", 2, "updated", "red"),  # A raised to red this run
               _alert("C", 2, "closed", "none"),  # C closed this run
               _alert("E", 1, "new", "yellow")]  # a new one
    assert open_by_level(current, history) == {"open_alerts_red": 2, "open_alerts_yellow": 1, "open_alerts_none": 0}
    assert open_by_level([], []) == {"open_alerts_red": 0, "open_alerts_yellow": 0, "open_alerts_none": 0}
    # an interrupted attempt's adopted version is the same version again: no double count
    assert open_by_level([_alert("A", 1, "new", "red")], [_alert("A", 1, "new", "red")])["open_alerts_red"] == 1
