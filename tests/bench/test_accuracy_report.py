"""bench/report.py renders bench/accuracy.py's results (bench/report_accuracy.py): one table per sky, the held-out
seed's, with the rows written out by hand for a small fabricated result."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from sda.sim.sky import SKIES

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("bench_report_accuracy_test", BENCH / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result(seed: int, role: str, date: str = "2026-12-01", sky: str = "harsh") -> dict:
    lead = {"objects": 40, "fused_median_m": 18.4, "fused_p90_m": 91.2, "catalogue_median_m": 2583.0, "ratio": 0.0071,
            "mean_d2": 3.412, "median_d2": 2.1, "inside95": 0.925}
    return {
        "command": f"bench/accuracy.py --sky {sky} --seed {seed} --objects 600",
        "sky": sky, "light_time": True, "seed": seed, "seed_role": role, "development_seeds": [1, 2, 3, 5, 7],
        "objects": 600,
        "hours": 6.0, "date": date,
        "position": {"circular_model_check": "circular: ...", "by_lead": {"24h": {"LEO": {
            "objects": 300, "total": {"median": 6487.2, "p90": 15545.0}, "along": {"median": 6464.0},
            "circular_model_check": {"mean_d2": 6.38, "median_d2": 2.0, "inside95": 0.754}}}}},
        "fused": {"regimes": {"LEO": {
            "2+ passes": {"objects": 40, "leads": {"0h": lead},
                          "hourly_test": {"objects": 40, "pass_share": 0.52, "p_values": [0.2] * 25}},
            "1 pass": {"objects": 0}}}},
        "alerts_cdm": {"both_fused": {"alerts": 30, "count": 29, "mean_d2": 5.1234, "median_d2": 2.9,
                                      "inside95": 0.8621, "test": {"n": 29, "p": 0.0123, "passes": False}}},
        "recall_under_1km": {"true": 6, "found": 5, "recall": 0.8333},
    }


def _write(directory: Path, name: str, result: dict) -> None:
    (directory / f"{name}.json").write_text(json.dumps(result))


def test_one_accuracy_table_with_the_new_figures(report, tmp_path):
    _write(tmp_path, "accuracy_harsh_seed11", _result(11, "held out"))
    tables = report.tables(tmp_path)
    assert set(tables) == {"accuracy-harsh"}
    rows = tables["accuracy-harsh"].splitlines()
    assert rows[:2] == ["| figure | value | target | date | machine | command |", "|---|---|---|---|---|---|"]
    cells = [[c.strip() for c in row.split("|")[1:4]] for row in rows[2:]]
    where = "LEO, 2+ passes, run end + 0h"
    cdm = "alert CDMs, both objects fused: relative position at TCA"
    assert cells == [
        ["seed (held out, bench/seeds.py)", "11", ""],
        ["catalogue objects", "600", ""],
        ["catalogue element sets: error, median (LEO, run end + 24h)", "6,487 m", ""],
        ["catalogue element sets: error, p90 (LEO, run end + 24h)", "15,545 m", ""],
        ["catalogue element sets: along-track error, median (LEO, run end + 24h)", "6,464 m", ""],
        ["fused objects scored (LEO, 2+ passes)", "40", ""],
        [f"fused error, median ({where})", "18 m", ""],
        [f"fused error, p90 ({where})", "91 m", ""],
        [f"catalogue error of the same objects, median ({where})", "2,583 m", ""],
        [f"fused / catalogue, medians ({where})", "0.007", "<= 0.10"],
        [f"fused covariance: mean d^2 ({where})", "3.41", "3"],
        [f"fused covariance: median d^2 ({where})", "2.10", "2.37"],
        [f"share inside the fused 95 % ellipsoid ({where})", "0.925", "0.90-0.99"],
        ["hourly chi-square(3) test, 0-24 h: share of the 25 hours passed (LEO, 2+ passes)", "0.52", "~0.95"],
        [f"{cdm}, CDMs scored", "29", ""],
        [f"{cdm}, mean d^2", "5.12", "3"],
        [f"{cdm}, median d^2", "2.90", "2.37"],
        [f"{cdm}, share inside the 95 % ellipsoid", "0.862", "0.90-0.99"],
        [f"{cdm}, chi-square(3) test p-value", "0.012", ">= 0.05"],
        ["recall of the true approaches under 1 km", "0.833", "1"],
        ["true approaches under 1 km in the horizon", "6", ""],
    ]
    commands = {row.split("|")[6].strip() for row in rows[2:]}
    assert commands == {"`.venv/bin/python bench/accuracy.py --sky harsh --seed 11 --objects 600`"}
    assert "circular" not in tables["accuracy-harsh"] and "6.38" not in tables["accuracy-harsh"]


def test_each_sky_gets_its_held_out_seed(report, tmp_path):
    _write(tmp_path, "accuracy_harsh_seed1", _result(1, "development", date="2026-12-09"))
    _write(tmp_path, "accuracy_harsh_seed11", _result(11, "held out", date="2026-12-01"))
    _write(tmp_path, "accuracy_harsh_seed6305", _result(6305, "held out", date="2026-12-05"))
    # held out when it was measured, a development seed since (bench/seeds.py): the registry decides, not the file
    _write(tmp_path, "accuracy_harsh_seed13", _result(13, "held out", date="2026-12-07"))
    _write(tmp_path, "accuracy_kind_seed1", _result(1, "development", sky="kind"))
    tables = report.tables(tmp_path)
    assert set(tables) == {"accuracy-harsh", "accuracy-kind"}
    assert "--sky harsh --seed 6305 --objects 600" in tables["accuracy-harsh"]
    assert "| seed (development, bench/seeds.py) | 1 |" in tables["accuracy-kind"]


def test_the_page_has_a_block_for_every_sky(report):
    assert set(report.ACCURACY_SKIES) == set(SKIES)
    text = report.DOC.read_text()
    for sky in SKIES:
        assert text.count(f"<!-- bench:accuracy-{sky}:start -->") == 1, sky


def test_with_no_accuracy_result_the_blocks_say_not_measured(report, tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text("# P\n\n<!-- bench:accuracy-harsh:start -->\n<!-- bench:accuracy-harsh:end -->\n")
    results = tmp_path / "results"
    results.mkdir()
    assert report.main(["--results", str(results), "--doc", str(doc), "--write"], out=lambda _: None) == 0
    assert report.blocks(doc.read_text()) == {"accuracy-harsh": report.NOT_MEASURED}



def test_the_alert_rules_and_the_pair_covariance_rows(report, tmp_path):
    result = {**_result(11, "held out"),
              "alerts": {"count": 40, "share_true_miss_over_5km": 0.075, "true_miss_over_5km": 3},
              "alerts_by_rule": {"miss_probability": {"alerts": 12, "true_miss_over_5km": 2},
                                 "miss_probability_only": {"alerts": 5}},
              "alerts_cdm": {"both_fused_sum": {"count": 29, "median_d2": 4.25}}}
    _write(tmp_path, "accuracy_harsh_seed11", result)
    cells = [[c.strip() for c in row.split("|")[1:4]] for row in report.tables(tmp_path)["accuracy-harsh"].splitlines()]
    rule = "alerts the rule miss_probability"
    summed = "alert CDMs, both objects fused, covariances summed without the shared density term"
    for expected in (["alerts: count", "40", ""], ["alerts: share truly farther than 5 km", "0.075", "<= 0.10"],
                     [f"{rule} fired for (P(miss < alert distance) >= its threshold)", "12", ""],
                     [f"{rule} alone fired for", "5", ""], [f"{rule} fired for, truly farther than 5 km", "2", ""],
                     [f"{summed}: relative position at TCA, median d^2", "4.25", "2.37"]):
        assert expected in cells
