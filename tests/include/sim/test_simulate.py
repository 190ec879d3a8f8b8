"""sda.sim.simulate: a small run into tmp, checked against independently computed geometry and the
truth file; the injected conjunction by brute force; determinism; argument checks."""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
import time
from pathlib import Path

import numpy as np
import pytest
from scipy.interpolate import BarycentricInterpolator
from sgp4.propagation import gstime

from sda.lake.wire_formats import ISL_KEYS, OPTICAL_HEADER
from sda.orbit.sensors import load_sensors
from sda.sim import simulate as sim

START = "2026-11-21T05:40:00Z"  # night at Socorro and Maui
END = "2026-11-21T06:00:00Z"
TCA = "2026-11-21T05:52:00Z"
ARGS = ["--start", START, "--end", END, "--objects", "40", "--seed", "5", "--inject-conjunction", "--tca", TCA,
        "--miss-m", "150"] + [x for name in sim.RATE_NAMES for x in ("--" + name.replace("_", "-"), "0.06")]
A_WGS84, F_WGS84 = 6378.137, 1.0 / 298.257223563
SENSORS = load_sensors()


def _main(argv: list[str], landing: Path, catalog_out: Path) -> int:
    """sim.main with the settings' landing zone and catalogue file where the test writes (the command
    line may only write inside them); the kinder sky unless ``argv`` names one (these tests check geometry
    against the registry's noise)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SDA_LANDING", str(landing))
        mp.setenv("SDA_CATALOG_FILE", str(catalog_out))
        return sim.main(argv if "--sky" in argv else [*argv, "--sky", "kind"])


def _run(tmp: Path, extra: list[str] = ()) -> tuple[Path, Path]:
    landing, cat = tmp / "landing", tmp / "catalog.tle"
    assert _main(ARGS + ["--landing", str(landing), "--catalog-out", str(cat)] + list(extra), landing, cat) == 0
    return landing, cat


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    landing, cat = _run(tmp_path_factory.mktemp("sim"))
    truth_file = next((landing / "_truth").glob("*.jsonl"))
    truth = [json.loads(line) for line in truth_file.read_text().splitlines()]
    summary = json.loads(next((landing / "_truth").glob("*.summary.json")).read_text())
    return landing, cat, truth, summary, true_bodies(landing, summary)


class TrueBody:
    """One body's true states as the truth file stores them (TEME km, km/s on a time grid)."""

    def __init__(self, times, states):
        self.times, self.states = times, states


def true_bodies(landing: Path, summary: dict) -> dict[int, TrueBody]:
    """The truth's ephemeris, read with numpy alone: {catalogue number: TrueBody}."""
    with np.load(landing / summary["truth"]["ephemeris_file"]) as data:
        times = float(data["t0"]) + float(data["step"]) * np.arange(data["states"].shape[1])
        return {int(n): TrueBody(times, data["states"][i]) for i, n in enumerate(data["norad"])}


# --- independent parsers and geometry -------------------------------------------------------------------

TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
OPT_TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def parse_line(kind: str, raw: bytes):
    """The record's parsed content, or None when it does not follow the wire format."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if kind == "radar":
        try:
            frame = json.loads(text)
        except ValueError:
            return None
        # the simulator writes version 1.0 of the wire formats (docs/formats.md), and declares it
        if not isinstance(frame, dict) or set(frame) != {"version", "sensor", "frame", "sent", "dets"}:
            return None
        if frame["version"] != "1.0":
            return None
        if (not isinstance(frame["sensor"], str) or not isinstance(frame["frame"], int)
                or not TS_RE.match(frame["sent"])):
            return None
        for det in frame["dets"]:
            if set(det) != {"t", "range_km", "az_deg", "el_deg", "rr_km_s", "snr_db"} or not TS_RE.match(str(det["t"])):
                return None
            if not all(_num(det[k]) for k in ("range_km", "az_deg", "el_deg", "rr_km_s", "snr_db")):
                return None
        return frame
    if kind == "optical":
        cols = next(csv.reader([text]))
        if len(cols) != 6 or not OPT_TS_RE.match(cols[1]):
            return None
        try:
            return {"station": cols[0], "t": cols[1], "ra_hours": float(cols[2]), "dec_deg": float(cols[3]),
                    "vmag": float(cols[4]), "exposure_s": float(cols[5])}
        except ValueError:
            return None
    parts = text.split("|")
    if parts[0] != "BCN" or len(parts) != 2 + len(ISL_KEYS):
        return None
    kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    if tuple(kv) != ("version", *ISL_KEYS) or kv["version"] != "1.0":
        return None
    try:
        out = {"src": kv["src"], "seq": int(kv["seq"]), "t_ms": int(kv["t_ms"])}
        out.update({k: float(kv[k]) for k in ISL_KEYS[3:]})
    except ValueError:
        return None
    return out


def _unix(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _teme(body, unix_s):
    """A true state between grid times: scipy's barycentric polynomial through the 8 nearest grid states."""
    jd = 2440587.5 + unix_s / 86400.0
    k = int(np.searchsorted(body.times, unix_s))
    nodes = slice(max(0, min(k - 4, len(body.times) - 8)), max(0, min(k - 4, len(body.times) - 8)) + 8)
    state = BarycentricInterpolator(body.times[nodes], body.states[nodes])(unix_s)
    assert np.all(np.isfinite(state))
    return np.asarray(state[:3]), np.asarray(state[3:]), jd


def _site_ecef(lat, lon, alt_m):
    la, lo = math.radians(lat), math.radians(lon)
    e2 = F_WGS84 * (2 - F_WGS84)
    n = A_WGS84 / math.sqrt(1 - e2 * math.sin(la) ** 2)
    h = alt_m / 1000.0
    return np.array([(n + h) * math.cos(la) * math.cos(lo), (n + h) * math.cos(la) * math.sin(lo),
                     (n * (1 - e2) + h) * math.sin(la)])


def _enu(lat, lon):
    la, lo = math.radians(lat), math.radians(lon)
    return (np.array([-math.sin(lo), math.cos(lo), 0.0]),
            np.array([-math.sin(la) * math.cos(lo), -math.sin(la) * math.sin(lo), math.cos(la)]),
            np.array([math.cos(la) * math.cos(lo), math.cos(la) * math.sin(lo), math.sin(la)]))


def _rot(vec, theta):
    c, s = math.cos(theta), math.sin(theta)
    return np.array([c * vec[0] + s * vec[1], -s * vec[0] + c * vec[1], vec[2]])


def true_razel(sat, sensor, unix_s):
    r, v, jd = _teme(sat, unix_s)
    th = gstime(jd)
    r_e = _rot(r, th)
    v_e = _rot(v, th) - np.cross([0, 0, 7.292115e-5], r_e)
    rho = r_e - _site_ecef(sensor.lat_deg, sensor.lon_deg, sensor.alt_m)
    e, n, u = (float(rho @ b) for b in _enu(sensor.lat_deg, sensor.lon_deg))
    rng = float(np.linalg.norm(rho))
    return rng, math.degrees(math.atan2(e, n)) % 360.0, math.degrees(math.asin(u / rng)), float(rho @ v_e) / rng


def sun_teme(unix_s):
    """Sun direction, Meeus' low-accuracy solar coordinates (equinox of date)."""
    T = (unix_s / 86400.0 + 2440587.5 - 2451545.0) / 36525.0
    L0 = 280.46646 + 36000.76983 * T
    M = math.radians(357.52911 + 35999.05029 * T)
    C = (1.914602 - 0.004817 * T) * math.sin(M) + 0.019993 * math.sin(2 * M)
    lam = math.radians(L0 + C)
    eps = math.radians(23.439291 - 0.0130042 * T)
    return np.array([math.cos(lam), math.cos(eps) * math.sin(lam), math.sin(eps) * math.sin(lam)])


