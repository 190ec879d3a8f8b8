"""bench/manoeuvres.py's scoring on hand-made burns and detections (no simulation)."""

from __future__ import annotations

import math

import pytest

from bench import manoeuvres as bench

H = 3600.0
DAY = 86400.0


def burn(norad: int, t: float, dv: float, axis: int = 1) -> dict:
    rtn = [0.0, 0.0, 0.0]
    rtn[axis] = dv
    return {"norad_id": norad, "t_unix": t, "dv_rtn_ms": rtn, "dv_ms": abs(dv), "kind": "manoeuvre"}


def detection(norad: int, after: float, before: float, at: float, dv: float = 1.0, t_burn: float | None = None
              ) -> dict:
    return {"norad_id": norad, "burn_after_unix": after, "burn_before_unix": before,
            "burn_time_unix": (after + before) / 2.0 if t_burn is None else t_burn, "detected_at_unix": at,
            "dv_r_ms": 0.0, "dv_t_ms": dv, "dv_n_ms": 0.0, "dv_ms": abs(dv), "log10_p": -9.0, "passes": 1}


def obj(regime: str = "LEO", first_end: float | None = 6 * H, starts=(), tested_s: float = 18 * H) -> dict:
    return {"regime": regime, "first_end": first_end, "starts": sorted(starts), "tested_s": tested_s,
            "windows": [(0.0, 6 * H, "converged", "catalogue"), (6 * H, 12 * H, "converged", "fused"),
                        (12 * H, 18 * H, "converged", "fused"), (18 * H, 24 * H, "converged", "fused")]}


@pytest.mark.parametrize("dv, label", [(0.05, "0.05-0.1"), (0.0999, "0.05-0.1"), (0.1, "0.1-0.2"), (0.3, "0.2-0.5"),
                                       (0.5, "0.5-1"), (1.0, "1-2"), (2.0, "1-2"), (0.01, "<0.05"), (2.5, ">2")])
def test_delta_v_bins(dv, label):
    assert bench.dv_bin(dv) == label


def test_passes_are_one_sensors_observations_with_short_gaps_and_long_tracks_cut():
    # radar: 0..200 s, then 900 s (a 700 s gap: a second pass); ISL: every 60 s for 1500 s (cut at 1200 s)
    t = [0.0, 100.0, 200.0, 900.0] + [50.0 + 60.0 * k for k in range(26)]
    sensor = ["radar"] * 4 + ["isl"] * 26
    starts = bench.pass_starts(t, sensor)
    assert starts == [0.0, 50.0, 900.0, 1310.0]
    assert bench.pass_starts([], []) == []
    assert bench.passes_between(starts, 40.0, 900.0) == 2  # after 40 s and at or before 900 s
    assert bench.passes_between(starts, 0.0, math.inf) == 3
    assert bench.passes_between(starts, 2000.0, 1000.0) == 0
    spans = bench.pass_spans(t, sensor)
    assert spans == [(0.0, 200.0), (50.0, 1250.0), (900.0, 900.0), (1310.0, 1550.0)]
    # complete at 900 s: the radar's two passes; the ISL track that started at 50 s was still under way
    assert bench.passes_done(spans, -1.0, 900.0) == 2
    assert bench.passes_done(spans, 10.0, 1250.0) == 2  # the first started before 10 s


def test_each_burn_matches_once_the_earliest_detection_inside_its_widened_bracket():
    burns = [burn(1, 10 * H, 0.6), burn(2, 10 * H, 0.6), burn(1, 14 * H, 0.3), burn(1, 14 * H + 600, 0.3)]
    dets = [detection(1, 10 * H + 100, 11 * H, 12 * H),  # 100 s after the burn: inside the 120 s slack
            detection(1, 9 * H, 11 * H, 11.5 * H),  # earlier detection of the same burn: it takes it
            detection(2, 10 * H + 130, 11 * H, 11 * H),  # 130 s: outside
            detection(1, 13 * H, 15 * H, 15 * H, t_burn=14 * H + 500)]  # two burns inside: the nearer the estimate
    assert bench.match(dets, burns) == {1: 0, 3: 3}


