"""The benchmarks' tables in docs/performance.md, from their results files.

    .venv/bin/python bench/report.py             # print the tables bench/results/*.json give
    .venv/bin/python bench/report.py --write     # and put them into docs/performance.md
    .venv/bin/python bench/report.py --results DIR --write   # from another directory of results

Every benchmark has one block in docs/performance.md, between ``<!-- bench:<name>:start -->`` and
``<!-- bench:<name>:end -->``: one table, ``figure | value | target | date | machine | command``.
``--write`` replaces the block of each benchmark whose results file exists (``<results>/<name>.json``)
and leaves the other blocks as they are: the figures measured last, as committed. A block with
neither says "not yet measured". The date is the file's ``date`` field when it has one, else the
day (UTC) of its last commit when it is committed unchanged (a checkout sets every file's modification time to
the checkout's), else its modification day; the machine is its ``machine`` (cores, Spark master) and this host's
core count otherwise.

The benchmarks :data:`SPECS` knows are rendered figure by figure; any other results file (a new
benchmark) gets a block of its own, appended to the page, of its numeric fields (nested objects
flattened to ``a.b.c``, lists and ``date``/``machine`` left out), as does a known one without a figure list.
``<name>_seed<N>.json`` (a benchmark run on another seed, e.g. a held-out one) has a block of its own with
``<name>``'s figures.
``*-quick.json`` files (smoke runs) are skipped.

bench/accuracy.py's results are one file per sky and seed, ``accuracy_<sky>_seed<N>.json``: each sky has one
block, ``accuracy-<sky>``, with the held-out seed's figures when there are any (bench/report_accuracy.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

PROJECT_ROOT = Path(__file__).resolve().parents[1]
if str(PROJECT_ROOT / "bench") not in sys.path:  # report_accuracy beside this file, when loaded by path
    sys.path.append(str(PROJECT_ROOT / "bench"))

import report_accuracy  # noqa: E402
import report_acquisition  # noqa: E402
import seeds  # noqa: E402
from result_dates import result_date  # noqa: E402

RESULTS = PROJECT_ROOT / "bench" / "results"
DOC = PROJECT_ROOT / "docs" / "performance.md"
HEADER = "| figure | value | target | date | machine | command |\n|---|---|---|---|---|---|\n"
NO_COMMAND = "not recorded in its results file: re-run the benchmark"
NOT_MEASURED = "Not yet measured: run the command above, then `.venv/bin/python bench/report.py --write`.\n"
MAX_GENERIC_ROWS = 40
SEEDED = re.compile(r"_seed\d+$")  # <benchmark>_seed<N>.json: the benchmark's run on another seed, a block of its own
ACCURACY_SKIES = ("harsh", "storm", "kind")  # sda.sim.sky.SKIES: one block each in the page

Row = tuple[str, tuple, str, str]  # label, path in the JSON (names, list indexes), format, target


def _ages(result: dict) -> list[str]:
    keys = [k for k in result if re.fullmatch(r"\d+(\.\d+)?", k) and isinstance(result[k], dict)]
    return sorted(keys, key=float)


def _correlation_rows(result: dict) -> list[Row]:
    rows: list[Row] = []
    for age in _ages(result):
        which = "exact catalogue" if float(age) == 0 else f"element sets {age} d old"
        rows += [
            (f"right ({which})", (age, "right_pct"), "{:.3f} %", ">= 99.9 %"),
            (f"wrong ({which})", (age, "wrong_pct"), "{:.3f} %", "<= 0.05 %"),
            (f"uncorrelated ({which})", (age, "uct_pct"), "{:.3f} %", ""),
            (f"held cross-tags ({which})", (age, "held_ambiguous"), "{:,}", ""),
            (f"wrong if the cross-tags were committed ({which})", (age, "wrong_pct_if_held_committed"),
             "{:.3f} %", "<= 0.05 %"),
        ]
    return rows


def _tracking_rows(result: dict) -> list[Row]:
    """bench/correlation.py --tracking: the scored window against fused orbits, beside element sets alone;
    per regime; the fit hours; the fused orbits and the gate's size."""
    fused, sets = "against fused orbits", "the same observations, element sets alone"
    target = (result.get("target") or {}).get("right_pct", 99.9)
    rows: list[Row] = [
        (f"right ({fused})", ("tracking", "right_pct"), "{:.3f} %", f">= {target:g} %"),
        (f"wrong ({fused})", ("tracking", "wrong_pct"), "{:.3f} %", "<= 0.05 %"),
        (f"uncorrelated ({fused})", ("tracking", "uct_pct"), "{:.3f} %", ""),
        (f"held cross-tags ({fused})", ("tracking", "held_ambiguous"), "{:,}", ""),
        (f"taken by the wider pass ({fused})", ("tracking", "wider_pass", "associated"), "{:,}", ""),
        (f"... of which right ({fused})", ("tracking", "wider_pass", "right"), "{:,}", ""),
        (f"right to another number of the observed docked stack ({fused})", ("tracking", "right_same_body"), "{:,}",
         ""),
        (f"right ({sets})", ("catalogue", "right_pct"), "{:.3f} %", ""),
        (f"wrong ({sets})", ("catalogue", "wrong_pct"), "{:.3f} %", ""),
        (f"held cross-tags ({sets})", ("catalogue", "held_ambiguous"), "{:,}", ""),
    ]
    for regime in sorted((result.get("tracking") or {}).get("by_regime") or {}):
        rows += [(f"right ({fused}, {regime})", ("tracking", "by_regime", regime, "right_pct"), "{:.3f} %", ""),
                 (f"wrong ({fused}, {regime})", ("tracking", "by_regime", regime, "wrong_pct"), "{:.3f} %", "")]
    return rows + [
        ("seed", ("seed",), "{}", ""),
        ("fit hours: right (element sets)", ("fit_hours_correlation", "right_pct"), "{:.3f} %", ""),
        ("fit hours: wrong (element sets)", ("fit_hours_correlation", "wrong_pct"), "{:.3f} %", ""),
        ("objects fused", ("fused", "objects_fused"), "{:,}", ""),
        ("fused orbits converged", ("fused", "converged"), "{:,}", ""),
        ("fused orbits used (converged, fitted over >= 90 min)", ("fused", "used"), "{:,}", ""),
        ("gate: 3-D position sigma of the fused objects, median", ("gate_sigma", "all", "fused_sigma_m"),
         "{:,.0f} m", ""),
        ("gate: the element sets' sigma for the same objects, median",
         ("gate_sigma", "all", "catalogue_sigma_m_same"), "{:,.0f} m", ""),
        ("fusing the orbits (wall, `--workers` processes)", ("fused", "fit_s"), "{:,.0f} s", ""),
    ]


