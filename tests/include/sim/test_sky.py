"""sda.sim.sky: the harsher sky's sensor errors, checked against geometry computed here -- the light time solved
by iteration on the truth ephemeris, the biases and noise scales the truth summary records -- and the kinder
sky left byte for byte as it was."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats
from sgp4.propagation import gstime

from sda.orbit.sensors import load_sensors
from sda.sim import sky
from tests.include.sim.test_simulate import (
    ARGS,
    _load_files,
    _main,
    _rot,
    _site_ecef,
    _teme,
    _unix,
    parse_line,
    true_bodies,
)

SENSORS = load_sensors()
C_KM_S = 299_792.458


@pytest.fixture(scope="module")
def harsh(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("harsh")
    landing, cat = tmp / "landing", tmp / "catalog.tle"
    assert _main(ARGS + ["--landing", str(landing), "--catalog-out", str(cat), "--sky", "harsh"], landing, cat) == 0
    summary = json.loads(next((landing / "_truth").glob("*.summary.json")).read_text())
    truth = [json.loads(line) for line in (landing / summary["truth_file"]).read_text().splitlines()]
    return landing, summary, truth, true_bodies(landing, summary)


def _measured_range(body, sensor, t: float, time_bias_s: float) -> float:
    """The range a radar reports for time tag ``t``: to where the object was one light time before the clock's
    ``t + bias``, from the site at that instant (iterated to convergence, not the first-order formula)."""
    t_rx = t + time_bias_s
    site = _site_ecef(sensor.lat_deg, sensor.lon_deg, sensor.alt_m)
    theta = gstime(2440587.5 + t_rx / 86400.0)
    tau = 0.0
    for _ in range(5):
        r, _, _ = _teme(body, t_rx - tau)
        rng = float(np.linalg.norm(_rot(r, theta) - site))
        tau = rng / C_KM_S
    return rng


def _clean(harsh, kind: str):
    """(truth row, parsed record, the sensor's recorded errors, its biases at the time, registry sensor) of every
    clean ``kind`` record of the harsh simulation."""
    landing, summary, truth, _ = harsh
    files = _load_files(landing)
    for t in truth:
        if t["kind"] != kind or t["disorder"] != "none":
            continue
        rec = parse_line(kind, files[t["file"]].split(b"\n")[t["record_no"]])
        e = summary["sky"]["sensors"][t["sensor_id"]]
        drift = {k: sky.Drifting(**b).at(_unix(t["event_time"])) for k, b in e["biases"].items()}
        yield t, rec, e, drift, SENSORS[t["sensor_id"]]


def test_light_time_on_a_circular_orbit_against_a_solved_equation():
    """Hand case: a circular orbit r(t) = a (cos wt, sin wt, 0); the light-time equation |r(t - tau) - s| = c tau
    solved by bisection, against the first-order position the simulator uses (under a millimetre)."""
    a, w = 7000.0, math.sqrt(398600.4418 / 7000.0**3)
    site = np.array([6378.0, -1500.0, 300.0])
    for t in (0.0, 400.0, 1200.0):
        r = a * np.array([math.cos(w * t), math.sin(w * t), 0.0])
        v = a * w * np.array([-math.sin(w * t), math.cos(w * t), 0.0])
        lo, hi = 0.0, 0.1
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            rb = a * np.array([math.cos(w * (t - mid)), math.sin(w * (t - mid)), 0.0])
            lo, hi = (mid, hi) if np.linalg.norm(rb - site) > C_KM_S * mid else (lo, mid)
        exact = a * np.array([math.cos(w * (t - lo)), math.sin(w * (t - lo)), 0.0])
        got = sky.light_time_position(r[None], v[None], site[None])[0]
        assert np.linalg.norm(got - exact) * 1e6 < 1.0  # mm
        assert np.linalg.norm(got - r) * 1000 > 5.0  # the effect itself is metres


def test_radar_ranges_carry_the_recorded_bias_light_time_and_a_heavy_tail(harsh):
    bodies = harsh[3]
    residual = []
    for t, frame, e, drift, sensor in _clean(harsh, "radar"):
        det = frame["dets"][t["det_index"]]
        when = _unix(t["event_time"])
        expected = _measured_range(bodies[t["norad_id"]], sensor, when, drift["time_ms"] / 1000.0)
        sigma_km = e["noise_scale"] * sensor.sigma_range_m / 1000.0
        residual.append((det["range_km"] - expected - drift["range_m"] / 1000.0) / sigma_km)
    z = np.asarray(residual)
    assert len(z) > 500
    mad = float(np.median(np.abs(z)))
    t4_mad = stats.t.ppf(0.75, 4) * math.sqrt(2.0 / 4.0)  # 0.524; a unit Gaussian's is 0.674
    assert abs(float(np.median(z))) < 0.1 and abs(mad - t4_mad) < 0.06, (float(np.median(z)), mad)
    beyond = float(np.mean(np.abs(z) > 3.0))  # t4 at unit variance: 1.3 %; a Gaussian: 0.27 %
    assert 0.005 < beyond < 0.025, beyond


def test_optical_angles_carry_the_recorded_bias_light_time_and_noise(harsh):
    """Astrometric angles: towards where the object was one light time before the clock's time, plus the
    recorded RA/Dec biases, with the sensor's own noise (RA residuals on the sky, times cos dec)."""
    bodies = harsh[3]
    residual = []
    for t, row, e, drift, sensor in _clean(harsh, "optical"):
        when = _unix(t["event_time"])
        t_rx = when + drift["time_ms"] / 1000.0
        site = _rot(_site_ecef(sensor.lat_deg, sensor.lon_deg, sensor.alt_m), -gstime(2440587.5 + t_rx / 86400.0))
        tau = 0.0
        for _ in range(5):
            rho = _teme(bodies[t["norad_id"]], t_rx - tau)[0] - site
            tau = float(np.linalg.norm(rho)) / C_KM_S
        ra = math.degrees(math.atan2(rho[1], rho[0])) % 360
        dec = math.degrees(math.asin(rho[2] / np.linalg.norm(rho)))
        sigma_arcsec = e["noise_scale"] * sensor.sigma_angle_deg * 3600.0
        residual.append(((row["dec_deg"] - dec) * 3600.0 - drift["dec_arcsec"]) / sigma_arcsec)
        d_ra = ((row["ra_hours"] * 15 - ra + 180) % 360 - 180) * 3600.0 * math.cos(math.radians(dec))
        residual.append((d_ra - drift["ra_arcsec"]) / sigma_arcsec)
    z = np.asarray(residual)
    assert len(z) > 200
    mad = float(np.median(np.abs(z)))
    assert abs(float(np.median(z))) < 0.15 and abs(mad - stats.t.ppf(0.75, 4) * math.sqrt(0.5)) < 0.08, \
        (len(z), float(np.median(z)), mad)


def test_each_sensor_has_its_own_errors_recorded_and_stable_per_seed(harsh):
    _, summary, _, _ = harsh
    rec = summary["sky"]
    assert rec["model"] == "harsh" and rec["light_time"] is True and set(rec["sensors"]) == set(SENSORS)
    again = sky.draw(SENSORS.values(), 5)
    for sid, e in rec["sensors"].items():
        assert e["noise_scale"] == again[sid].noise_scale
        assert {k: sky.Drifting(**b) for k, b in e["biases"].items()} == again[sid].biases
    scales = np.array([e["noise_scale"] for e in rec["sensors"].values()])
    assert scales.min() < 0.95 and scales.max() > 1.05  # true noise differs from the registry's both ways
    radar = [e for e in rec["sensors"].values() if e["kind"] == "radar"]
    assert radar and all({"range_m", "az_deg", "el_deg", "time_ms"} <= set(e["biases"]) for e in radar)
    period_days = [b["period_s"] / 86400 for e in rec["sensors"].values() for b in e["biases"].values()]
    assert 1.0 <= min(period_days) and max(period_days) <= 3.0  # drifting slowly


def test_the_kind_sky_records_no_sensor_errors(harsh, tmp_path):
    """The same arguments without --sky: no ``sky`` record, other measurements (the harsh sky's draws come from a
    stream of their own, so the kinder sky's files are those of a simulator without it)."""
    landing, cat = tmp_path / "landing", tmp_path / "catalog.tle"
    assert _main(ARGS + ["--landing", str(landing), "--catalog-out", str(cat)], landing, cat) == 0
    summary = json.loads(next((landing / "_truth").glob("*.summary.json")).read_text())
    assert "sky" not in summary and summary["config"]["sky"] == "kind"
    kind, harsh_files = _load_files(landing), _load_files(harsh[0])
    assert any(kind[f] != harsh_files.get(f) for f in kind)
