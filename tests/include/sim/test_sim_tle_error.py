"""The simulator's catalogue errors (``--tle-age-days``): true orbits apart from the catalogue's,
errors that follow the uncertainty model and grow with age, truth that says what they are.

Every check recomputes from the TLE lines written (catalogue and true element sets) with ``sgp4``
directly, never from the simulator's own arrays."""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pytest
from scipy.interpolate import BarycentricInterpolator
from sgp4.api import WGS72, Satrec, jday

from sda.orbit import frames
from sda.orbit.catalog import parse_tle_text, synthetic
from sda.sim import simulate as sim
from sda.sim import tle_error
from sda.sim.simulate import SimConfig, simulate

UTC = dt.timezone.utc
START = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
# The model's sigmas (sda.orbit.uncertainty, restated): epoch (R, T, N) m, growth (R, T, N) m/day, along-track m/day^2
LAW = {"LEO": ((100, 500, 200), (50, 1000, 50), 100), "MEO": ((300, 1500, 500), (30, 300, 30), 0),
       "GEO": ((500, 2000, 1000), (50, 500, 50), 0)}


def law_sigma(regime, age_days):
    s0, k, q = LAW[regime]
    return np.array([s0[0] + k[0] * age_days, s0[1] + k[1] * age_days + q * age_days**2, s0[2] + k[2] * age_days])


def state(lines, unix_s):
    sat = Satrec.twoline2rv(lines[0], lines[1], WGS72)
    when = dt.datetime.fromtimestamp(unix_s, UTC)
    jd, fr = jday(when.year, when.month, when.day, when.hour, when.minute, when.second + when.microsecond / 1e6)
    err, r, v = sat.sgp4(jd, fr)
    assert err == 0
    return np.array(r), np.array(v)


def rtn(true_lines, cat_lines, unix_s, true_position=None):
    """True - catalogue position (m) on the catalogue orbit's radial, along-track, cross-track axes; the
    true position is ``true_lines``' SGP4 one unless ``true_position`` (km, TEME) is given."""
    rt = state(true_lines, unix_s)[0] if true_position is None else true_position
    rc, vc = state(cat_lines, unix_s)
    radial = rc / np.linalg.norm(rc)
    cross = np.cross(rc, vc) / np.linalg.norm(np.cross(rc, vc))
    along = np.cross(cross, radial)
    d = (rt - rc) * 1000.0
    return np.array([d @ radial, d @ along, d @ cross])


@pytest.mark.parametrize("n_kozai, ecc, incl_deg",
                         [(0.0654, 0.0001, 53.0), (0.0437, 0.02, 98.6), (0.00437, 0.0002, 0.05)])
def test_kozai_mean_motion_inverts_sgp4s_conversion(n_kozai, ecc, incl_deg):
    sat = Satrec()
    sat.sgp4init(WGS72, "i", 1, 27000.0, 0.0, 0.0, 0.0, ecc, 0.0, math.radians(incl_deg), 0.0, n_kozai, 0.0)
    assert sat.sgp4(sat.jdsatepoch, sat.jdsatepochF)[0] == 0  # at the epoch SGP4's mean motion is its un-Kozai'd one
    assert sat.nm != pytest.approx(n_kozai, rel=1e-6)
    assert tle_error.kozai_mean_motion(sat.nm, ecc, math.radians(incl_deg)) == pytest.approx(n_kozai, rel=1e-12)


def test_parse_age():
    assert tle_error.parse_age("1") == (1.0, 1.0)
    assert tle_error.parse_age("0.5:3") == (0.5, 3.0)
    for bad in ("0", "-1", "3:1", "x", "1:2:3", "31"):
        with pytest.raises(ValueError, match="tle-age-days"):
            tle_error.parse_age(bad)


