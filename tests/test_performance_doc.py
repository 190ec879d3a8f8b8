"""bench/report.py renders results files into docs/performance.md's tables (expected rows written out
by hand), and the committed page's generated blocks are well formed."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DOC = PROJECT_ROOT / "docs" / "performance.md"
HEADER = ["| figure | value | target | date | machine | command |", "|---|---|---|---|---|---|"]


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("bench_report", PROJECT_ROOT / "bench" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write(directory: Path, name: str, result: dict, day: str | None = None) -> Path:
    path = directory / f"{name}.json"
    path.write_text(json.dumps(result))
    if day:  # the file's modification time is the figures' date when the file has none
        stamp = int(__import__("datetime").datetime.fromisoformat(day + "T12:00:00+00:00").timestamp())
        os.utime(path, (stamp, stamp))
    return path


def test_screening_results_render_as_rows(report, tmp_path):
    write(tmp_path, "screening", {"command": "bench/screening.py", "screen_s": 31.754, "floor_s": 18.27,
                                  "ratio_to_floor": 1.74,
                                  "renew_fraction": 0.01, "incremental_run_s": 2.7, "incremental_ratio": 0.0851,
                                  "pairs_after_each_filter": {"events": 16883}, "cores": 2, "floor_cores": 1,
                                  "screen_runs_s": [33.7, 31.75]}, day="2026-11-24")
    table = report.tables(tmp_path)["screening"]
    cmd = "`.venv/bin/python bench/screening.py`"
    assert table.splitlines() == HEADER + [
        f"| full screening, 13,407 objects, 24 h at 5 km (`screen_s`) | 31.75 s |  | 2026-11-24 | 2 cores | {cmd} |",
        f"| bare SGP4 of the same grid on one core (`floor_s`) | 18.27 s |  | 2026-11-24 | 2 cores | {cmd} |",
        f"| `ratio_to_floor` | 1.74 | <= 2.0 | 2026-11-24 | 2 cores | {cmd} |",
        f"| element sets renewed before the incremental run (`--renew-fraction`) | 1.0% |  | 2026-11-24 | 2 cores "
        f"| {cmd} |",
        f"| incremental run, a minute later (`incremental_run_s`) | 2.70 s |  | 2026-11-24 | 2 cores | {cmd} |",
        f"| `incremental_ratio` (of `screen_s`) | 0.085 | <= 0.10 | 2026-11-24 | 2 cores | {cmd} |",
        f"| open events of the full screening | 16,883 |  | 2026-11-24 | 2 cores | {cmd} |",
    ]


def test_latency_uses_the_files_date_and_machine_and_skips_missing_figures(report, tmp_path):
    write(tmp_path, "latency", {"command": "bench/latency.py --files 10", "date": "2026-11-25",
                                "landing_to_silver_median_s": 13.64,
                                "landing_to_alert_median_s": 51.7, "landing_to_alert_p90_s": None,
                                "machine": {"cores": 2, "spark_master": "local[2] (default)"}})
    rows = report.tables(tmp_path)["latency"].splitlines()[2:]
    cmd = "`.venv/bin/python bench/latency.py --files 10`"
    assert rows == [
        f"| a landed file -> its rows in silver, median | 13.6 s |  | 2026-11-25 | 2 cores, local[2] (default) "
        f"| {cmd} |",
        f"| a landed file -> its conjunction's alert in gold, median | 51.7 s | <= 60 s | 2026-11-25 | "
        f"2 cores, local[2] (default) | {cmd} |",
    ]


def test_correlation_renders_each_age(report, tmp_path):
    age = {"right_pct": 99.8263, "wrong_pct": 0.0, "uct_pct": 0.1737, "held_ambiguous": 51,
           "wrong_pct_if_held_committed": 0.0841, "held_by_sensor": {"X": 3}}
    write(tmp_path, "correlation", {"date": "2026-11-25", "machine": "2 cores", "ages_days": [0.5], "0.5": age})
    rows = [r.split(" | ")[:3] for r in report.tables(tmp_path)["correlation"].splitlines()[2:]]
    assert rows == [["| right (element sets 0.5 d old)", "99.826 %", ">= 99.9 %"],
                    ["| wrong (element sets 0.5 d old)", "0.000 %", "<= 0.05 %"],
                    ["| uncorrelated (element sets 0.5 d old)", "0.174 %", ""],
                    ["| held cross-tags (element sets 0.5 d old)", "51", ""],
                    ["| wrong if the cross-tags were committed (element sets 0.5 d old)", "0.084 %", "<= 0.05 %"]]


def test_an_unknown_benchmark_gets_its_flat_numeric_fields(report, tmp_path):
    write(tmp_path, "newbench", {"command": "bench/newbench.py", "date": "2026-12-01", "a_s": 1.5, "n": 1200,
                                 "flag": True, "note": "x",
                                 "nested": {"b": 2.25, "deeper": {"c": 3}}, "runs": [1, 2], "machine": {"cores": 4}})
    write(tmp_path, "newbench-quick", {"a_s": 9})
    tables = report.tables(tmp_path)
    assert set(tables) == {"newbench"}
    cmd = "`.venv/bin/python bench/newbench.py`"
    assert tables["newbench"].splitlines()[2:] == [
        f"| `a_s` | 1.5 |  | 2026-12-01 | 4 cores | {cmd} |",
        f"| `n` | 1,200 |  | 2026-12-01 | 4 cores | {cmd} |",
        f"| `nested.b` | 2.25 |  | 2026-12-01 | 4 cores | {cmd} |",
        f"| `nested.deeper.c` | 3 |  | 2026-12-01 | 4 cores | {cmd} |",
    ]


def test_a_run_on_another_seed_gets_a_block_of_its_own_with_its_benchmarks_figures(report, tmp_path):
    """``<name>_seed<N>.json`` is rendered with ``<name>``'s figure list (not the flat fields), its seed's role
    from the registry (4 is held out, 13 a development seed)."""
    base = {"date": "2026-12-07", "machine": "2 cores", "incremental_small_s": 2.5, "ratio_large_small": 1.04}
    write(tmp_path, "incremental", {**base, "command": "bench/incremental.py --seed 13", "seed": 13})
    write(tmp_path, "incremental_seed4", {**base, "command": "bench/incremental.py --seed 4", "seed": 4})
    tables = report.tables(tmp_path)
    assert set(tables) == {"incremental", "incremental_seed4"}
    rows = [r.split(" | ")[:3] for r in tables["incremental_seed4"].splitlines()[2:]]
    assert rows == [["| micro-batch through normalize, dedup, correlate; bronze ~100,000 rows", "2.5 s", ""],
                    ["| `ratio_large_small`", "1.040", "<= 1.3"], ["| seed (held out, bench/seeds.py)", "4", ""]]
    assert tables["incremental"].splitlines()[-1].startswith("| seed (development, bench/seeds.py) | 13 |")


def test_acquisition_renders_its_targets_and_the_false_objects_fate(report, tmp_path):
    share = {"acquired": 2, "share": 0.5, "censored": 0, "share_uncensored": 0.5}
    write(tmp_path, "acquisition", {
        "command": "bench/acquisition.py", "date": "2026-12-07", "machine": "2 cores", "seed": 3,
        "targets": {"leo_3_passes_within_24h": {"bodies": 4, "share": 0.75},
                    "no_false_object_surviving_24h": {"surviving": 1, "undecided": 2}},
        "overall": {"observed": 5, "acquired": 4, "within_6h": share, "merged_wrongly": 0,
                    "delay_h": {"median": 1.25, "p90": 3.5}, "pos_err_km": {"median": 0.0862},
                    "lines_err_km": {"median": 2.3784}},
        "false_objects": {"false": 3, "by_outcome": {"duplicate": 2, "catalogued body": 1},
                          "fate_24h": {"merged": 2, "retired": 0}},
        "timing_s": {"acquire_per_step": {"median": 5.49}},
        "by_regime": {"MEO": {"share": 0.0}, "LEO": {"share": 1.0}}})
    rows = [r.split(" | ")[1:3] for r in report.tables(tmp_path)["acquisition"].splitlines()[2:]]
    assert rows == [["0.750", ">= 0.90"], ["4", ""], ["1", "0"], ["2", ""], ["5", ""], ["4", ""], ["0.500", ""],
                    ["1.25 h", ""], ["3.50 h", ""], ["0.086 km", ""], ["2.378 km", ""], ["0", ""], ["3", ""],
                    ["2", ""], ["1", ""], ["2", ""], ["0", ""], ["5.5 s", ""], ["1.000", ""], ["0.000", ""],
                    ["3", ""]]


def test_write_replaces_measured_blocks_keeps_the_others_and_appends_new_ones(report, tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text("# P\n\n<!-- bench:latency:start -->\nold latency\n<!-- bench:latency:end -->\n\n"
                   "<!-- bench:screening:start -->\nkept\n<!-- bench:screening:end -->\n\n"
                   "<!-- bench:accuracy:start -->\n<!-- bench:accuracy:end -->\n")
    results = tmp_path / "results"
    results.mkdir()
    write(results, "latency", {"date": "2026-11-25", "landing_to_alert_median_s": 50.0, "machine": {"cores": 2}})
    write(results, "extra", {"date": "2026-11-26", "x": 1})
    assert report.main(["--results", str(results), "--doc", str(doc), "--write"], out=lambda _: None) == 0
    text = doc.read_text()
    blocks = report.blocks(text)
    assert set(blocks) == {"latency", "screening", "accuracy", "extra"}
    assert "| 50.0 s | <= 60 s | 2026-11-25 |" in blocks["latency"] and "old latency" not in text
    assert blocks["screening"] == "kept\n"
    assert blocks["accuracy"] == report.NOT_MEASURED
    assert text.index("### extra") > text.index("bench:accuracy:end")


def test_committed_page_has_one_well_formed_block_per_benchmark(report):
    text = DOC.read_text()
    blocks = report.blocks(text)
    for name in report.SPECS:
        assert text.count(f"<!-- bench:{name}:start -->") == 1, name
        assert name in blocks, name
    for name, block in blocks.items():
        if block == report.NOT_MEASURED:
            continue
        lines = block.splitlines()
        assert lines[:2] == HEADER, name
        assert len(lines) > 2, name
        for row in lines[2:]:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
            assert len(cells) == 6, (name, row)
            assert cells[1], (name, row)  # a value
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", cells[3]), (name, row)
            assert re.fullmatch(r"`\.venv/bin/python bench/[\w-]+\.py[^`]*`", cells[5]), (name, row)



@pytest.mark.skipif(__import__("shutil").which("git") is None, reason="needs git")
def test_a_committed_results_file_without_a_date_is_dated_by_its_commit_not_its_checkout(report, tmp_path):
    """A fresh clone gives every file the clone's modification time: a committed, unchanged file takes its commit's
    day instead; once changed, its modification day again."""
    import subprocess

    day = "2026-11-02T12:00:00+00:00"
    env = {**os.environ, "GIT_AUTHOR_DATE": day, "GIT_COMMITTER_DATE": day, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}
    path = write(tmp_path, "latency", {"cores": 2}, day="2026-11-30")
    for argv in (["init", "-q"], ["add", path.name], ["commit", "-q", "-m", "results"]):
        subprocess.run(["git", *argv], cwd=tmp_path, env=env, check=True)
    assert report.result_date(path, {}) == "2026-11-02"
    write(tmp_path, "latency", {"cores": 4}, day="2026-11-30")
    assert report.result_date(path, {}) == "2026-11-30"
    assert report.result_date(path, {"date": "2026-10-01"}) == "2026-10-01"  # the file's own date first


def test_a_table_prints_the_command_its_results_file_records(report, tmp_path):
    write(tmp_path, "fusion_runs", {"date": "2026-11-28", "command": "bench/fusion_runs.py --hours 9 --seed 7",
                                    "renew_m": 500.0, "seed": 7})
    write(tmp_path, "latency", {"date": "2026-11-28", "landing_to_silver_median_s": 15.0})  # no command recorded
    tables = report.tables(tmp_path)
    rows = tables["fusion_runs"].splitlines()[2:]
    assert rows == [
        "| renewal threshold (`SDA_FUSION_RENEW_M`) | 500 m |  | 2026-11-28 | 2 cores | "
        "`.venv/bin/python bench/fusion_runs.py --hours 9 --seed 7` |",
        "| seed (development, bench/seeds.py) | 7 |  | 2026-11-28 | 2 cores | "
        "`.venv/bin/python bench/fusion_runs.py --hours 9 --seed 7` |"]
    assert tables["latency"].splitlines()[2].endswith(f"| {report.NO_COMMAND} |")


def test_every_committed_results_file_records_its_command_and_the_page_prints_it(report):
    """Issue 70, point 6: each results file says which command made it (the ones made before benchmarks recorded it
    say the command was reconstructed from their arguments), and each of the page's generated tables prints that."""
    blocks = report.blocks(DOC.read_text())
    results = report.RESULTS
    published = report.tables(results)
    assert published, "no results files"
    for name, table in published.items():
        assert blocks.get(name) == table, f"{name}: the page is not what bench/report.py --write makes of its file"
    for path in sorted(results.glob("*.json")):
        result = json.loads(path.read_text())
        assert re.fullmatch(r"bench/[\w-]+\.py( .+)?", result.get("command", "")), path.name
        if "seed" in result:
            assert result.get("seed_role") in ("development", "held out"), path.name
