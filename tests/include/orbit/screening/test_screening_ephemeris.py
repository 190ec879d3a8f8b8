"""The ephemeris cache of the focus grid (sda.orbit.screening.ephemeris) and what the incremental
screening does around it: the anchored focus grid, one task's rows, the task slots of the server.

The oracle for the cache is SGP4 itself: whatever the cache holds (nothing, this catalogue, an
older catalogue with renewed or fewer element sets, a damaged file), the states it gives back are
``SatrecArray.sgp4``'s doubles bit for bit, and the focus candidates are those of the uncached path
(which tests/include/orbit/screening/test_screening.py checks against brute force)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil

import numpy as np
import pytest
from sgp4.api import SatrecArray

from sda.lake.spark import task_slots
from sda.orbit import screening as S
from sda.orbit.catalog.synthetic import generate_entries
from sda.orbit.screening.ephemeris import Ephemeris, element_keys, grid_index

EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
EVERY_S = 180.0
THRESHOLD_KM = 5.0


def catalogue(n=300, seed=7):
    entries = generate_entries(n, EPOCH, seed)
    sats = S.satrecs_from_lines([l1 for _, l1, _ in entries], [l2 for _, _, l2 in entries])
    ids = np.array([s.satnum for s in sats], dtype=np.int64)
    return S.ScreeningObjects.from_satrecs(ids, sats)


def renewed(objects, rows, minutes=30.0):
    """The catalogue with the element sets of ``rows`` renewed: a later epoch, the same orbit."""
    sats = list(objects.satrecs)
    for i in rows:
        l1, l2 = S.tle_from_elements(int(objects.norad_ids[i]), EPOCH + dt.timedelta(minutes=minutes),
                                     sats[i].a * sats[i].radiusearthkm - sats[i].radiusearthkm, sats[i].ecco,
                                     np.degrees(sats[i].inclo), np.degrees(sats[i].nodeo),
                                     np.degrees(sats[i].argpo), np.degrees(sats[i].mo))
        [sats[i]] = S.satrecs_from_lines([l1], [l2])
    return S.ScreeningObjects.from_satrecs(objects.norad_ids, sats)


def grid_times(steps=70):
    start = EPOCH.timestamp() - 3600.0  # a multiple of 180 s
    return start + EVERY_S * np.arange(steps, dtype=float)


def same_block(a, b):
    return (np.array_equal(a.primary_id, b.primary_id) and np.array_equal(a.secondary_id, b.secondary_id)
            and np.array_equal(a.step, b.step) and a.pair_steps_grid == b.pair_steps_grid and a.errors == b.errors)


def states_equal(got, want):
    return all(np.array_equal(np.asarray(g), np.asarray(w)) for g, w in zip(got, want))


def test_states_are_sgp4s_own_doubles_whatever_the_cache_holds(tmp_path):
    objects = catalogue()
    times = grid_times(40)
    arr = SatrecArray(objects.satrecs)
    want = arr.sgp4(*S.propagation.unix_to_jd(times))
    n, m = len(objects.norad_ids), len(times)

    cold = Ephemeris.open(tmp_path, EVERY_S, objects.norad_ids, objects.satrecs)
    assert states_equal(cold.states(arr, times, reuse=False), want)
    assert (cold.hits, cold.written) == (0, m)  # a full screening stores every grid time
    warm = Ephemeris.open(tmp_path, EVERY_S, objects.norad_ids, objects.satrecs)
    assert states_equal(warm.states(arr, times, reuse=True), want)
    assert (warm.hits, warm.misses, warm.written) == (n * m, 0, 0)

    # 3 element sets renewed: the others are read, the 3 propagated; nothing rewritten (1 % < 5 %)
    new = renewed(objects, [5, 50, 250])
    new_arr = SatrecArray(new.satrecs)
    want_new = new_arr.sgp4(*S.propagation.unix_to_jd(times))
    after = Ephemeris.open(tmp_path, EVERY_S, new.norad_ids, new.satrecs)
    assert states_equal(after.states(new_arr, times, reuse=True), want_new)
    assert (after.hits, after.misses, after.written) == ((n - 3) * m, 3 * m, 0)

    # a catalogue with objects removed and added (rows no longer line up), one file damaged, one gone
    files = sorted(after.directory.glob("k*.npy"))
    files[3].write_bytes(files[3].read_bytes()[:1000])
    files[7].unlink()
    extra = catalogue(20, seed=8)
    ids = np.concatenate([new.norad_ids[10:], extra.norad_ids + 90000])
    mixed = S.ScreeningObjects.from_satrecs(ids, list(new.satrecs[10:]) + list(extra.satrecs))
    mixed_arr = SatrecArray(mixed.satrecs)
    got = Ephemeris.open(tmp_path, EVERY_S, mixed.norad_ids, mixed.satrecs)
    assert states_equal(got.states(mixed_arr, times, reuse=True), mixed_arr.sgp4(*S.propagation.unix_to_jd(times)))
    # the 288 kept objects (290 but the renewed 50 and 250) are read at the 38 intact times; the 22
    # others are 7 % of the catalogue (> 5 %): every file is written again, for this catalogue
    assert got.hits == (n - 10 - 2) * (m - 2) and got.written == m
    again = Ephemeris.open(tmp_path, EVERY_S, mixed.norad_ids, mixed.satrecs)
    again.states(mixed_arr, times, reuse=True)
    assert (again.hits, again.written) == (len(ids) * m, 0)


def test_focus_candidates_with_the_cache_are_those_without(tmp_path):
    objects = catalogue()
    times = grid_times()
    focus = np.zeros(len(objects.norad_ids), dtype=bool)
    focus[[3, 70, 140, 141, 299]] = True
    wide = 200.0  # km: 300 objects rarely come within 5 km; the filters are the same at any threshold
    plain = S.focus_block_candidates(objects, times, 0, wide, EVERY_S, focus)
    assert len(plain.step)  # the test means something: the focus objects have candidates
    full = Ephemeris.open(tmp_path, EVERY_S, objects.norad_ids, objects.satrecs)
    S.block_candidates(objects, times, 0, wide, EVERY_S, ephemeris=full)  # stores the grid
    for renewed_rows in ([], [70, 141]):
        now = renewed(objects, renewed_rows) if renewed_rows else objects
        eph = Ephemeris.open(tmp_path, EVERY_S, now.norad_ids, now.satrecs)
        cached = S.focus_block_candidates(now, times, 0, wide, EVERY_S, focus, ephemeris=eph)
        uncached = S.focus_block_candidates(now, times, 0, wide, EVERY_S, focus)
        assert same_block(cached, uncached)
        assert eph.hits == (len(now.norad_ids) - len(renewed_rows)) * len(times)


def test_focus_candidates_without_the_partners_matrix_are_the_same(monkeypatch):
    """Past FOCUS_PARTNERS_MAX_BYTES the focus part tests each candidate's bands per step instead."""
    from sda.orbit.screening import candidates

    objects = catalogue()
    times = grid_times(30)
    focus = np.zeros(len(objects.norad_ids), dtype=bool)
    focus[[3, 70, 140, 141, 299]] = True
    with_matrix = S.focus_block_candidates(objects, times, 0, 200.0, EVERY_S, focus)
    monkeypatch.setattr(candidates, "FOCUS_PARTNERS_MAX_BYTES", 0)
    assert same_block(S.focus_block_candidates(objects, times, 0, 200.0, EVERY_S, focus), with_matrix)
    assert len(with_matrix.step)


