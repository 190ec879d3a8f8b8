"""gold sensor_calibrations through Spark (sda.pipeline.calibrations): a window's fused orbits' contributions
summed, solved and MERGEd, read back for the next window, and a key no longer estimated deleted. The residuals
are noise-free, made from a known range bias, azimuth bias and time tag, so the solution is those values."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import types as T

from sda.lake.schemas import FUSED_ORBITS
from sda.lake.tables import TABLES, ensure_tables
from sda.orbit.estimation import calibration
from sda.pipeline import calibrations

ARC = 6 * 3600.0
START = dt.datetime(2026, 11, 21, 6, tzinfo=dt.timezone.utc)
K = int(START.timestamp() // ARC)
RANGE_M, AZ_DEG, TIME_MS = 12.0, 0.004, 1.5


def _contribution(seed: int) -> str:
    """One object's EGLIN residuals: range, azimuth and elevation at varied rates, no noise."""
    rng = np.random.default_rng(seed)
    rate = {"range_m": rng.uniform(-6, 6, 30), "az_deg": rng.uniform(-1e-3, 1e-3, 30),
            "el_deg": rng.uniform(-1e-3, 1e-3, 30)}
    bias = {"range_m": RANGE_M, "az_deg": AZ_DEG, "el_deg": 0.0}
    sigma = {"range_m": 20.0, "az_deg": 0.015, "el_deg": 0.015}
    table = pd.concat([pd.DataFrame({"sensor_id": "EGLIN", "kind": "radar", "quantity": q, "rate": rate[q],
                                     "r": bias[q] + TIME_MS * rate[q], "sigma": sigma[q]}) for q in rate])
    return json.dumps(calibration.normal_equations(table))


def _fused_row(norad: int, text: str | None) -> dict:
    defaults = {T.LongType: 0, T.DoubleType: 0.0, T.StringType: "x", T.TimestampType: START}
    row = {f.name: ([] if isinstance(f.dataType, T.ArrayType) else defaults[type(f.dataType)])
           for f in FUSED_ORBITS.fields}
    return {**row, "norad_id": norad, "window_end": START + dt.timedelta(seconds=ARC), "status": "converged",
            "calibration_json": text}


def _write_fused(spark, settings, rows) -> None:
    from sda.pipeline import sinks

    df = spark.createDataFrame([tuple(r[f] for f in FUSED_ORBITS.fieldNames()) for r in rows], FUSED_ORBITS)
    sinks.upsert(spark, df, "fused_orbits", settings, unique=True)


def test_a_windows_calibrations_are_estimated_stored_read_and_withdrawn(spark, settings):
    ensure_tables(spark, settings, ["fused_orbits", "sensor_calibrations"])
    _write_fused(spark, settings, [_fused_row(1, _contribution(1)), _fused_row(2, _contribution(2)),
                                   _fused_row(3, None)])
    figures = calibrations.refresh(spark, settings, [K], ARC, "run-1")
    stored = {r["quantity"]: r.asDict() for r in TABLES["sensor_calibrations"].read(spark, settings).collect()}
    assert figures["calibrations"] == 4 and set(stored) == {"range_m", "az_deg", "el_deg", "time_ms"}
    assert stored["range_m"]["bias"] == pytest.approx(RANGE_M, abs=1e-6)
    assert stored["az_deg"]["bias"] == pytest.approx(AZ_DEG, abs=1e-9)
    assert stored["time_ms"]["bias"] == pytest.approx(TIME_MS, abs=1e-6)
    assert (stored["range_m"]["n_obs"], stored["range_m"]["n_objects"]) == (60, 2)
    # the next window's fits apply them; the window's own do not
    table = calibrations.lookup(spark, settings, K + 1, ARC)
    assert table["EGLIN"][0][0] == K and table["EGLIN"][0][1]["range_m"] == pytest.approx(RANGE_M, abs=1e-6)
    # the same run again writes the same rows
    calibrations.refresh(spark, settings, [K], ARC, "run-1")
    assert TABLES["sensor_calibrations"].read(spark, settings).count() == 4
    # one object left: under MIN_OBJECTS, the window's calibrations are withdrawn
    _write_fused(spark, settings, [_fused_row(2, None)])
    assert calibrations.refresh(spark, settings, [K], ARC, "run-2")["calibrations_deleted"] == 4
    assert TABLES["sensor_calibrations"].read(spark, settings).count() == 0
