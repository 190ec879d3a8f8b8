"""bench/correlation.py --tracking (bench/correlation_tracking.py): its arguments, and a tiny run's JSON."""

from __future__ import annotations

import json
import sys

import common
import pytest

from bench import correlation as bench

HAVE_CATALOGUE = all((common.CATALOG_DIR / f).is_file() for f in common.REFERENCE_FILES)


@pytest.mark.parametrize("argv, message", [
    (["--fit-hours", "6"], "--fit-hours only with --tracking"),
    (["--objects", "10", "--workers", "1"], "--objects, --workers only with --tracking"),
    (["--tracking", "--ages", "1,3"], "--tracking takes one age, not 2"),
    (["--tracking", "--compare-fixed"], "--compare-fixed is not a --tracking option"),
    (["--tracking", "--fit-hours", "0"], "expected hours in (0, 24]"),
    (["--tracking", "--fit-hours", "25"], "expected hours in (0, 24]"),
    (["--tracking", "--fit-hours", "six"], "'six' is not a number"),
    (["--tracking", "--objects", "0"], "expected at least 1"),
    (["--tracking", "--workers", "2.5"], "'2.5' is not a whole number"),
    (["--tracking", "--workers", "17"], "--workers 17: at most 16"),
    (["--subset", "random"], "--subset only with --tracking"),
    (["--tracking", "--subset", "all"], "argument --subset: invalid choice: 'all'"),
])
def test_bad_tracking_arguments_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.parse(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_tracking_defaults_and_the_plain_mode_unchanged():
    args = bench.parse(["--tracking"])
    assert (args.ages, args.objects, args.fit_hours, args.workers, args.subset) == ([1.0], 2000, 6.0, 2, "enriched")
    assert bench.parse(["--tracking", "--subset", "random"]).subset == "random"
    assert args.out.name == "correlation_tracking.json"
    plain = bench.parse([])
    assert plain.ages == [0.5, 1.0, 3.0, 7.0] and plain.out.name == "correlation.json" and plain.objects is None


def test_a_missing_catalogue_exits_2_with_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "CATALOG_DIR", tmp_path)
    with pytest.raises(SystemExit) as exc:
        bench.main(["--tracking", "--out", str(tmp_path / "x.json")])
    assert exc.value.code == 2
    assert "reference catalogue not found" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


@pytest.mark.skipif(not HAVE_CATALOGUE, reason="the reference catalogue ../shared/data/catalog is not there "
                                               "(a plain clone has no ../shared/data)")
def test_a_tiny_tracking_run_writes_its_figures_and_a_second_reuses_its_work(tmp_path, capsys):
    out = tmp_path / "tracking.json"
    argv = ["--tracking", "--objects", "4", "--fit-hours", "1.6", "--minutes", "2", "--workers", "1",
            "--work", str(tmp_path / "work"), "--out", str(out)]
    result = bench.main(argv)
    written = json.loads(out.read_text())
    assert written.pop("seed_role") == "development"  # seed 1 (bench/seeds.py); the file names its command too
    assert written.pop("command").endswith(" ".join(sys.argv[1:]))
    assert written == json.loads(json.dumps(result, default=str))
    assert "reusing" not in capsys.readouterr().out
    again = bench.main(argv)  # the simulation and the fit hours read back: the same figures
    assert capsys.readouterr().out.count("reusing") == 2
    for name in ("subset", "fit_hours_correlation"):
        assert again[name] == result[name]
    assert {k: v for k, v in again["tracking"].items() if k != "correlate_s"} == \
        {k: v for k, v in result["tracking"].items() if k != "correlate_s"}
    assert result["mode"] == "tracking" and result["objects"] == 4 and result["age_days"] == 1.0
    assert result["subset"]["observed"] == 4 and result["subset"]["geesat"] == [65119, 65123]
    assert result["subset"]["mode"] == "enriched" and result["target"]["right_pct"] == 99.7
    assert "numerical" in result["truth_model"]
    for name in ("catalogue", "tracking", "fit_hours_correlation"):
        figures = result[name]
        assert {"observations", "right_pct", "wrong_pct", "uct_pct", "ambiguous_pct", "held_ambiguous",
                "by_regime"} <= set(figures)
        assert figures["right_pct"] + figures["wrong_pct"] + figures["uct_pct"] == pytest.approx(100.0, abs=0.01)
    assert result["tracking"]["observations"] == result["catalogue"]["observations"] > 0
    fused = result["fused"]
    assert fused["used"] <= fused["converged"] <= fused["objects_fused"]
    assert {"fit_s", "predict_s", "arc_h"} <= set(fused) and fused["arc_h"] == 6.0
    assert set(result["gate_sigma"]["all"]) == {"objects", "fused", "fused_sigma_m", "catalogue_sigma_m_same",
                                               "catalogue_sigma_m_all"}
    assert isinstance(result["target"]["met"], bool)


@pytest.mark.skipif(not HAVE_CATALOGUE, reason="the reference catalogue ../shared/data/catalog is not there "
                                               "(a plain clone has no ../shared/data)")
def test_the_random_subset_puts_no_hard_case_first(tmp_path):
    import correlation_tracking as tracking

    from sda.orbit.catalog import latest_by_object, load_catalog

    entries = latest_by_object(load_catalog(common.reference_catalogue(tmp_path / "ref.tle"))[0])
    t = 1759622400.0  # 2025-10-05
    enriched, info = tracking.select_subset(entries, 40, 5, t)
    assert enriched[:2] == [65119, 65123] and info["special"] > 40 and info["mode"] == "enriched"
    random, info = tracking.select_subset(entries, 40, 5, t, "random")
    assert info["special"] == 0 and info["mode"] == "random" and len(set(random)) == 40
    assert random == tracking.select_subset(entries, 40, 5, t, "random")[0]  # the seed decides
    assert random != tracking.select_subset(entries, 40, 6, t, "random")[0]
    assert len(set(random) & set(tracking.KNOWN_CROSS_TAGS)) <= 1  # 40 of 13,407 at random


def test_a_docked_stack_is_observed_whole_whichever_of_its_numbers_the_sample_drew():
    import datetime as dt

    from correlation_tracking import whole_stacks

    from sda.orbit.catalog.tle import parse_tle_text
    from sda.orbit.screening.elements import tle_from_elements

    epoch = dt.datetime(2025, 10, 4, 12, tzinfo=dt.timezone.utc)
    text = ""
    for norad, alt in ((25544, 420.0), (49044, 420.0), (20580, 540.0)):  # 49044 docked at 25544: one element set
        line1, line2 = tle_from_elements(norad, epoch, alt, 0.0005, 51.6, 10.0, 20.0, 30.0)
        text += f"OBJ {norad}\n{line1}\n{line2}\n"
    entries, _ = parse_tle_text(text)
    assert sorted(e.norad_id for e in whole_stacks(entries, [49044])) == [25544, 49044]
    assert [e.norad_id for e in whole_stacks(entries, [20580])] == [20580]
