"""sda.sim.feed: a simulation continued block by block is one sky -- its trajectories one integration (checked
against a single integration over the whole span, done here), its records new and on those trajectories, its
files delivered when due and never written twice -- and a resumed feed neither repeats nor loses a block."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest

from sda.sim import dynamics, feed
from sda.sim import simulate as sim
from tests.include.sim.test_simulate import TrueBody, _load_files, _teme, _unix, parse_line

WORLD_MIN, GAP_MIN = 20, 40  # the first simulation, then the time the feed catches up on


def _iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def sky(tmp_path_factory):
    """A 40-object world simulated over 20 minutes ending 40 minutes before the current chunk, then caught up."""
    tmp = tmp_path_factory.mktemp("feed")
    landing, cat = tmp / "landing", tmp / "catalog.tle"
    end = feed.floor_chunk(dt.datetime.now(dt.timezone.utc)) - dt.timedelta(minutes=GAP_MIN)
    start = end - dt.timedelta(minutes=WORLD_MIN)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SDA_LANDING", str(landing))
        mp.setenv("SDA_CATALOG_FILE", str(cat))
        assert sim.main(["--start", _iso(start), "--end", _iso(end), "--objects", "40", "--seed", "3",
                         "--tle-age-days", "0.5:3", "--inject-conjunction", "--tca", _iso(end), "--sky", "kind"]) == 0
        first = {f"{k}/{p.name}": p.read_bytes() for k in ("radar", "optical", "isl") for p in (landing / k).glob("*")}
        world_summary = json.loads(next((landing / "_truth").glob("*.summary.json")).read_text())
        bodies = json.loads((landing / world_summary["truth"]["bodies_file"]).read_text())
        catalogue = cat.read_bytes()
        assert feed.main(["init"]) == 0
        assert feed.main(["catch-up", "--max-gap-h", "3"]) == 0
        state = json.loads((landing / feed.STATE).read_text())
    return {"landing": landing, "cat": cat, "start": start, "end": end, "first": first, "bodies": bodies,
            "catalogue": catalogue, "state": state, "world_summary": world_summary}


def _block_summary(sky) -> dict:
    return json.loads((sky["landing"] / sky["state"]["truth"]).read_text())


def test_the_state_says_how_far_the_sky_is_observed(sky):
    state = sky["state"]
    caught_up_s = _unix(state["observed_until"]) - sky["end"].timestamp()
    assert caught_up_s in (GAP_MIN * 60, GAP_MIN * 60 + 300)  # (+300: the clock passed a chunk meanwhile)
    assert state["blocks"] == 1 and state["world"]["start"] == _iso(sky["start"])
    summary = _block_summary(sky)
    assert summary["start"] == _iso(sky["end"]) and summary["config"]["stream"] == 1
    assert sky["cat"].read_bytes() == sky["catalogue"]  # the catalogue is the world's, not rewritten


def test_the_continued_trajectories_are_one_integration(sky):
    """The block's truth against one integration of every body from the world's start to past the block."""
    summary = _block_summary(sky)
    with np.load(sky["landing"] / summary["truth"]["ephemeris_file"]) as data:
        t0, step, states, norad = float(data["t0"]), float(data["step"]), data["states"], data["norad"]
    start_gcrf = np.array([[np.nan if x is None else x for x in b["start_gcrf_m"]] for b in sky["bodies"]])
    params = [dynamics.BodyParams(b["cd"], b["cr"], b["area_to_mass_m2_kg"]) for b in sky["bodies"]]
    t_start = sky["start"].timestamp()
    steps = int(round((t0 + (states.shape[1] - 1) * step - t_start) / step))
    whole = dynamics.integrate(start_gcrf, t_start, steps, params, step)
    r, v = dynamics.gcrf_to_teme(whole, t_start + step * np.arange(steps + 1))
    offset = int(round((t0 - t_start) / step))
    ok = np.isfinite(states[:, :, 0]).all(axis=1)
    assert ok.sum() >= 35 and [int(n) for n in norad] == [b["norad_id"] for b in sky["bodies"]]
    diff_m = np.linalg.norm(states[ok, :, :3] - r[ok, offset:offset + states.shape[1]], axis=-1) * 1000.0
    assert np.nanmax(diff_m) < 0.01, f"the continued truth departs from one integration by {np.nanmax(diff_m):.3f} m"


def test_the_block_observes_the_world_on_its_trajectories(sky):
    """Every record of the block is new (its files are not the first simulation's), after the world's end, and
    the ISL states lie within their noise of the independently integrated truth."""
    landing, summary = sky["landing"], _block_summary(sky)
    truth = [json.loads(line) for line in (landing / summary["truth_file"]).read_text().splitlines()]
    files = _load_files(landing)
    block_files = {t["file"] for t in truth}
    assert block_files and not block_files & set(sky["first"])
    assert all(files[name] == data for name, data in sky["first"].items())  # nothing of the first run rewritten
    early_s = {"reprocessed": 0.05}  # a reprocessed copy's time is shifted by up to 50 ms (sda.sim.disorder)
    assert all(_unix(t["event_time"]) >= sky["end"].timestamp() - early_s.get(t["disorder"], 0.0)
               for t in truth if t["disorder"] != "malformed")
    with np.load(landing / summary["truth"]["ephemeris_file"]) as data:
        times = float(data["t0"]) + float(data["step"]) * np.arange(data["states"].shape[1])
        bodies = {int(n): TrueBody(times, data["states"][i]) for i, n in enumerate(data["norad"])}
    n = 0
    for t in truth:
        if t["kind"] != "isl" or t["disorder"] != "none":
            continue
        rec = parse_line("isl", files[t["file"]].split(b"\n")[t["record_no"]])
        r, _, _ = _teme(bodies[t["norad_id"]], _unix(t["event_time"]))
        assert np.linalg.norm(np.array([rec["x_m"], rec["y_m"], rec["z_m"]]) - r * 1000) < 6 * 50 * math.sqrt(3)
        n += 1
    assert n >= 5


def test_pending_files_land_when_due_and_keep_their_delivery_time(tmp_path):
    landing = tmp_path / "landing"
    due, later = landing / feed.PENDING / "radar" / "A_0.jsonl", landing / feed.PENDING / "optical" / "B.csv"
    for path, when in ((due, time.time() - 60), (later, time.time() + 3600)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
        os.utime(path, (when, when))
    mtime = due.stat().st_mtime
    assert feed.release(landing) == ["radar/A_0.jsonl"]
    assert (landing / "radar" / "A_0.jsonl").stat().st_mtime == mtime and later.is_file()
    assert not (landing / "optical" / "B.csv").exists()
    (landing / "optical").mkdir()
    (landing / "optical" / "B.csv").write_text("already here\n")
    assert feed.release(landing, now=math.inf) == []  # a name already landed is never overwritten
    assert later.is_file() and (landing / "optical" / "B.csv").read_text() == "already here\n"
    (landing / "optical" / "B.csv").unlink()
    assert feed.release(landing, now=math.inf) == ["optical/B.csv"]  # a resume lands it before it is due:
    assert (landing / "optical" / "B.csv").stat().st_mtime <= time.time()  # it lands now, not in the future


def test_a_resumed_feed_observes_only_what_is_new(sky, monkeypatch):
    """Catching up again at once observes nothing (the current chunk has not passed); with the clock moved on
    by two chunks, the next block starts where the last ended, on a new random stream."""
    landing = sky["landing"]
    monkeypatch.setenv("SDA_LANDING", str(landing))
    monkeypatch.setenv("SDA_CATALOG_FILE", str(sky["cat"]))
    from sda.config.settings import load_settings

    before = json.loads((landing / feed.STATE).read_text())
    observed = feed.Feed.load(load_settings())
    start = observed.observed_until
    observed.observe(start, start + dt.timedelta(minutes=10), hold=True)
    state = json.loads((landing / feed.STATE).read_text())
    assert state["blocks"] == before["blocks"] + 1
    assert state["observed_until"] == _iso(start + dt.timedelta(minutes=10))
    pending = sorted(p for p in (landing / feed.PENDING).rglob("*") if p.is_file())
    assert pending and all(p.stat().st_mtime > start.timestamp() for p in pending)
    old = _block_summary({"landing": landing, "state": before})
    assert "truth" in old and not (landing / old["truth"]["ephemeris_file"]).exists()  # the newest covers it


def test_nothing_to_resume_is_said(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SDA_LANDING", str(tmp_path / "empty"))
    assert feed.main(["catch-up"]) == feed.NOT_RESUMABLE
    assert "no feed state" in capsys.readouterr().err
    assert feed.main(["init"]) == feed.NOT_RESUMABLE
    assert feed.main(["sky"]) == feed.NOT_RESUMABLE


def test_the_sky_a_feed_continues_is_told(tmp_path, monkeypatch, capsys):
    """What scripts/run.sh asks to set the stages' light time: the world's sky, from the feed's state."""
    monkeypatch.setenv("SDA_LANDING", str(tmp_path))
    (tmp_path / "_feed").mkdir()
    (tmp_path / "_feed" / "state.json").write_text(json.dumps({"world": {"sky": "storm", "seed": 3}}))
    assert feed.main(["sky"]) == 0 and capsys.readouterr().out.strip() == "storm"
    (tmp_path / "_feed" / "state.json").write_text(json.dumps({"world": {"seed": 3}}))  # before skies: the kind one
    assert feed.main(["sky"]) == 0 and capsys.readouterr().out.strip() == "kind"


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(SystemExit):
        feed.main(["run", "--poll-s", "0"])
    assert "--poll-s and --max-gap-h must be positive" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        feed.main(["catch-up", "--max-gap-h", "x"])


def test_a_simulation_records_what_regenerates_it(sky):
    cfg = feed.world_config(sky["world_summary"]["config"])
    assert cfg.start == sky["start"] and cfg.seed == 3 and cfg.tle_age_days == (0.5, 3.0) and cfg.stream is None


def test_old_blocks_truth_goes_with_their_files(tmp_path):
    truth = tmp_path / "landing" / "_truth"
    truth.mkdir(parents=True)
    now = time.time()

    def summary(name: str, stream, age_h: float) -> Path:
        (truth / f"{name}.jsonl").write_text("{}\n")
        path = truth / f"{name}.summary.json"
        path.write_text(json.dumps({"config": {"stream": stream}, "truth_file": f"_truth/{name}.jsonl"}))
        os.utime(path, (now - age_h * 3600, now - age_h * 3600))
        return path

    world, old, young = summary("world", None, 100), summary("old", 3, 100), summary("young", 9, 1)
    keep = summary("kept", 2, 100)
    assert feed.prune_truth(tmp_path / "landing", 72, keep, now) == 1
    assert sorted(p.name for p in truth.iterdir()) == sorted(
        f"{n}.{ext}" for n in ("world", "young", "kept") for ext in ("jsonl", "summary.json"))
    assert world.is_file() and young.is_file() and not old.exists()
    assert feed.prune_truth(tmp_path / "landing", 0, keep, now) == 0