def sun_elevation_deg(sensor, unix_s):
    jd = 2440587.5 + unix_s / 86400.0
    s_e = _rot(sun_teme(unix_s), gstime(jd))
    return math.degrees(math.asin(float(s_e @ _enu(sensor.lat_deg, sensor.lon_deg)[2])))


def in_az_sector(az, lo, hi):
    if hi - lo >= 360:
        return True
    lo %= 360
    return lo <= az <= hi if lo <= hi else (az >= lo or az <= hi % 360)


# --- the tests --------------------------------------------------------------------------------------------

def _load_files(landing: Path):
    out = {}
    for kind in ("radar", "optical", "isl"):
        for path in sorted((landing / kind).glob("*")):
            out[f"{kind}/{path.name}"] = path.read_bytes()
    return out


def test_layout_and_truth_account_for_every_record(run):
    landing, _, truth, summary, _ = run
    files = _load_files(landing)
    assert {k.split("/")[0] for k in files} == {"radar", "optical", "isl"}
    assert set(summary["files"]) == {"radar", "optical", "isl"}
    by_key = {t["key"]: t for t in truth}
    assert len(by_key) == len(truth)
    malformed = {(t["file"], t["record_no"]) for t in truth if t["disorder"] == "malformed"}
    truth_keys = set()
    for rel, data in files.items():
        kind = rel.split("/")[0]
        assert re.match(r"^[A-Z0-9-]+_\d{8}T\d{6}Z(_[0-2])?\.(jsonl|csv|bcn)$", rel.split("/")[1]), rel
        assert data.endswith(b"\n")
        lines = data[:-1].split(b"\n")
        if kind == "optical":
            assert [line.decode() for line in lines[:2]] == ["#version=1.0", OPTICAL_HEADER]
        for no, raw in enumerate(lines):
            if kind == "optical" and no < 2:
                continue
            parsed = parse_line(kind, raw)
            if (rel, no) in malformed:
                assert parsed is None, f"{rel} line {no} is marked malformed but parses"
                truth_keys.add(f"{rel}#{no}")
                continue
            assert parsed is not None, f"{rel} line {no} does not parse: {raw[:120]!r}"
            if kind == "radar":
                assert parsed["dets"], "frames with no detection are not sent"
                for d, det in enumerate(parsed["dets"]):
                    key = f"{rel}#{no}#{d}"
                    assert by_key[key]["event_time"] == det["t"] and by_key[key]["sensor_id"] == parsed["sensor"]
                    truth_keys.add(key)
            else:
                key = f"{rel}#{no}"
                t_ms = round(_unix(parsed["t"]) * 1000) if kind == "optical" else parsed["t_ms"]
                assert round(_unix(by_key[key]["event_time"]) * 1000) == t_ms
                assert by_key[key]["sensor_id"] == (parsed["station"] if kind == "optical" else parsed["src"])
                truth_keys.add(key)
    assert truth_keys == set(by_key)  # truth count equals records written, one to one
    assert summary["records"] == len(truth)
    counts = {}
    for t in truth:
        counts.setdefault(t["kind"], {}).setdefault(t["disorder"], 0)
        counts[t["kind"]][t["disorder"]] += 1
    assert counts == {k: {d: n for d, n in v.items() if n} for k, v in summary["counts"].items()}
    for disorder in sim.DISORDERS:
        assert any(t["disorder"] == disorder for t in truth), f"no {disorder} record"


def test_truth_fields(run):
    landing, _, truth, _, sats = run
    for t in truth:
        assert t["disorder"] in sim.DISORDERS
        assert (t["norad_id"] is None) == (t["disorder"] in ("malformed", "unknown_sensor"))
        assert (t["duplicate_of"] is not None) == (t["disorder"] in ("redelivery", "reprocessed"))
        assert (t["det_index"] is not None) == (t["kind"] == "radar" and t["disorder"] != "malformed")
        if t["norad_id"] is not None:
            assert t["norad_id"] in sats
        if t["disorder"] == "unknown_sensor":
            assert t["sensor_id"] not in SENSORS
        else:
            assert t["sensor_id"] in SENSORS
        assert _unix(START) <= _unix(t["event_time"]) < _unix(END) + 1