def test_unmatched_detections_are_duplicates_late_brackets_echoes_of_untested_burns_or_false():
    burns = [burn(1, 10 * H, 1.0), burn(2, 3 * H, 1.0), burn(3, 8 * H, 0.3)]
    dets = [detection(1, 9 * H, 11 * H, 11 * H), detection(1, 9.5 * H, 10.5 * H, 12 * H),  # matched, duplicate
            detection(2, 7 * H, 8 * H, 8 * H),  # the object's first-window burn, absorbed there
            detection(3, 8.5 * H, 9 * H, 9 * H),  # after a testable burn its bracket missed
            detection(3, 9.5 * H, 10 * H, 10 * H),  # that burn is explained already: false
            detection(4, 7 * H, 8 * H, 8 * H)]  # an object that never burns
    pairs = bench.match(dets, burns)
    outcomes = bench.classify(dets, burns, pairs, [True, False, True])
    assert [o for o, _ in outcomes] == ["matched", "duplicate", "after untested burn", "late bracket", "false",
                                        "false"]
    assert [j for _, j in outcomes] == [0, None, 1, 2, None, None]


def test_scored_figures_per_bin_regime_and_the_targets():
    objects = {1: obj(starts=[2 * H, 9 * H, 10.5 * H, 11 * H, 12 * H, 20 * H]),
               2: obj("GEO", starts=[1 * H, 7 * H, 13 * H, 19 * H]), 3: obj(first_end=None), 4: obj(tested_s=10 * DAY),
               5: obj(tested_s=30 * DAY)}
    burns = [burn(1, 10 * H, 0.7), burn(1, 16 * H, 0.15),  # the second one missed
             burn(2, 3 * H, 1.5),  # before the first fit's epoch: untestable
             burn(2, 6.5 * H, 1.2, axis=2),  # detected three passes on
             burn(3, 8 * H, 0.6)]  # an object never fitted
    dets = [detection(1, 9.5 * H, 10.6 * H, 11 * H, dv=0.65, t_burn=10 * H + 360),
            detection(2, 6 * H, 7.1 * H, 20 * H, dv=1.3, t_burn=6.5 * H),
            detection(4, 12 * H, 13 * H, 13 * H, dv=0.3)]  # false, on an object that never burns
    dets[1]["dv_n_ms"], dets[1]["dv_t_ms"] = 1.3, 0.0
    fig = bench.score(burns, dets, objects)
    overall = fig["overall"]
    assert (overall["burns"], overall["testable"], overall["detected"], overall["recall"]) == (5, 3, 2, 0.6667)
    assert (overall["detections"], overall["matched"], overall["false"], overall["precision"]) == (3, 2, 1, 0.6667)
    assert fig["untestable"] == {"before the first fit's epoch": 1, "never fitted": 1}
    assert overall["missed_why"] == {"not detected": 1}
    assert fig["by_dv_bin"]["0.5-1"]["testable"] == 1 and fig["by_dv_bin"]["0.5-1"]["recall"] == 1.0
    assert fig["by_dv_bin"]["0.1-0.2"]["recall"] == 0.0
    assert fig["by_dv_bin"]["0.2-0.5"]["precision"] == 0.0  # the false one, binned by its estimate
    assert fig["by_regime"]["GEO"]["detected"] == 1 and fig["by_regime"]["LEO"]["testable"] == 2
    first = fig["scored_burns"][0]
    assert first["passes_to_detect"] == 2 and first["delay_h"] == pytest.approx(1.0)  # 10.5 h and 11 h
    assert first["burn_time_err_s"] == pytest.approx(360.0) and first["dv_abs_err_ms"] == pytest.approx(0.05)
    assert first["in_bracket"] and first["passes_after"] == 4
    geo = fig["scored_burns"][3]
    assert geo["passes_to_detect"] == 3 and geo["dv_vec_err_ms"] == pytest.approx(0.1)
    rate = fig["false_detections"]
    assert (rate["objects"], rate["false"], rate["object_days"]) == (2, 1, 40.0)
    assert rate["per_1000_object_days"] == pytest.approx(25.0)
    assert rate["upper95_per_1000_object_days"] == pytest.approx(1000.0 * 4.7439 / 40.0, rel=1e-3)
    within = fig["targets"]["dv_ge_0.5_within_2_passes"]
    assert (within["testable"], within["within"], within["share"], within["met"]) == (2, 1, 0.5, False)
    assert fig["targets"]["false_per_1000_object_days"]["verdict"] == "not met"
    leo = fig["targets"]["leo_dv_ge_0.5_within_2_passes"]  # object 1's 0.7 m/s burn, two passes after it
    assert (leo["burns_with_2_passes_after"], leo["within"], leo["met"]) == (1, 1, True)


