"""``sda simulate --format tdm``: the same scenario written as CCSDS TDM reads back (sda.transforms.tdm) to
the same measurements as the project's own radar JSON and optical CSV: radar bit for bit (the light
time added by the writer is taken off again), optical to 1e-9 deg (the EME2000 <-> TEME rotations)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from sda.sim.simulate import RATE_NAMES, SimConfig, simulate
from sda.transforms import tdm, wire

UTC = dt.timezone.utc


def _simulate(root: Path, fmt: str) -> Path:
    cfg = SimConfig(start=dt.datetime(2026, 11, 21, 6, tzinfo=UTC), end=dt.datetime(2026, 11, 21, 6, 20, tzinfo=UTC),
                    landing=root / "landing", catalog_out=root / "catalog.tle", objects=30, seed=3, truth="sgp4",
                    format=fmt, reorder_rate=0.0, **dict.fromkeys(RATE_NAMES, 0.0))
    simulate(cfg)
    return root / "landing"


def _native(landing: Path) -> dict:
    out = {}
    for path in sorted((landing / "radar").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            frame = json.loads(line)
            for d in frame["dets"]:
                t = dt.datetime.fromisoformat(d["t"].replace("Z", "+00:00"))
                out[(frame["sensor"], t)] = ("radar", d["range_km"], d["az_deg"], d["el_deg"], d["rr_km_s"])
    for path in sorted((landing / "optical").glob("*.csv")):
        for line in path.read_text().splitlines()[1:]:
            station, ts, ra, dec, *_ = line.split(",")
            out[(station, dt.datetime.fromisoformat(ts.replace("Z", "+00:00")))] = ("optical", float(ra), float(dec))
    return out


def _from_tdm(landing: Path) -> dict:
    out = {}
    for path in sorted((landing / "tdm").glob("*.kvn")):
        for rec in wire.file_records("tdm", path.read_bytes()):
            assert rec.reason is None, (path.name, rec.reason)
            o = tdm.interpret(rec.text)
            assert o["parse_error"] is None, (path.name, o["parse_error"])
            values = ((o["range_km"], o["az_deg"], o["el_deg"], o["rr_km_s"]) if o["sensor_kind"] == "radar"
                      else (o["ra_hours"], o["dec_deg"]))
            out[(o["sensor_id"], o["event_time"])] = (o["sensor_kind"], *values)
    return out


def test_tdm_scenario_reads_back_to_the_native_measurements(tmp_path):
    native = _native(_simulate(tmp_path / "native", "native"))
    landing = _simulate(tmp_path / "tdm", "tdm")
    assert not (landing / "radar").exists() and not (landing / "optical").exists()
    assert (landing / "isl").is_dir()  # beacons keep their own format
    from_tdm = _from_tdm(landing)
    assert set(from_tdm) == set(native) and len(native) > 100
    kinds = {v[0] for v in native.values()}
    assert kinds == {"radar", "optical"}
    for key, value in native.items():
        if value[0] == "radar":
            assert from_tdm[key] == value, key
        else:
            assert from_tdm[key][1:] == pytest.approx(value[1:], abs=1e-9), key