def test_duplicates_point_at_their_originals(run):
    landing, _, truth, _, _ = run
    by_key = {t["key"]: t for t in truth}
    files = _load_files(landing)

    def line(t):
        return files[t["file"]].split(b"\n")[t["record_no"]]

    for t in truth:
        if t["disorder"] == "redelivery":
            orig = by_key[t["duplicate_of"]]
            assert orig["disorder"] in ("none", "late") and orig["file"] != t["file"]
            assert line(t) == line(orig)  # verbatim
            assert ((orig["norad_id"], orig["event_time"], orig["sensor_id"])
                    == (t["norad_id"], t["event_time"], t["sensor_id"]))
        elif t["disorder"] == "reprocessed":
            orig = by_key[t["duplicate_of"]]
            assert orig["sensor_id"] == t["sensor_id"] and orig["norad_id"] == t["norad_id"]
            assert 0 < abs(_unix(orig["event_time"]) - _unix(t["event_time"])) <= 0.0505
            assert line(t) != line(orig)


def test_radar_detections_follow_the_site_masks(run):
    landing, _, truth, _, sats = run
    files = _load_files(landing)
    by_key = {t["key"]: t for t in truth}
    checked = 0
    for t in truth:
        if t["kind"] != "radar" or t["disorder"] in ("malformed", "unknown_sensor", "impossible"):
            continue
        sensor = SENSORS[t["sensor_id"]]
        det = json.loads(files[t["file"]].split(b"\n")[t["record_no"]])["dets"][t["det_index"]]
        # a reprocessed detection re-reports the original measurement (jittered) under a shifted time
        when = by_key[t["duplicate_of"]]["event_time"] if t["disorder"] == "reprocessed" else t["event_time"]
        rng, az, el, rr = true_razel(sats[t["norad_id"]], sensor, _unix(when))
        assert el >= sensor.min_el_deg - 1e-6, t
        assert in_az_sector(az, sensor.az_min_deg, sensor.az_max_deg), (az, t)
        assert rng <= sensor.max_range_km + 1e-6
        sig_r, sig_a, sig_rr = sensor.sigma_range_m / 1000, sensor.sigma_angle_deg, sensor.sigma_range_rate_ms / 1000
        # the reported values are the truth plus noise (6 sigma, plus rounding)
        assert abs(det["range_km"] - rng) < 6 * sig_r + 0.006
        assert abs((det["az_deg"] - az + 180) % 360 - 180) < (6 * sig_a + 1e-4) / max(math.cos(math.radians(el)), 0.05)
        assert abs(det["el_deg"] - el) < 6 * sig_a + 1e-4
        assert abs(det["rr_km_s"] - rr) < 6 * sig_rr + 1e-4
        assert 0 <= det["az_deg"] < 360 and det["el_deg"] <= 90 and det["range_km"] > 0 and abs(det["rr_km_s"]) < 12
        checked += 1
    assert checked > 100


def test_two_radars_see_the_same_pass(run):
    _, _, truth, _, _ = run
    seen = {}
    for t in truth:
        if t["kind"] == "radar" and t["disorder"] == "none":
            seen.setdefault((t["norad_id"], t["event_time"][:18]), set()).add(t["sensor_id"])
    assert any(len(s) > 1 for s in seen.values())


def test_impossible_values_are_impossible(run):
    landing, _, truth, _, _ = run
    files = _load_files(landing)
    for t in truth:
        if t["disorder"] != "impossible":
            continue
        rec = parse_line(t["kind"], files[t["file"]].split(b"\n")[t["record_no"]])
        if t["kind"] == "radar":
            det = rec["dets"][t["det_index"]]
            assert det["range_km"] < 0 or det["el_deg"] > 90 or abs(det["rr_km_s"]) > 12
        elif t["kind"] == "optical":
            assert abs(rec["dec_deg"]) > 90
        else:
            assert math.sqrt(rec["x_m"] ** 2 + rec["y_m"] ** 2 + rec["z_m"] ** 2) < 6.3e6


