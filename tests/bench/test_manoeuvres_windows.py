"""bench/manoeuvres_windows.py (``bench/manoeuvres.py --correlate``): which fused orbit each window is decided
against, which prior it is fitted on, and which rows each object's fit takes -- on hand-made rows."""

from __future__ import annotations

import pandas as pd

from bench import manoeuvres_windows as W
from sda.orbit.correlation import REASON_NO_CANDIDATE, REASON_UNDECIDED

ARC = 6 * 3600.0
SPAN = 5400.0


def fused(k: int, status: str = "converged", span_s: float = 4 * 3600.0) -> dict:
    end = (k + 1) * ARC
    return {"window_start_unix": k * ARC, "status": status, "epoch_unix": end, "fit_start_unix": end - span_s}


def test_the_basis_is_the_newest_usable_orbit_of_the_four_windows_before():
    rows = {1: [fused(2), fused(5), fused(6, span_s=600.0)],  # window 6 fitted over too short a span
            2: [fused(3, status="failed")],
            3: [fused(1)],  # five windows before window 6: out of reach
            4: [fused(6), fused(7)]}  # window 6 itself and later: not before it
    basis = W._basis(rows, 6, ARC, SPAN)
    assert set(basis) == {1}
    assert basis[1]["window_start_unix"] == 5 * ARC


def test_the_prior_is_the_newest_converged_orbit_before_the_window_however_short():
    assert W._previous([fused(2), fused(4, span_s=600.0), fused(5, status="failed")], 6, ARC)["window_start_unix"] \
        == 4 * ARC
    assert W._previous([fused(6)], 6, ARC) is None
    assert W._previous([], 6, ARC) is None


def test_each_object_takes_its_correlated_rows_and_the_gate_misses_that_name_it():
    rows = [("a", "correlated", 1, None, None), ("b", "correlated", 2, None, None),
            ("c", "uncorrelated", None, REASON_NO_CANDIDATE, 1),  # names object 1: its candidate
            ("d", "uncorrelated", None, REASON_UNDECIDED, 1),  # a held cross-tag: no one's
            ("e", "uncorrelated", None, REASON_NO_CANDIDATE, 9),  # names an object with no row here
            ("f", "uncorrelated", None, REASON_NO_CANDIDATE, None)]
    decided = pd.DataFrame(rows, columns=["obs_id", "status", "norad_id", "reason", "nearest_norad_id"])
    for c in ("norad_id", "nearest_norad_id"):
        decided[c] = pd.array(decided[c], dtype="Int64")
    groups = W._per_object(decided)
    assert sorted(groups) == [1, 2]
    assert list(groups[1].sort_values("obs_id")["obs_id"]) == ["a", "c"]
    assert list(groups[1].sort_values("obs_id")["candidate"]) == [False, True]
    assert list(groups[2]["obs_id"]) == ["b"]