def _service_disk_rows() -> list[tuple]:
    """bench/service_disk.py: each part's growth, its size after 24 h, and the level its retention holds it at."""
    rows: list[tuple] = [("minutes sampled beside a live `make run`", ("minutes_sampled",), "{:.0f} min", "")]
    for part, what, pruned in (("landing", "landed sensor files", True), ("truth", "the simulator's truth", True),
                               ("lakehouse", "the lakehouse", False), ("outbox", "the outbox", True),
                               ("task_logs", "Airflow's task logs", True),
                               ("airflow_other", "Airflow's database and own log", False)):
        rows += [(f"{what}: growth", ("parts", part, "mb_per_hour"), "{:.1f} MB/h", ""),
                 (f"{what}: after 24 h of running", ("parts", part, "after_24h_mb"), "{:,.0f} MB", "")]
        if pruned:
            rows.append((f"{what}: level under its retention", ("parts", part, "steady_mb"), "{:,.0f} MB", "bounded"))
    return rows + [("all of it after 24 h of running", ("total", "after_24h_mb"), "{:,.0f} MB", "")]


def _catalogue_rows(result: dict) -> list[Row]:
    """bench/catalogue_runs.py: per slice size the steady state, then the whole catalogue extrapolated."""
    rows: list[Row] = []
    for i, size in enumerate(result.get("sizes", [])):
        n = f"{size['objects']:,} observed"
        rows += [(f"{n}: a 15-minute run, all stages, median", ("sizes", i, "median_total_s"), "{:.1f} s", ""),
                 (f"{n}: a run once the window's fits pass 90 minutes (the last two)", ("sizes", i, "late_total_s"),
                  "{:.1f} s", ""),
                 (f"{n}: fuse stage, median", ("sizes", i, "median_stage_s", "fuse"), "{:.1f} s", ""),
                 (f"{n}: conjunction stage, median", ("sizes", i, "median_stage_s", "conjunction"), "{:.1f} s", ""),
                 (f"{n}: objects refitted per run, median", ("sizes", i, "median_fuse_objects"), "{:,.0f}", ""),
                 (f"{n}: element sets renewed per run, median", ("sizes", i, "median_renewed"), "{:,.0f}", ""),
                 (f"{n}: stages before the screening per observed object", ("sizes", i, "per_object_ms"),
                  "{:.1f} ms", ""),
                 (f"{n}: server JVM peak", ("sizes", i, "memory", "server_peak_mb"), "{:,.0f} MB", ""),
                 (f"{n}: the client's peak (the stages' driver code)", ("sizes", i, "memory", "client_peak_mb"),
                  "{:,.0f} MB", "")]
    return rows + [
        ("whole catalogue (13,407 observed), a 15-minute run extrapolated", ("extrapolated", "total_s"), "{:,.0f} s",
         "<= 600 s"),
        ("the same from the runs once the fits pass 90 minutes", ("extrapolated_late", "total_s"), "{:,.0f} s",
         "<= 600 s"),
        ("fuse stage at 13,407, extrapolated (median runs)", ("extrapolated", "stages", "fuse", "at_catalogue_s"),
         "{:.0f} s", ""),
        ("fuse stage per object, the straight line's slope", ("extrapolated", "stages", "fuse", "linear",
                                                              "per_object_ms"), "{:.1f} ms", ""),
        ("acquire stage at 13,407, extrapolated", ("extrapolated", "stages", "acquire", "at_catalogue_s"), "{:.0f} s",
         ""),
        ("conjunction stage at 13,407, extrapolated", ("extrapolated", "stages", "conjunction", "at_catalogue_s"),
         "{:.0f} s", ""),
        ("acquire stage's growth exponent", ("extrapolated", "stages", "acquire", "power_law", "exponent"), "{:.2f}",
         "<= 1.1"),
        ("the observation stages' growth exponent", ("extrapolated", "observing_exponent"), "{:.2f}", "<= 1.1")]