def test_optical_only_in_darkness_and_sunlit(run):
    landing, _, truth, _, sats = run
    files = _load_files(landing)
    by_key = {t["key"]: t for t in truth}
    n = 0
    for t in truth:
        if t["kind"] != "optical" or t["disorder"] in ("malformed", "unknown_sensor", "impossible"):
            continue
        sensor = SENSORS[t["sensor_id"]]
        u = _unix(t["event_time"])
        assert sun_elevation_deg(sensor, u) < -12.0 + 0.05
        if t["disorder"] == "reprocessed":  # values of the original, under a shifted time
            u = _unix(by_key[t["duplicate_of"]]["event_time"])
        row = parse_line("optical", files[t["file"]].split(b"\n")[t["record_no"]])
        sat = sats[t["norad_id"]]
        _, _, el, _ = true_razel(sat, sensor, u)
        assert el >= sensor.min_el_deg - 1e-6
        r, _, jd = _teme(sat, u)
        s = sun_teme(u)
        along = float(r @ s)
        assert along > 0 or np.linalg.norm(r - along * s) > 6378.137 - 1  # not in the shadow cylinder
        site = _rot(_site_ecef(sensor.lat_deg, sensor.lon_deg, sensor.alt_m), -gstime(jd))
        rho = r - site
        ra = math.degrees(math.atan2(rho[1], rho[0])) % 360
        dec = math.degrees(math.asin(rho[2] / np.linalg.norm(rho)))
        tol = 6 * sensor.sigma_angle_deg + 1e-4
        assert abs(dec - row["dec_deg"]) < tol
        assert abs(((row["ra_hours"] * 15 - ra + 180) % 360 - 180) * math.cos(math.radians(dec))) < tol
        assert 0 <= row["ra_hours"] < 24 and row["exposure_s"] > 0
        n += 1
    assert n > 20


def test_isl_states_are_close_to_the_truth(run):
    landing, _, truth, _, sats = run
    files = _load_files(landing)
    by_key = {t["key"]: t for t in truth}
    n = 0
    for t in truth:
        if t["kind"] != "isl" or t["disorder"] in ("malformed", "unknown_sensor", "impossible"):
            continue
        rec = parse_line("isl", files[t["file"]].split(b"\n")[t["record_no"]])
        when = by_key[t["duplicate_of"]]["event_time"] if t["disorder"] == "reprocessed" else t["event_time"]
        r, v, _ = _teme(sats[t["norad_id"]], _unix(when))
        assert np.linalg.norm(np.array([rec["x_m"], rec["y_m"], rec["z_m"]]) - r * 1000) < 6 * 50 * math.sqrt(3)
        assert np.linalg.norm(np.array([rec["vx_ms"], rec["vy_ms"], rec["vz_ms"]]) - v * 1000) < 6 * 0.05 * math.sqrt(3)
        n += 1
    assert n > 10
    reporting = {t["norad_id"] for t in truth if t["kind"] == "isl" and t["disorder"] == "none"}
    assert 1 <= len(reporting) <= 0.3 * len(sats)


def test_file_times(run):
    landing, _, truth, _, _ = run
    now = time.time()
    mtimes = {}
    for kind in ("radar", "optical", "isl"):
        for p in (landing / kind).iterdir():
            mtimes[f"{kind}/{p.name}"] = p.stat().st_mtime
    assert max(mtimes.values()) <= now
    late_files = {t["file"] for t in truth if t["disorder"] == "late"}
    assert late_files
    for f in late_files:
        assert mtimes[f] == max(mtimes.values())
        assert f.split(".")[0].endswith("_2")
    # event order and delivery order differ somewhere
    first_event = {}
    for t in truth:
        first_event[t["file"]] = min(first_event.get(t["file"], "~"), t["event_time"])
    regular = sorted((f for f in first_event if f not in late_files), key=lambda f: mtimes[f])
    assert [first_event[f] for f in regular] != sorted(first_event[f] for f in regular)


