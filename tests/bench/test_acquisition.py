"""bench/acquisition.py's scoring on hand-made hidden bodies and provisional objects (no simulation)."""

from __future__ import annotations

import pytest

from bench import acquisition as bench

H = 3600.0


def body(regime: str = "LEO", first: float | None = 1.0, passes: int = 5) -> dict:
    return {"regime": regime, "first_obs": None if first is None else first * H, "passes": passes}


def obj(norad: int, of: int | None, created: float, founder: str = "f", purity: float = 1.0, status: str = "active",
        ended: float | None = None, err: float | None = 0.1, into: int | None = None) -> dict:
    return {"norad_id": norad, "body": of, "created": created * H, "founder": founder, "purity": purity,
            "status": status, "ended": None if ended is None else ended * H, "pos_err_km": err, "lines_err_km": err,
            "passes": 2, "merged_into": into}


@pytest.mark.parametrize("ids, expected", [
    ([5, 5, 7, None], (5, 0.5)),  # half exactly: its body; the unlabelled row counts in the denominator
    ([7, 7, 5], (7, 2 / 3)),
    ([5, 7, None], (None, 1 / 3)),  # no body holds half
    ([None], (None, 0.0)), ([], (None, 0.0))])
def test_an_object_is_of_the_body_holding_half_of_its_observations(ids, expected):
    assert bench.owner(iter(ids)) == pytest.approx(expected)


def test_objects_are_acquired_duplicates_of_catalogued_bodies_or_impure_in_creation_order():
    hidden = {1, 2}
    objects = [obj(80001, 1, 5.0), obj(80002, 1, 3.0, "b"), obj(80003, 1, 3.0, "a"),  # same step: founder order
               obj(80004, 70001, 1.0), obj(80005, None, 2.0, purity=0.4), obj(80006, 2, 9.0)]
    assert bench.classify(objects, hidden) == ["duplicate", "duplicate", "acquired", "catalogued body", "impure",
                                               "acquired"]


@pytest.mark.parametrize("created, status, ended, expected", [
    (2.0, "retired", 20.0, "retired"),  # ended before created + 24 h
    (10.0, "merged", 12.0, "merged"),
    (2.0, "retired", 27.0, "survived"),  # retired after its 24 h: it survived them
    (2.0, "active", None, "survived"),  # 26 h <= the run's 30 h
    (10.0, "active", None, "undecided")])  # 34 h: past the run's end
def test_fate_of_an_object_24_hours_after_its_creation(created, status, ended, expected):
    assert bench.fate(obj(80001, 1, created, status=status, ended=ended), 30.0 * H) == expected


def scenario() -> tuple[dict, list[dict]]:
    bodies = {1: body("LEO", 1.0, 5), 2: body("LEO", 2.0, 4),
              3: body("LEO", 20.0, 3),  # first seen late: both windows cut by the run's end
              4: body("LEO", 0.5, 2),  # 2 passes: outside the target population
              5: body("GEO", 4.0, 2), 6: body("MEO", None, 0)}  # 6: never observed
    objects = [obj(80001, 1, 3.0, err=0.1), obj(80002, 2, 10.0, err=0.3), obj(80005, 5, 6.0, err=2.0),
               obj(80011, 1, 12.0, status="retired", ended=20.0),  # duplicate of 1, retired after 8 h
               obj(80020, 70001, 1.0),  # of a catalogued body, active, 1 + 24 h > 24 h: undecided
               obj(80030, None, 1.0, purity=0.4, status="merged", ended=5.0)]  # impure, merged
    return bodies, objects


def test_each_hidden_body_scored_delay_windows_and_censoring():
    bodies, objects = scenario()
    for o, what in zip(objects, bench.classify(objects, set(bodies))):
        o["outcome"] = what
    rows = {r["norad_id"]: r for r in bench.score_bodies(bodies, objects, 24.0 * H)}
    assert rows[1]["acquired"] and rows[1]["provisional_id"] == 80001 and rows[1]["duplicates"] == 1
    assert rows[1]["delay_h"] == pytest.approx(2.0) and rows[1]["within_6h"] and rows[1]["within_24h"]
    assert rows[2]["delay_h"] == pytest.approx(8.0) and not rows[2]["within_6h"] and rows[2]["within_24h"]
    assert not rows[2]["censored_6h"]  # 2 h + 6 h < 24 h: a plain miss of the 6 h window
    assert not rows[3]["acquired"] and rows[3]["censored_6h"] and rows[3]["censored_24h"]
    assert not rows[4]["censored_6h"] and rows[4]["censored_24h"]  # 0.5 + 6 <= 24 < 0.5 + 24
    assert not rows[6]["observed"] and not rows[6]["acquired"] and not rows[6]["censored_24h"]
    assert rows[5]["pos_err_km"] == pytest.approx(2.0) and rows[5]["purity"] == 1.0


