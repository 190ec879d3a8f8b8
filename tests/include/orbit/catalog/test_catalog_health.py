"""sda.orbit.catalog.propagation_health against Vallado's verification set shipped inside the sgp4 package:
SGP4-VER.TLE (element sets, each with start / stop / step in minutes after column 69) and tcppver.out
(the reference C++ output, which stops printing an object at the first time SGP4 fails)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest
import sgp4

from sda.orbit.catalog import SGP4_ERRORS, CatalogEntry, parse_tle_text, propagation_health

SGP4_DIR = Path(sgp4.__file__).parent


def verification_set() -> dict[int, tuple[str, str, float, float, float]]:
    """norad id -> (line 1, line 2 cut to 69 columns, start, stop, step in minutes)."""
    lines = (SGP4_DIR / "SGP4-VER.TLE").read_text().splitlines()
    out = {}
    for i, line in enumerate(lines):
        if line.startswith("1 ") and i + 1 < len(lines) and lines[i + 1].startswith("2 "):
            l2 = lines[i + 1]
            start, stop, step = (float(x) for x in l2[69:].split())
            out.setdefault(int(line[2:7]), (line[:69], l2[:69], start, stop, step))
    return out


def documented_times() -> dict[int, list[float]]:
    """norad id -> the minutes after epoch that tcppver.out prints (its first block per object)."""
    out: dict[int, list[float]] = {}
    current = None
    for line in (SGP4_DIR / "tcppver.out").read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == "xx":
            current = int(parts[0])
            current = current if current not in out else None
            if current is not None:
                out[current] = []
        elif parts and current is not None:
            out[current].append(float(parts[0]))
    return out


VER = verification_set()
DOCUMENTED = documented_times()


def entry(norad_id: int) -> CatalogEntry:
    l1, l2, *_ = VER[norad_id]
    [e], rejected = parse_tle_text(f"{l1}\n{l2}\n")
    assert rejected == []
    return e


def epoch_unix(e: CatalogEntry) -> float:
    return (e.satrec.jdsatepoch - 2440587.5 + e.satrec.jdsatepochF) * 86400.0


def grid(norad_id: int) -> np.ndarray:
    _, _, start, stop, step = VER[norad_id]
    return np.arange(start, stop + step / 2, step)


# The comments of SGP4-VER.TLE say what each of these does: 28872 "Sub-orbital case - Decayed
# 2005-11-29 ... lost in 50 minutes", 29141 "Last stage of decay - lost in under 420 min", 33333
# "check error code 4". Error 6 is SGP4's "satellite has decayed", 4 "semi-latus rectum below zero".
@pytest.mark.parametrize("norad_id, code", [(28872, 6), (29141, 6), (33333, 4)])
def test_first_failure_matches_the_reference_output(norad_id, code):
    e = entry(norad_id)
    minutes = grid(norad_id)
    [health] = propagation_health([e], epoch_unix(e) + minutes * 60.0)
    assert not health.ok and health.norad_id == norad_id
    assert health.error == code and health.meaning == SGP4_ERRORS[code]
    # tcppver.out prints up to the last good time; the first failure is the next time of the grid
    last_good = DOCUMENTED[norad_id][-1]
    step = VER[norad_id][4]
    failed_minute = (health.first_failure_unix - epoch_unix(e)) / 60.0
    assert failed_minute == pytest.approx(last_good + step, abs=1e-6)
    assert health.first_failure == dt.datetime.fromtimestamp(health.first_failure_unix, dt.timezone.utc)


def test_failure_time_resolved_on_a_finer_grid():
    """28872 is printed at 50 min and lost before 55 min: on a 0.1-minute grid it fails in between."""
    e = entry(28872)
    minutes = np.arange(0.0, 60.0, 0.1)
    [health] = propagation_health([e.satrec], epoch_unix(e) + minutes * 60.0)
    failed_minute = (health.first_failure_unix - epoch_unix(e)) / 60.0
    assert 50.0 < failed_minute <= 55.0
    assert health.error == 6 and health.norad_id == 28872  # from Satrec.satnum


def test_code_1_at_the_documented_time():
    """22312 (an SL-6 rocket body in its last days) is printed up to 474.2 min, step 20: it fails at
    494.2 with mean eccentricity out of range."""
    e = entry(22312)
    [health] = propagation_health([e], epoch_unix(e) + grid(22312) * 60.0)
    failed_minute = (health.first_failure_unix - epoch_unix(e)) / 60.0
    assert failed_minute == pytest.approx(DOCUMENTED[22312][-1] + 20.0, abs=1e-6)
    assert health.error == 1 and "eccentricity" in health.meaning


def test_healthy_objects_mixed_order_chunks_and_per_object_times():
    ids = [5, 28872, 6251, 33333, 29141]  # 5 and 6251 (DELTA 1 DEB) propagate over their whole range
    entries = [entry(n) for n in ids]
    minutes = np.arange(0.0, 600.0, 50.0)  # 0 .. 550 min after each object's own epoch
    per_object = np.stack([epoch_unix(e) + minutes * 60.0 for e in entries])
    base = propagation_health(entries, per_object)
    assert [h.norad_id for h in base] == ids
    assert [h.error for h in base] == [0, 6, 0, 4, 6]
    assert [h.ok for h in base] == [True, False, True, False, False]
    assert base[0].first_failure is None and base[0].first_failure_unix is None and base[0].meaning == "ok"
    # oracle: sgp4's scalar API, one time at a time
    for h, e in zip(base, entries):
        failing = [m for m in minutes if e.satrec.sgp4(e.satrec.jdsatepoch, e.satrec.jdsatepochF + m / 1440.0)[0] != 0]
        if failing:
            assert (h.first_failure_unix - epoch_unix(e)) / 60.0 == pytest.approx(min(failing), abs=1e-6)
    # the answer does not depend on the order of the times or on the chunking
    assert propagation_health(entries, per_object[:, ::-1]) == base
    assert propagation_health(entries, per_object, chunk_cells=7) == base
    # one time axis shared by all: 28872's first 10 hours
    shared = propagation_health(entries, per_object[1])
    assert shared[1] == base[1] and shared[0].ok
    assert all(h.ok for h in propagation_health(entries, np.array([])))


def test_sgp4_failures_are_not_monotonic_in_time():
    """SGP4 evaluates each time on its own: 28872 is lost 50-55 min after its epoch (tcppver.out) yet
    SGP4 returns a position without error at 100 min. A coarse grid can step over the first failure,
    and a caller must treat an object as unusable from its first failure on, not only where it fails."""
    e = entry(28872)
    at = lambda minute: e.satrec.sgp4(e.satrec.jdsatepoch, e.satrec.jdsatepochF + minute / 1440.0)[0]  # noqa: E731
    assert (at(50.0), at(55.0), at(100.0)) == (0, 6, 0)
    [coarse] = propagation_health([e], epoch_unix(e) + np.array([0.0, 50.0, 100.0]) * 60.0)
    assert coarse.ok
    [fine] = propagation_health([e], epoch_unix(e) + np.arange(0.0, 100.0, 1.0) * 60.0)
    assert fine.error == 6 and 50.0 < (fine.first_failure_unix - epoch_unix(e)) / 60.0 <= 55.0


def test_times_shape_is_checked():
    with pytest.raises(ValueError, match="one row per object"):
        propagation_health([entry(5)], np.zeros((2, 3)))