def test_injected_conjunction(run):
    _, _, _, summary, sats = run
    inj = summary["injected"]
    assert (inj["primary"], inj["secondary"], inj["designed_miss_m"]) == (99901, 99902, 150.0)
    tca = _unix(TCA)
    p, s = sats[99901], sats[99902]
    ts = tca + np.arange(-120.0, 120.0, 0.1)
    d = [np.linalg.norm(_teme(p, t)[0] - _teme(s, t)[0]) for t in ts]
    i = int(np.argmin(d))
    fine = ts[i] + np.arange(-0.1, 0.1, 0.0005)
    best = min(np.linalg.norm(_teme(p, t)[0] - _teme(s, t)[0]) for t in fine) * 1000
    assert abs(ts[i] - tca) < 0.2
    assert min(d) * 1000 < 1000 and abs(min(d) * 1000 - 150) < 0.2 * 150
    assert abs(best - 150) < 0.2 * 150
    assert abs(best - inj["achieved_miss_m"]) < 2.0
    # crossing at a large angle
    v1, v2 = _teme(p, tca)[1], _teme(s, tca)[1]
    assert math.degrees(math.acos(v1 @ v2 / np.linalg.norm(v1) / np.linalg.norm(v2))) > 45


def test_same_seed_same_bytes(run, tmp_path):
    landing1, cat1, _, summary1, _ = run
    landing2, cat2 = _run(tmp_path)
    assert _load_files(landing1) == _load_files(landing2)
    assert cat1.read_bytes() == cat2.read_bytes()
    t1 = sorted((landing1 / "_truth").glob("*.jsonl"))
    t2 = sorted((landing2 / "_truth").glob("*.jsonl"))
    assert [p.name for p in t1] == [p.name for p in t2] and t1[0].read_bytes() == t2[0].read_bytes()
    summary2 = json.loads(next((landing2 / "_truth").glob("*.summary.json")).read_text())

    def placeless(summary: dict) -> dict:  # where the files went differs; nothing else may
        config = {k: v for k, v in summary["config"].items() if k not in ("landing", "catalog_out")}
        return {**{k: v for k, v in summary.items() if k != "catalog_file"}, "config": config}

    assert placeless(summary1) == placeless(summary2)


def test_other_seed_differs_and_clean_has_no_disorder(tmp_path):
    landing = tmp_path / "landing"
    args = ["--start", START, "--end", "2026-11-21T05:50:00Z", "--objects", "30", "--seed", "9", "--clean",
            "--landing", str(landing), "--catalog-out", str(tmp_path / "c.tle")]
    assert _main(args, landing, tmp_path / "c.tle") == 0
    truth = [json.loads(x) for x in next((landing / "_truth").glob("*.jsonl")).read_text().splitlines()]
    assert truth and {t["disorder"] for t in truth} == {"none"}
    assert not any("_1." in t["file"] or "_2." in t["file"] for t in truth)


