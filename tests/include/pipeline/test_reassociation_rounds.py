"""The fuse stage's re-association (sda.pipeline.reassociation) without Spark: which copy of an observation a
crash left in both tables is the one its move came from, and the windows a run visits."""

from __future__ import annotations

import pandas as pd

from sda.pipeline import reassociation


def test_the_copy_a_crashed_move_left_behind_is_what_it_was():
    current = pd.DataFrame({"obs_id": ["a", "a", "b", "c", "c"],
                            "status": ["correlated", "uncorrelated", "correlated", "uncorrelated", "correlated"],
                            "norad_id": [5, None, 7, None, 9]})
    decided = pd.DataFrame({"obs_id": ["a", "b", "c"], "status": ["correlated", "uncorrelated", "uncorrelated"]})
    out = reassociation._before_the_move(current, decided).set_index("obs_id")
    assert list(out.index) == ["a", "b", "c"]
    # a: moving into correlated, the crash left its uncorrelated copy; c: moving out of correlated
    assert out.loc["a", "status"] == "uncorrelated" and out.loc["c", "status"] == "correlated"
    assert out.loc["b", "status"] == "correlated"


class _Rounds(reassociation.Rounds):
    def __init__(self, new_windows, written):  # no Spark: the window arithmetic alone
        self.new_windows, self.written = set(new_windows), set(written)


def test_the_windows_after_a_written_one_are_visited_up_to_the_newest():
    rounds = _Rounds({10}, {10})
    assert rounds.windows(None) == {10}  # the newest window with observations not known yet
    assert rounds.windows(12) == {10, 11, 12}
    assert rounds.windows(30) == {10, 11, 12, 13, 14}  # a basis reaches four windows back
    assert _Rounds(set(), set()).windows(30) == set()