def test_grid_index_takes_whole_multiples_only():
    assert grid_index(1_763_704_800.0, 180.0) == 9_798_360  # 2025-11-21T06:00Z
    assert grid_index(1_763_704_830.0, 180.0) is None  # 30 s off the grid
    assert grid_index(1_763_704_800.5, 180.0) is None
    assert grid_index(361.0, 180.5) is None  # a step off whole seconds is never cached


def test_element_keys_follow_every_number_sgp4_starts_from():
    objects = catalogue(4)
    keys = element_keys(objects.norad_ids, objects.satrecs)
    assert len(set(keys.tolist())) == 4
    again = catalogue(4)  # the same lines parsed again: the same keys
    assert np.array_equal(element_keys(again.norad_ids, again.satrecs), keys)
    other = renewed(objects, [2])
    assert np.array_equal(element_keys(other.norad_ids, other.satrecs) == keys, [True, True, False, True])
    assert not np.array_equal(element_keys(objects.norad_ids + 1, objects.satrecs), keys)  # the id is in it


def test_prune_removes_the_times_before_the_start(tmp_path):
    objects = catalogue(5)
    times = grid_times(10)
    eph = Ephemeris.open(tmp_path, EVERY_S, objects.norad_ids, objects.satrecs)
    eph.states(SatrecArray(objects.satrecs), times, reuse=False)
    assert eph.prune(before=times[4]) == 4
    left = sorted(int(p.stem[1:]) for p in eph.directory.glob("k*.npy"))
    assert left == [int(t // EVERY_S) for t in times[4:]]


def test_a_cache_removed_under_a_live_process_is_made_again(tmp_path):
    objects = catalogue(5)
    times = grid_times(4)
    eph = Ephemeris.open(tmp_path / "cache", EVERY_S, objects.norad_ids, objects.satrecs)
    shutil.rmtree(tmp_path / "cache")
    eph.states(SatrecArray(objects.satrecs), times, reuse=False)
    assert eph.written == 4 and len(list(eph.directory.glob("k*.npy"))) == 4


def test_no_usable_directory_turns_the_cache_off(tmp_path):
    objects = catalogue(3)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert Ephemeris.open(blocker, EVERY_S, objects.norad_ids, objects.satrecs) is None
    assert Ephemeris.open(None, EVERY_S, objects.norad_ids, objects.satrecs) is None
    assert Ephemeris.open(tmp_path, 7.5, objects.norad_ids, objects.satrecs) is None  # off whole seconds


def test_focus_grid_is_anchored_to_multiples_of_its_step():
    epochs = {n: 0.0 for n in range(1, 11)}
    previous = S.ScreeningState(1_763_704_800.0, 1_763_791_200.0, THRESHOLD_KM, 30.0, S.code_version(), epochs,
                                S.empty_events())
    plan = S.plan_increment(previous, {**epochs, 2: 60.0}, 1_763_704_930.0, 1_763_791_260.0, THRESHOLD_KM, 30.0,
                            S.code_version())
    assert [(p.start, p.end, p.step_s, p.focus) for p in plan.parts] == [
        (1_763_791_200.0, 1_763_791_260.0, 30.0, None),
        (1_763_704_800.0, 1_763_791_200.0, 180.0, (2,)),  # 06:02:10 -> 06:00:00, the multiple of 180 s
    ]
    assert S.focus_grid_start(1_763_704_930.0, 30.0) == 1_763_704_800.0
    assert S.focus_grid_start(1_763_704_930.5, 30.0) == 1_763_704_930.5  # off whole seconds: not anchored



def test_block_rows_add_up_to_the_summary():
    res = S.BlockResult(np.array([1, 1]), np.array([2, 3]), np.array([4, 5]), 17, {9: (6, 3)})
    rows = S.block_frame(res, 1, 4, read=250).to_dict("records")
    assert [r["kind"] for r in rows] == ["pair", "pair", "count", "rows", "read", "error"]
    assert rows[0]["step"] == (1 << S.PART_SHIFT) | 4
    parts = [S.Part(0.0, 600.0, 30.0), S.Part(1000.0, 2000.0, 180.0, (9,))]
    side = S.summarise([r for r in rows if r["kind"] != "pair"] * 2, parts)
    assert (side.pair_steps_grid, side.candidate_rows, side.ephemeris_read) == (34, 4, 500)
    assert side.first_error == {9: (1000.0 + 6 * 180.0, 3)}


@dataclasses.dataclass
class _Conf:
    master: str

    def get(self, key, default=None):
        return self.master if key == "spark.master" else default


@pytest.mark.parametrize("master, slots", [("local[2]", 2), ("local[3, 4]", 3), ("local", 1),
                                           ("local[*]", os.cpu_count()), ("spark://127.0.0.1:7077", 6)])
def test_task_slots_of_the_master(master, slots):
    class Spark:
        conf = _Conf(master)

    assert task_slots(Spark(), 6) == slots