def test_given_catalogue_and_subsample(tmp_path, shared_data):
    landing = tmp_path / "landing"
    debris = shared_data / "catalog" / "celestrak_cosmos2251_debris_2025-10.tle"
    args = ["--start", "2025-10-03T00:00:00Z", "--end", "2025-10-03T00:10:00Z", "--catalog", str(debris),
            "--max-objects", "25", "--clean", "--landing", str(landing), "--catalog-out", str(tmp_path / "c.tle")]
    assert _main(args, landing, tmp_path / "c.tle") == 0
    summary = json.loads(next((landing / "_truth").glob("*.summary.json")).read_text())
    assert summary["objects"] == 25 and summary["records"] > 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--start", END, "--end", START], "must be after"),
        (["--start", START, "--end", START], "must be after"),
        (["--start", "2026-11-01T00:00:00Z", "--end", "2026-11-09T00:00:00Z"], "at most 7 days"),
        (["--start", "yesterday", "--end", END], "ISO-8601"),
        (["--end", END], "--start"),
        (["--start", START, "--end", END, "--dup-rate", "2"], "fraction"),
        (["--start", START, "--end", END, "--objects", "0"], "at least 1"),
        (["--start", START, "--end", END, "--catalog", "/nonexistent/cat.tle"], "no such file"),
        (["--start", START, "--end", END, "--conjunction-burn-h", "2"], "needs --inject-conjunction"),
        (["--start", START, "--end", END, "--inject-conjunction", "--tca", TCA, "--conjunction-burn-h", "1"],
         "the burn must fall between --start and the TCA"),
    ],
)
def test_bad_arguments_are_refused(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        sim.main(argv + ["--landing", str(tmp_path / "landing")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "landing").exists()


def test_module_entry_point_sizes_the_catalogue_from_the_setting(tmp_path):
    """``python -m sda.sim.simulate`` without --objects (what make run does) takes SDA_SIM_OBJECTS."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("SDA_")}
    env.update(SDA_SIM_OBJECTS="20", SDA_LAKEHOUSE=str(tmp_path / "lakehouse"), SDA_LANDING=str(tmp_path / "landing"),
               SDA_CATALOG_FILE=str(tmp_path / "catalog" / "catalog.tle"))
    done = subprocess.run([sys.executable, "-m", "sda.sim.simulate", "--start", "2026-11-21T06:00:00Z",
                           "--end", "2026-11-21T06:02:00Z", "--landing", str(tmp_path / "landing")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    tles = [line for line in (tmp_path / "catalog" / "catalog.tle").read_text().splitlines() if line.startswith("1 ")]
    assert len(tles) == 20


# --- a docked stack: several catalogue numbers, one element set, one body -------------------------------

def _renumber(line: str, norad_id: int) -> str:
    """A TLE line with another catalogue number (columns 3-7) and its checksum (column 69) redone."""
    body = line[:2] + f"{norad_id:05d}" + line[7:68]
    return body + str(sum(int(c) if c.isdigit() else (1 if c == "-" else 0) for c in body) % 10)


def test_a_docked_stack_is_one_body_seen_once(tmp_path):
    """Two numbers published with one element set (the ISS and a vehicle docked to it) are one body:
    the sensors write exactly the files they write without the second number, and the truth names the
    body's lowest number with both as ``same_body``."""
    from sda.orbit.catalog import parse_tle_text, synthetic

    start = dt.datetime(2026, 11, 21, 5, 40, tzinfo=dt.timezone.utc)
    text = synthetic.generate_catalog(30, start, 4)
    (tmp_path / "alone.tle").write_text(text)

    def simulate(name: str) -> "sim.SimulationResult":
        cfg = sim.SimConfig(start=start, end=start + dt.timedelta(minutes=10), landing=tmp_path / name / "landing",
                            catalog=tmp_path / f"{name}.tle", catalog_out=tmp_path / name / "catalog.tle", seed=3)
        return sim.simulate(cfg)

    alone = simulate("alone")
    seen = [json.loads(x)["norad_id"] for x in alone.truth_file.read_text().splitlines()]
    host = max(set(seen) - {None}, key=seen.count)  # the object with the most records
    entry = next(e for e in parse_tle_text(text)[0] if e.norad_id == host)
    twin = 99990
    assert twin not in seen and twin > host
    (tmp_path / "stacked.tle").write_text(
        text + f"{entry.name} DOCKED\n{_renumber(entry.line1, twin)}\n{_renumber(entry.line2, twin)}\n")
    stacked = simulate("stacked")

    assert stacked.files == alone.files
    assert all((stacked.landing / rel).read_bytes() == (alone.landing / rel).read_bytes() for rel in alone.files)
    truth = [json.loads(x) for x in stacked.truth_file.read_text().splitlines()]
    assert twin not in {t["norad_id"] for t in truth}
    of_host = [t for t in truth if t["norad_id"] == host]
    assert len(of_host) == seen.count(host) and all(t["same_body"] == [host, twin] for t in of_host)
    assert not any("same_body" in t for t in truth if t["norad_id"] != host)
    summary = json.loads(stacked.summary_file.read_text())
    assert summary["same_body"] == {str(host): [host, twin]} and summary["objects"] == 30


def test_an_association_with_another_number_of_the_observed_body_is_right():
    import pandas as pd

    from sda.sim import scoring

    scored = pd.DataFrame({
        "status": ["correlated", "correlated", "correlated", "uncorrelated", "uncorrelated"],
        "norad_id": pd.array([10, 11, 12, None, None], dtype="Int64"),
        "true_id": pd.array([10, 10, 10, 12, None], dtype="Int64"),
        "same_body": [(10, 11), (10, 11), (10, 11), (), ()],
        "ambiguous": [False, True, True, False, False],
    })
    figures = scoring.score(scored)
    # right: the exact number, the docked twin, and the uncorrelated row of no catalogued object
    assert (figures["right"], figures["wrong"], figures["uct"]) == (3, 1, 1)
    assert figures["right_same_body"] == 1 and figures["wrong_unflagged"] == 0
    assert figures["right_pct"] == 60.0 and figures["wrong_pct"] == 20.0


def test_held_cross_tags_are_listed_by_sensor_and_object():
    import pandas as pd

    from sda.sim import scoring

    scored = pd.DataFrame({
        "status": ["uncorrelated", "uncorrelated", "uncorrelated", "uncorrelated", "correlated"],
        "norad_id": pd.array([None, None, None, None, 7], dtype="Int64"),
        "true_id": pd.array([65119, 65119, 39234, 5, 7], dtype="Int64"),
        "sensor_id": ["FYLINGDALES", "FYLINGDALES", "DIEGOGARCIA", "EGLIN", "EGLIN"],
        "ambiguous": [True, True, True, False, False],
    })
    figures = scoring.score(scored)
    # three held (flagged, not associated); the fourth uncorrelated had no candidate, not a cross-tag
    assert figures["held_ambiguous"] == 3 and figures["uct"] == 4
    assert figures["held_by_sensor"] == {"FYLINGDALES: 65119": 2, "DIEGOGARCIA: 39234": 1}
    assert "held_by_sensor" not in scoring.score(scored.iloc[3:])


def test_committing_the_cross_tags_is_scored_against_their_likeliest_candidate():
    import pandas as pd

    from sda.sim import scoring

    scored = pd.DataFrame({
        "status": ["uncorrelated", "uncorrelated", "uncorrelated", "uncorrelated", "correlated"],
        "norad_id": pd.array([None, None, None, None, 7], dtype="Int64"),
        "nearest_norad_id": pd.array([65119, 65123, 26, 40, 7], dtype="Int64"),
        "true_id": pd.array([65119, 65119, 25, None, 7], dtype="Int64"),
        "same_body": [(), (), (25, 26), (), ()],
        "ambiguous": [True, True, True, True, False],
    })
    figures = scoring.score(scored)
    # held: four. Their likeliest: the true object, the other of the pair, another number of the
    # observed docked body, and a catalogued object for an observation of none
    assert figures["held_likeliest_right"] == 2
    # as held: right are the correlated row and the uncatalogued one (2 of 5), wrong none
    assert (figures["right_pct"], figures["wrong_pct"]) == (40.0, 0.0)
    # committed: right 1 + 2 of 5, wrong the swapped pair member and the uncatalogued one
    assert (figures["right_pct_if_held_committed"], figures["wrong_pct_if_held_committed"]) == (60.0, 40.0)
