"""The run report's sensor calibration section (sda.quality.sensor_calibration_report) from hand-made rows."""

from __future__ import annotations

import datetime as dt

from sda.quality.sensor_calibration_report import section


def test_lists_each_sensor_quantity_in_its_unit():
    start = dt.datetime(2026, 11, 21, 6)
    html = section([{"sensor_id": "EGLIN", "quantity": "az_deg", "bias": 0.0042, "sigma": 0.0005, "n_obs": 812,
                     "n_objects": 31, "window_start": start},
                    {"sensor_id": "EGLIN", "quantity": "range_m", "bias": -12.34, "sigma": 1.5, "n_obs": 812,
                     "n_objects": 31, "window_start": start}])
    assert html.index('data-quantity="range_m"') < html.index('data-quantity="az_deg"')  # range first
    assert "-12.3 ± 1.5 m" in html and "4.20 ± 0.50 mdeg" in html and "812" in html


def test_says_when_there_is_none():
    assert "No sensor calibration" in section([])