def _manoeuvres_rows(result: dict) -> list[Row]:
    """bench/manoeuvres.py: the targets, recall and precision overall and per regime, the association."""
    target = ("targets", "dv_ge_0.5_within_2_passes")
    realism = ("post_burn_realism", "post_burn", "next_pass")
    rows: list[Row] = [
        ("seed", ("seed",), "{}", ""),
        ("LEO burns >= 0.5 m/s followed by two passes: detected within two", ("targets",
         "leo_dv_ge_0.5_within_2_passes", "share"), "{:.3f}", ">= 0.95"),
        ("burns >= 0.5 m/s detected within two passes, every regime", (*target, "share"), "{:.3f}", ""),
        ("detections matching no burn, on burning objects", ("false_detections", "false_on_burning_objects"),
         "{}", ""),
        ("false detections per 1,000 quiet object-days", ("false_detections", "per_1000_object_days"), "{:.2f}",
         "<= 1"),
        ("... one-sided 95 % upper bound", ("false_detections", "upper95_per_1000_object_days"), "{:.2f}", ""),
        ("quiet object-days", ("false_detections", "object_days"), "{:,.1f}", ">= 2,000"),
        ("recall, all testable burns", ("overall", "recall"), "{:.3f}", ""),
        ("precision", ("overall", "precision"), "{:.3f}", ""),
        ("delay, median", ("overall", "delay_h", "median"), "{:.2f} h", ""),
        ("post-burn orbit: next pass's true error inside the 95 % ellipsoid", (*realism, "inside95"), "{:.2f}",
         "0.90-0.99"),
        ("... passes scored", (*realism, "count"), "{}", ""),
        ("tested windows without a detection: the same", ("post_burn_realism", "reference", "next_pass",
                                                           "inside95"), "{:.2f}", ""),
        ("unmatched detections after a post-burn prior (echoes)", ("post_burn_realism", "echoes", "unmatched",
                                                                     "after_post_burn_prior"), "{}", ""),
        ("observations correlated (the pipeline's association)", ("correlated",), "{:,}", ""),
        ("... to the wrong object", ("wrong",), "{:,}", ""),
        ("held gate misses fitted as candidate rows", ("candidates",), "{:,}", ""),
        ("... taken by re-association's wider pass", ("wider_pass",), "{:,}", ""),
    ]
    for regime in sorted(result.get("by_regime") or {}):
        rows.append((f"recall, {regime}", ("by_regime", regime, "recall"), "{:.3f}", ""))
    return rows