def test_figures_overall_per_regime_target_and_false_objects():
    bodies, objects = scenario()
    figures = bench.score(bodies, objects, 24.0 * H)
    overall = figures["overall"]
    assert (overall["bodies"], overall["observed"], overall["acquired"], overall["share"]) == (6, 5, 3, 0.6)
    # within 6 h: bodies 1 and 5 (2 h each); body 3's window is cut short (20 h + 6 h > 24 h)
    assert overall["within_6h"] == {"acquired": 2, "share": 0.4, "censored": 1, "share_uncensored": 0.5}
    assert overall["within_24h"] == {"acquired": 3, "share": 0.6, "censored": 2, "share_uncensored": 1.0}
    # delays 2, 8, 2 h: p90 = 2 + 0.8 * (8 - 2); errors 0.1, 0.3, 2.0 km: p90 = 0.3 + 0.8 * 1.7
    assert overall["delay_h"] == {"n": 3, "median": 2.0, "p90": 6.8, "max": 8.0}
    assert overall["pos_err_km"] == {"n": 3, "median": 0.3, "p90": 1.66, "max": 2.0}
    assert sorted(figures["by_regime"]) == ["GEO", "LEO", "MEO"]
    assert figures["by_regime"]["LEO"]["observed"] == 4 and figures["by_regime"]["LEO"]["acquired"] == 2
    assert figures["by_regime"]["MEO"]["observed"] == 0 and figures["by_regime"]["MEO"]["share"] is None
    target = figures["leo_seen_3_passes"]  # bodies 1, 2 (acquired) and 3 (first seen at 20 h)
    assert target["observed"] == 3 and target["within_24h"]["share"] == 0.6667
    assert target["within_24h"]["share_uncensored"] == 1.0
    assert figures["targets"]["leo_3_passes_within_24h"]["verdict"] == "not shown (the run cut windows short)"
    false = figures["false_objects"]
    assert (false["objects"], false["false"]) == (6, 3)
    assert false["by_outcome"] == {"duplicate": 1, "catalogued body": 1, "impure": 1}
    assert false["fate_24h"] == {"retired": 1, "merged": 1, "survived": 0, "undecided": 1}
    assert figures["targets"]["no_false_object_surviving_24h"]["verdict"].startswith("undecided (1 ")
    assert [o["outcome"] for o in objects] == ["acquired", "acquired", "acquired", "duplicate", "catalogued body",
                                               "impure"]


def test_a_merge_into_another_bodys_object_loses_the_body():
    bodies = {1: body(), 2: body(), 3: body()}
    objects = [obj(80001, 1, 2.0), obj(80002, 2, 2.0, "b", status="merged", ended=4.0, into=80001),  # wrong
               obj(80003, 3, 2.0, "c", status="merged", ended=4.0, into=70002),  # into a catalogued object: wrong
               obj(80004, 70005, 2.0, "d", status="merged", ended=4.0, into=70005),  # its own catalogued body
               obj(80005, 1, 3.0, status="merged", ended=4.0, into=80001)]  # a duplicate into its body's first
    figures = bench.score(bodies, objects, 24.0 * H)
    assert [o["merged_wrongly"] for o in objects] == [False, True, True, False, False]
    assert figures["overall"]["acquired"] == 3 and figures["overall"]["merged_wrongly"] == 2
    assert {r["norad_id"]: r["merged_wrongly"] for r in figures["scored_bodies"]} == {1: False, 2: True, 3: True}


@pytest.mark.parametrize("share, clean, fates, verdicts", [
    (0.95, 0.95, {"survived": 0, "undecided": 0}, ("met", "met")),
    (0.5, 0.5, {"survived": 1, "undecided": 2}, ("not met", "not met")),
    (None, None, {"survived": 0, "undecided": 0}, (None, "met"))])
def test_target_verdicts(share, clean, fates, verdicts):
    group = {"observed": 10, "within_24h": {"share": share, "share_uncensored": clean}}
    out = bench.targets(group, fates)
    assert (out["leo_3_passes_within_24h"]["verdict"], out["no_false_object_surviving_24h"]["verdict"]) == verdicts
