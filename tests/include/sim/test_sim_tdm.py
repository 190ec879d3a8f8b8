"""``sda simulate --format tdm``: the same scenario written as CCSDS TDM reads back (sda.transforms.tdm) to
the same measurements as the project's own radar JSON and optical CSV: radar bit for bit (the light
time added by the writer is taken off again), optical to 1e-9 deg (the EME2000 <-> TEME rotations)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from sda.orbit import inertial
from sda.sim import tdm as tdm_writer
from sda.sim.simulate import RATE_NAMES, SimConfig, simulate
from sda.transforms import tdm, wire

UTC = dt.timezone.utc


def _simulate(root: Path, fmt: str, sky: str = "kind") -> Path:
    cfg = SimConfig(start=dt.datetime(2026, 11, 21, 5, 50, tzinfo=UTC),
                    end=dt.datetime(2026, 11, 21, 6, 10, tzinfo=UTC), landing=root / "landing",
                    catalog_out=root / "catalog.tle", objects=30, seed=3, truth="sgp4",
                    format=fmt, reorder_rate=0.0, sky=sky, **dict.fromkeys(RATE_NAMES, 0.0))
    result = simulate(cfg)
    # the files it lists are the files it wrote (TDM ones under tdm/, none left empty)
    on_disk = {p.relative_to(result.landing).as_posix() for p in result.landing.rglob("*")
               if p.is_file() and p.parent.name != "_truth"}
    assert sorted(result.files) == sorted(on_disk)
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
        for line in path.read_text().splitlines()[2:]:  # the version line and the header
            station, ts, ra, dec, *_ = line.split(",")
            out[(station, dt.datetime.fromisoformat(ts.replace("Z", "+00:00")))] = ("optical", float(ra), float(dec))
    return out


def _from_tdm(landing: Path, light_time: bool = False) -> dict:
    out = {}
    for path in sorted((landing / "tdm").glob("*.kvn")):
        for rec in wire.file_records("tdm", path.read_bytes()):
            assert rec.reason is None, (path.name, rec.reason)
            o = tdm.interpret(rec.text, light_time=light_time)
            assert o["parse_error"] is None, (path.name, o["parse_error"])
            values = ((o["range_km"], o["az_deg"], o["el_deg"], o["rr_km_s"]) if o["sensor_kind"] == "radar"
                      else (o["ra_hours"], o["dec_deg"]))
            out[(o["sensor_id"], o["event_time"])] = (o["sensor_kind"], *values)
    return out


@pytest.mark.parametrize("sky", ["kind", "harsh"])
def test_tdm_scenario_reads_back_to_the_native_measurements(tmp_path, sky):
    """In every sky a radar's detection time is its reception (its measurements carry light time), which a
    RECEIVE-tagged TDM carries as it is and normalize keeps when the stages model light time, as they do by
    default."""
    native = _native(_simulate(tmp_path / "native", "native", sky))
    landing = _simulate(tmp_path / "tdm", "tdm", sky)
    assert not (landing / "radar").exists() and not (landing / "optical").exists()
    assert (landing / "isl").is_dir()  # beacons keep their own format
    assert (landing / "space_weather").is_dir() == (sky == "harsh")  # the harsher skies' space weather too
    from_tdm = _from_tdm(landing, light_time=True)
    assert set(from_tdm) == set(native) and len(native) > 100
    kinds = {v[0] for v in native.values()}
    assert kinds == {"radar", "optical"}
    for key, value in native.items():
        if value[0] == "radar":
            assert from_tdm[key] == value, key
        else:
            assert from_tdm[key][1:] == pytest.approx(value[1:], abs=1e-9), key


def _optical_record(ra_hours: float, dec_deg: float, t_ms: int):
    from sda.sim.truth import Record, Truth

    data = {"station": "SOCORRO", "t_ms": t_ms, "ra_hours": ra_hours, "dec_deg": dec_deg, "vmag": 11.2,
            "exposure_s": 2.0}
    return Record("optical", "SOCORRO", t_ms, t_ms, b"", [Truth("optical", "SOCORRO", t_ms, 25544, "none")], data)


def test_writer_and_reader_rotate_alike_whatever_brahe_was_set_to():
    """The simulator's numerical truth sets brahe's process-wide EOP (``brahe_setup.packaged_eop``) in the process
    that writes the TDM, not in the Spark worker that reads it; brahe's frame rotations read that state
    (the control below: ~1e-7 deg apart). The TDM rotation (sda.orbit.inertial) does not: a file
    written under one state reads back under another to the CSV's values, both orders."""
    import brahe

    from sda.orbit.estimation.brahe_setup import packaged_eop

    t_ms = 1795240801250  # 2026-11-21T06:00:01.250Z
    record = _optical_record(17.2345678, -23.456789, t_ms)

    def zero_eop():
        brahe.set_global_eop_provider_from_static_provider(brahe.StaticEOPProvider.from_zero())

    def brahe_rotation():
        epoch = brahe.Epoch.from_datetime(2026, 11, 21, 6, 0, 1.25, 0.0, brahe.TimeSystem.UTC)
        return np.asarray(brahe.rotation_gcrf_to_teme(epoch)) @ np.asarray(brahe.rotation_eme2000_to_gcrf())

    model = brahe.get_precession_nutation_model()  # sda's brahe set-up selects IAU 2000B process-wide
    try:
        brahe.set_precession_nutation_model(brahe.PrecessionNutationModel.IAU2006A)  # inertial's series
        zero_eop()
        control = brahe_rotation()
        # the same chain as brahe's under zero EOP (sda.orbit.inertial's docstring)
        assert np.abs(inertial.eme2000_to_teme(t_ms * 10**6) - control).max() < 1e-10
        packaged_eop()
        assert np.degrees(np.abs(brahe_rotation() - control).max()) > 1e-8  # brahe's result moved
        for write_state, read_state in ((packaged_eop, zero_eop), (zero_eop, packaged_eop)):
            write_state()
            text = tdm_writer.tdm_text("optical", [record], t_ms)
            read_state()
            [rec] = wire.file_records("tdm", text)
            out = tdm.interpret(rec.text)
            assert out["ra_hours"] == pytest.approx(17.2345678, abs=1e-9 / 15.0)
            assert out["dec_deg"] == pytest.approx(-23.456789, abs=1e-9)
        zero_eop()
        before = tdm.teme_from_inertial(10.0, 20.0, t_ms * 10**6)
        packaged_eop()
        assert tdm.teme_from_inertial(10.0, 20.0, t_ms * 10**6) == before  # bit for bit across states
    finally:
        packaged_eop()  # what the simulator's truth sets up (sda.sim.dynamics), for tests after this one
        brahe.set_precession_nutation_model(model)