def _od_rows(result: dict) -> list[Row]:
    """Per regime: fits that converged, fit time, and the fused orbit against the catalogue's at the arc's
    end and 24 h later, with the fused covariance's realism."""
    rows: list[Row] = []
    for regime in sorted(result.get("regimes") or {}):
        base = ("regimes", regime)
        rows += [(f"{regime}: objects fitted", base + ("objects",), "{:,}", ""),
                 (f"{regime}: converged", base + ("status", "converged"), "{:,}", ""),
                 (f"{regime}: weighted residual RMS, median", base + ("rms_median",), "{:.3f}", "~1"),
                 (f"{regime}: fit time per object, median", base + ("fit_s", "median"), "{:.2f} s", "")]
        for lead in ("+0h", "+24h"):
            where = f"{regime}, arc end {lead[1:]}" if lead != "+0h" else f"{regime}, arc end"
            goal = "<= 0.10" if lead == "+0h" else "<= 0.33"
            rows += [
                (f"catalogue error, median ({where})", base + (lead, "catalogue_m", "median"), "{:,.0f} m", ""),
                (f"fused error, median ({where})", base + (lead, "fused_m", "median"), "{:,.0f} m", ""),
                (f"fused error, p90 ({where})", base + (lead, "fused_m", "p90"), "{:,.0f} m", ""),
                (f"fused / catalogue, medians ({where})", base + (lead, "ratio_of_medians"), "{:.3f}",
                 goal if regime == "LEO" else ""),
                (f"share inside the 95 % ellipsoid ({where})", base + (lead, "d2", "inside_95"), "{:.3f}",
                 "0.90-0.99" if regime == "LEO" else ""),
            ]
    return rows