@pytest.mark.parametrize("value", ["0", "3:0.5", "soon", "45"])
def test_bad_age_is_refused(value, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        sim.main(["--start", "2026-11-21T06:00:00Z", "--end", "2026-11-21T06:10:00Z", "--tle-age-days", value,
                  "--landing", str(tmp_path / "landing")])
    assert exc.value.code == 2
    assert "--tle-age-days" in capsys.readouterr().err
    assert not (tmp_path / "landing").exists()


@pytest.fixture(scope="module")
def generated():
    entries, _ = parse_tle_text(synthetic.generate_catalog(1200, START, 3))
    return entries


def test_reepoch_keeps_every_object_where_the_published_set_puts_it(generated):
    anchor = START.timestamp() + 3600.0
    for e in generated[::40]:
        moved = tle_error.reepoch(e.satrec, START.timestamp() - 2.5 * 86400.0, anchor)
        line1, line2 = tle_error._lines(moved)
        assert Satrec.twoline2rv(line1, line2, WGS72).jdsatepoch + Satrec.twoline2rv(line1, line2, WGS72).jdsatepochF \
            == pytest.approx(e.satrec.jdsatepoch + e.satrec.jdsatepochF - 2.5, abs=1e-6)
        # at the anchor and half an hour later, the re-epoched set is where the published one is, to
        # the TLE format's rounding (1e-4 deg of inclination is 74 m at GEO)
        for t in (anchor, anchor + 1800.0):
            gap = np.linalg.norm(state((line1, line2), t)[0] - state((e.line1, e.line2), t)[0]) * 1000.0
            assert gap < 150.0, (e.norad_id, gap)


def test_errors_follow_the_model_and_grow_with_age(generated):
    age = 2.0
    errors = tle_error.apply(generated, START, START + dt.timedelta(minutes=30), (age, age), seed=5)
    mid = START.timestamp() + 900.0
    by_regime: dict[str, list] = {}
    for row in errors.orbits:
        cat, true = row["catalogue"], row["true"]
        epoch = Satrec.twoline2rv(*cat, WGS72)
        epoch_unix = (epoch.jdsatepoch + epoch.jdsatepochF - 2440587.5) * 86400.0
        assert (mid - epoch_unix) / 86400.0 == pytest.approx(age + 900 / 86400, abs=1e-5)
        a_now, a_later = age + 900 / 86400, age + 900 / 86400 + 1.0
        by_regime.setdefault(row["regime"], []).append(
            (rtn(true, cat, mid) / law_sigma(row["regime"], a_now),
             rtn(true, cat, mid + 86400.0) / law_sigma(row["regime"], a_later)))
    assert set(by_regime) >= {"LEO", "MEO", "GEO"}
    for regime, pairs in by_regime.items():
        now = np.array([p[0] for p in pairs])
        later = np.array([p[1] for p in pairs])
        n = len(now)
        tol = 4.0 / math.sqrt(2 * n) + 0.05  # sd of an RMS estimate ~ 1 / sqrt(2n), plus model slack
        rms_now, rms_later = np.sqrt(np.mean(now**2, axis=0)), np.sqrt(np.mean(later**2, axis=0))
        assert rms_now == pytest.approx([1.0, 1.0, 1.0], abs=tol), (regime, n, rms_now)
        # a day later the along-track error has grown as the model's sigma did (a drift, not noise)
        assert rms_later[1] == pytest.approx(1.0, abs=tol + 0.05), (regime, n, rms_later)
    # and the drift is the same error growing: along-track a day later correlates with now
    leo = by_regime["LEO"]
    assert np.corrcoef([p[0][1] for p in leo], [p[1][1] for p in leo])[0, 1] > 0.9


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
    root = tmp_path_factory.mktemp("tle-error")
    cfg = SimConfig(start=START, end=START + dt.timedelta(minutes=10), landing=root / "landing",
                    catalog_out=root / "catalog.tle", tle_age_days=(1.0, 1.0), inject_conjunction=True)
    return simulate(cfg)


def test_truth_records_the_true_orbit_and_the_error_at_each_observation(landed):
    summary = json.loads(landed.summary_file.read_text())
    assert summary["tle_error"]["age_days"] == [1.0, 1.0]
    orbits_file = landed.landing / summary["tle_error"]["orbits_file"]
    orbits = {row["norad_id"]: row for row in map(json.loads, orbits_file.read_text().splitlines())}
    catalogue = {e.norad_id: e for e in parse_tle_text(landed.catalog_file.read_text())[0]}
    assert set(orbits) == set(catalogue) - {sim.PRIMARY_ID, sim.SECONDARY_ID}  # the injected pair stays exact
    for norad_id, row in orbits.items():
        assert row["catalogue"] == [catalogue[norad_id].line1, catalogue[norad_id].line2]
        assert row["true"] != row["catalogue"]
        epoch = catalogue[norad_id].epoch
        assert (START - epoch).total_seconds() == pytest.approx(86400.0, abs=0.01)
    truth = [json.loads(line) for line in landed.truth_file.read_text().splitlines()]
    observed = [t for t in truth if t["norad_id"] in orbits and t["disorder"] == "none"]
    assert observed and all("error_rtn_m" in t for t in observed)
    # the truth is the numerical trajectory the summary points at (read here with numpy and scipy alone)
    with np.load(landed.landing / summary["truth"]["ephemeris_file"]) as data:
        times = float(data["t0"]) + float(data["step"]) * np.arange(data["states"].shape[1])
        rows, states = {int(n): i for i, n in enumerate(data["norad"])}, data["states"]
    gaps_km = []
    for t in observed[:: max(1, len(observed) // 60)]:
        when = dt.datetime.fromisoformat(t["event_time"].replace("Z", "+00:00")).timestamp()
        row = orbits[t["norad_id"]]
        k = int(np.clip(np.searchsorted(times, when) - 4, 0, len(times) - 8))
        true_r = BarycentricInterpolator(times[k:k + 8], states[rows[t["norad_id"]], k:k + 8, :3])(when)
        assert t["error_rtn_m"] == pytest.approx(rtn(None, row["catalogue"], when, true_r), abs=0.5)
        gaps_km.append(np.linalg.norm(true_r - state(row["true"], when)[0]))
    # the true orbit starts at the "true" element set's state and then follows other forces than SGP4's
    assert min(gaps_km) < 0.001 and max(gaps_km) > 0.005


def test_isl_reports_the_true_orbit_not_the_catalogue(landed):
    """An ISL fix minus the catalogue prediction is the recorded error, to the relay's 50 m noise."""
    from sda.orbit.sensors import load_sensors
    from sda.sim.scoring import landed_observations

    orbits_file = next(landed.landing.glob("_truth/*.orbits.jsonl"))
    orbits = {row["norad_id"]: row for row in map(json.loads, orbits_file.read_text().splitlines())}
    obs = landed_observations(landed, load_sensors())
    isl = obs[(obs["sensor_kind"] == "isl") & (obs["disorder"] == "none") & obs["true_id"].isin(list(orbits))]
    assert len(isl) > 20
    misses, errors = [], []
    for row in isl.itertuples():
        rc, _ = state(orbits[row.true_id]["catalogue"], row.event_time.tz_localize(UTC).timestamp())
        misses.append(np.linalg.norm(np.array([row.x_m, row.y_m, row.z_m]) - rc * 1000.0))
        errors.append(math.hypot(row.error_r_m, row.error_t_m, row.error_n_m))
    assert np.median(misses) > 1000.0  # the catalogue is kilometres off ...
    assert np.abs(np.array(misses) - np.array(errors)).max() < 300.0  # ... by exactly the recorded error (+ noise)


def test_reepoch_keeps_the_real_catalogue_in_place(shared_data):
    """All 13,407 real element sets moved three days back: at --start each object is where its
    published set puts it (re-epoching the elements unchanged would move each one along its orbit by
    its mean motion times the epoch shift: thousands of km, objects of one plane stacked up)."""
    from sda.orbit.catalog import latest_by_object, load_catalog
    from sda.orbit.frames import propagate

    files = ("celestrak_active_2025-10.tle", "celestrak_cosmos2251_debris_2025-10.tle")
    entries = latest_by_object([e for name in files for e in load_catalog(shared_data / "catalog" / name)[0]])
    assert len(entries) == 13407
    start = dt.datetime(2025, 10, 5, tzinfo=UTC).timestamp()
    moved = [tle_error.reepoch(e.satrec, start - 3 * 86400.0, start) for e in entries]
    times = np.array([start, start + 600.0])
    _, published, _ = propagate([e.satrec for e in entries], times)
    _, reepoched, _ = propagate(moved, times)
    gap_m = np.linalg.norm(published - reepoched, axis=-1) * 1000.0
    ok = np.isfinite(gap_m).all(axis=1)
    assert ok.mean() > 0.999
    assert np.median(gap_m[ok]) < 10.0
    assert np.percentile(gap_m[ok], 99) < 2000.0
    naive = [tle_error._init(e.satrec, (start - 3 * 86400.0) / 86400.0 + 2440587.5 - frames.SGP4_EPOCH_JD,
                             ecco=e.satrec.ecco, argpo=e.satrec.argpo, inclo=e.satrec.inclo, mo=e.satrec.mo,
                             no_kozai=e.satrec.no_kozai, nodeo=e.satrec.nodeo) for e in entries[:500]]
    _, shifted, _ = propagate(naive, times[:1])
    assert np.nanmedian(np.linalg.norm(published[:500, 0] - shifted[:, 0], axis=-1)) > 1000.0  # km: the bug it avoids