def test_no_false_detection_over_few_days_is_not_shown_met():
    fig = bench.score([], [], {7: obj(tested_s=2 * DAY)})
    verdict = fig["targets"]["false_per_1000_object_days"]
    assert verdict["value"] == 0.0 and verdict["verdict"].startswith("not shown")
    assert fig["targets"]["dv_ge_0.5_within_2_passes"]["met"] is None
    long = bench.score([], [], {7: obj(tested_s=2000 * DAY)})
    assert long["targets"]["false_per_1000_object_days"]["verdict"] == "met"
    one = bench.score([], [detection(7, H, 2 * H, 2 * H)], {7: obj(tested_s=1999 * DAY)})
    assert one["targets"]["false_per_1000_object_days"]["verdict"].startswith("not shown")  # 0.5 per 1,000
    assert bench.score([], [], {7: obj(tested_s=1999 * DAY)})["targets"]["leo_dv_ge_0.5_within_2_passes"]["met"] is None


def test_burns_in_one_unobserved_gap_count_once():
    """Two burns with no pass between them inside one detection's bracket: the later one is matched, the earlier
    is in the same gap (counted with it in the grouped target figure); a third burn of another object with a
    pass between it and its detected neighbour is not."""
    objects = {1: obj(starts=[2 * H, 9 * H, 11 * H, 12 * H]), 2: obj(starts=[2 * H, 9 * H, 10.2 * H, 11 * H, 12 * H])}
    burns = [burn(1, 10 * H, 0.8), burn(1, 10.5 * H, 1.2),  # no pass starts between 10 h and 10.5 h
             burn(2, 10 * H, 0.8), burn(2, 10.5 * H, 1.2)]  # a pass starts at 10.2 h
    dets = [detection(1, 9 * H, 11.2 * H, 11.2 * H, t_burn=10.5 * H), detection(2, 9 * H, 11.2 * H, 11.2 * H,
                                                                                t_burn=10.5 * H)]
    fig = bench.score(burns, dets, objects)
    sb = fig["scored_burns"]
    assert [b["detected"] for b in sb] == [False, True, False, True]
    assert sb[0]["missed_why"] == "shares a bracket" and sb[0]["same_gap_as"] == 1
    assert sb[2]["missed_why"] == "shares a bracket" and sb[2]["same_gap_as"] is None
    within = fig["targets"]["dv_ge_0.5_within_2_passes"]
    assert (within["testable"], within["within"], within["within_counting_one_per_gap"]) == (4, 2, 3)
    assert within["share_counting_one_per_gap"] == 0.75
    assert within["of_those_with_2_passes_after_counting_one_per_gap"] == 0.75  # all four seen twice after


def test_by_default_the_bench_runs_the_services_sky_and_the_pipelines_association():
    """Issue 70, point 4: truth labels only behind a flag; the sky the service's default (the harsher)."""
    default = bench.parser().parse_args([])
    assert (default.sky, default.truth_labels) == ("harsh", False)
    flagged = bench.parser().parse_args(["--truth-labels", "--sky", "kind"])
    assert (flagged.sky, flagged.truth_labels) == ("kind", True)
    with pytest.raises(SystemExit):
        bench.parser().parse_args(["--sky", "cloudy"])