SPECS: dict[str, dict[str, Any]] = {
    "screening": {
        "rows": [
            ("full screening, 13,407 objects, 24 h at 5 km (`screen_s`)", ("screen_s",), "{:.2f} s", ""),
            ("bare SGP4 of the same grid on one core (`floor_s`)", ("floor_s",), "{:.2f} s", ""),
            ("`ratio_to_floor`", ("ratio_to_floor",), "{:.2f}", "<= 2.0"),
            ("element sets renewed before the incremental run (`--renew-fraction`)", ("renew_fraction",),
             "{:.1%}", ""),
            ("incremental run, a minute later (`incremental_run_s`)", ("incremental_run_s",), "{:.2f} s", ""),
            ("`incremental_ratio` (of `screen_s`)", ("incremental_ratio",), "{:.3f}", "<= 0.10"),
            ("open events of the full screening", ("pairs_after_each_filter", "events"), "{:,}", ""),
        ],
    },
    "latency": {
        "rows": [
            ("a landed file -> its rows in silver, median", ("landing_to_silver_median_s",), "{:.1f} s", ""),
            ("a landed file -> its conjunction's alert in gold, median", ("landing_to_alert_median_s",),
             "{:.1f} s", "<= 60 s"),
            ("the same, p90", ("landing_to_alert_p90_s",), "{:.1f} s", "<= 120 s"),
            ("a run's duration, median", ("breakdown", "run_duration_s"), "{:.1f} s", ""),
        ],
    },
    "correlation": {"rows": _correlation_rows},
    "correlation_tracking": {"rows": _tracking_rows},
    "correlation_tracking_random": {"rows": _tracking_rows},
    "catalogue_runs": {"rows": _catalogue_rows},
    "manoeuvres": {"rows": _manoeuvres_rows},
    "manoeuvres_quiet": {"rows": _manoeuvres_rows},
    "manoeuvres_correlate": {"rows": _manoeuvres_rows},
    "acquisition": {"rows": report_acquisition.rows},
    "fusion_runs": {
        "rows": [
            ("renewal threshold (`SDA_FUSION_RENEW_M`)", ("renew_m",), "{:,.0f} m", ""),
            ("objects refitted per 15-minute run, median", ("median_fuse_objects",), "{:,.0f}", ""),
            ("fuse stage per run, median", ("median_fuse_s",), "{:.1f} s", ""),
            ("fuse stage per object refitted (wall, 2 cores)", ("fuse_s_per_object",), "{:.3f} s", ""),
            ("conjunction stage per run, median", ("median_conjunction_s",), "{:.1f} s", ""),
            ("(fuse + conjunction) per object refitted, median over runs", ("median_fuse_conjunction_s_per_object",),
             "{:.3f} s", "<= 0.05 s"),
            ("screening element sets renewed per run, median", ("median_renewed",), "{:,.0f}", ""),
            ("runs measured (after the first)", ("runs_measured",), "{:,}", ""),
            ("hours landed at once in the first run (`--warm-hours`)", ("warm_hours",), "{:g} h", ""),
            ("objects refitted per run / catalogue, median", ("median_fuse_share",), "{:.3f}", ""),
            ("renewed / catalogue per run, median", ("median_renew_fraction",), "{:.3f}", ""),
            ("renewed / catalogue per run, mean", ("mean_renew_fraction",), "{:.3f}", ""),
            ("renewed / catalogue per run, largest", ("max_renew_fraction",), "{:.3f}", ""),
        ],
    },
    "throughput": {
        "rows": [
            ("`pipeline_obs_per_s` (normalize + dedup + correlate, 24 h of 2,000 objects)",
             ("pipeline_obs_per_s",), "{:,.0f}", ">= 5,000"),
            ("`copy_rows_per_s` (bare copy of the same files into Delta)", ("copy_rows_per_s",), "{:,.0f}", ""),
            ("`ratio_to_copy`", ("ratio_to_copy",), "{:.3f}", ">= 0.25"),
            ("normalize", ("stage_s", "normalize"), "{:.1f} s", ""),
            ("dedup", ("stage_s", "dedup"), "{:.1f} s", ""),
            ("correlate", ("stage_s", "correlate"), "{:.1f} s", ""),
            ("ingest", ("stage_s", "ingest"), "{:.1f} s", ""),
            ("replay of the range (`replay_obs_per_s`)", ("replay_obs_per_s",), "{:,.0f}", ""),
            ("CPU per observation through the three stages", ("pipeline_cpu_us_per_obs",), "{:.1f} us", ""),
            ("CPU per row of the bare copy", ("copy_cpu_us_per_row",), "{:.1f} us", ""),
            ("server JVM peak, 24 h", ("memory", "4x", "server_peak_mb"), "{:,.0f} MB", "flat"),
            ("server JVM peak, 6 h", ("memory", "1x", "server_peak_mb"), "{:,.0f} MB", "flat"),
            ("server's Python workers, peak, 24 h", ("memory", "4x", "server_workers_peak_mb"), "{:,.0f} MB", "flat"),
            ("client peak, 24 h", ("memory", "4x", "client_peak_mb"), "{:,.0f} MB", "flat"),
            ("client peak, 6 h", ("memory", "1x", "client_peak_mb"), "{:,.0f} MB", "flat"),
            ("ingest per run, 20 new files, 100 landed", ("ingest_scan", "100"), "{:.2f} s", "flat"),
            ("ingest per run, 20 new files, 10,000 landed", ("ingest_scan", "10000"), "{:.2f} s", "flat"),
        ],
    },
    "incremental": {
        "rows": [
            ("micro-batch through normalize, dedup, correlate; bronze ~100,000 rows", ("incremental_small_s",),
             "{:.1f} s", ""),
            ("the same micro-batch; bronze >= 2,000,000 rows", ("incremental_large_s",), "{:.1f} s", ""),
            ("`ratio_large_small`", ("ratio_large_small",), "{:.3f}", "<= 1.3"),
            ("full recompute; bronze ~100,000 rows", ("full_small_s",), "{:.1f} s", ""),
        ],
    },
    "service_disk": {"rows": _service_disk_rows()},
    **{report_accuracy.BLOCK.format(sky=sky): {"rows": report_accuracy.rows} for sky in ACCURACY_SKIES},
    "od": {"rows": _od_rows},
}


def _get(result: dict, path: tuple) -> Any:
    for key in path:  # a name in an object, or an index in a list
        if isinstance(key, int) and isinstance(result, list) and -len(result) <= key < len(result):
            result = result[key]
        elif isinstance(result, dict) and key in result:
            result = result[key]
        else:
            return None
    return result


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def flat_numbers(result: dict, prefix: str = "") -> list[tuple[str, float]]:
    """The numeric fields of ``result``, nested objects as ``a.b.c`` (lists and text left out)."""
    out = []
    for key, value in result.items():
        name = f"{prefix}{key}"
        if _number(value):
            out.append((name, value))
        elif isinstance(value, dict):
            out.extend(flat_numbers(value, name + "."))
    return out


def _generic(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:.6g}"


def machine(result: dict) -> str:
    """"2 cores, local[2]" from a results file's ``machine`` (or ``cores``); this host's cores otherwise."""
    info = result.get("machine") if isinstance(result.get("machine"), dict) else {}
    if isinstance(result.get("machine"), str):
        return result["machine"]
    cores = info.get("cores") or result.get("cores") or result.get("cpu_count") or os.cpu_count()
    master = info.get("spark_master")
    return f"{cores} cores" + (f", {master}" if master else "")


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def seed_label(result: dict) -> str:
    """A table's seed row: the seed's role in bench/seeds.py now (a seed looked at since its run is a development
    seed's figure, whatever the file recorded then)."""
    return f"seed ({seeds.role(result.get('seed'))}, bench/seeds.py)"


def render(name: str, result: dict, date: str) -> str:
    """The table of one benchmark's results (header included)."""
    spec = SPECS.get(name) or SPECS.get(SEEDED.sub("", name), {})  # another seed's run: its benchmark's figures
    command = f"`.venv/bin/python {result['command']}`" if result.get("command") else NO_COMMAND
    rows = spec.get("rows")
    if callable(rows):
        rows = rows(result)
    if rows is not None and "seed" in result:  # the seed's role, from bench/seeds.py's registry
        rows = [(seed_label(result) if path == ("seed",) else label, path, fmt, target)
                for label, path, fmt, target in rows]
        if not any(path == ("seed",) for _, path, _, _ in rows):
            rows.append((seed_label(result), ("seed",), "{}", ""))
    lines = []
    if rows is None:
        fields = flat_numbers({k: v for k, v in result.items() if k not in ("date", "machine")})
        for key, value in fields[:MAX_GENERIC_ROWS]:
            lines.append((f"`{key}`", _generic(value), ""))
    else:
        for label, path, fmt, target in rows:
            value = _get(result, path)
            if _number(value):
                lines.append((label, fmt.format(value), target))
    where = machine(result)
    return HEADER + "".join(f"| {_cell(label)} | {_cell(value)} | {_cell(target)} | {date} | {_cell(where)} | "
                            f"{command} |\n" for label, value, target in lines)


def tables(results_dir: Path) -> dict[str, str]:
    """Block name -> its rendered table, for every results file in ``results_dir`` (the accuracy results: one
    per sky, :func:`report_accuracy.pick`)."""
    results, paths = {}, {}
    for path in sorted(results_dir.glob("*.json")):
        if path.stem.endswith("-quick"):
            continue
        result = json.loads(path.read_text())
        if isinstance(result, dict):
            results[path.stem], paths[path.stem] = result, path
    picked = report_accuracy.pick(results)
    chosen = {stem: block for block, (stem, _) in picked.items()}
    out = {}
    for stem, result in results.items():
        if report_accuracy.RESULT_NAME.fullmatch(stem) and stem not in chosen:
            continue
        name = chosen.get(stem, stem)
        out[name] = render(name, result, result_date(paths[stem], result))
    return out


def block_re(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- bench:{re.escape(name)}:start -->\n)(.*?)(<!-- bench:{re.escape(name)}:end -->)", re.S)


def blocks(text: str) -> dict[str, str]:
    """Benchmark name -> the content of its block in the page."""
    return {m.group(1): m.group(2) for m in
            re.finditer(r"<!-- bench:([\w-]+):start -->\n(.*?)<!-- bench:\1:end -->", text, re.S)}


def update(text: str, rendered: dict[str, str]) -> str:
    """``text`` with the blocks of ``rendered`` replaced (appended as a section when the page has none)
    and every empty block marked "not yet measured"."""
    for name, table in rendered.items():
        if block_re(name).search(text):
            text = block_re(name).sub(lambda m: m.group(1) + table + m.group(3), text)
        else:
            text = (text.rstrip("\n") + f"\n\n### {name}\n\n<!-- bench:{name}:start -->\n{table}"
                    f"<!-- bench:{name}:end -->\n")
    return re.sub(r"(<!-- bench:([\w-]+):start -->\n)(<!-- bench:\2:end -->)",
                  lambda m: m.group(1) + NOT_MEASURED + m.group(3), text)


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=RESULTS, help="directory of <benchmark>.json (bench/results)")
    p.add_argument("--doc", type=Path, default=DOC, help="the page to update (docs/performance.md)")
    p.add_argument("--write", action="store_true", help="update the page's blocks")
    args = p.parse_args(argv)
    rendered = tables(args.results) if args.results.is_dir() else {}
    for name, table in rendered.items():
        out(f"### {name}\n\n{table}")
    if not rendered:
        out(f"no results in {args.results}")
    if args.write:
        args.doc.write_text(update(args.doc.read_text(), rendered))
        out(f"updated {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
