"""End-to-end latency under the real Airflow scheduler + LocalExecutor: a sensor file lands and a new
conjunction pair enters the catalogue -> how long until the file's observations are in silver and
the pair's alert is in gold, and where that time goes.

    .venv/bin/python bench/latency.py [--files 10] [--warm-up scenario|short] [--gap-s 30] [--cadence-minutes 15]
                                      [--timeout-s 1500] [--out FILE]

Everything lives under ``--work`` (default ``var/bench/latency``, wiped at the start): its own
AIRFLOW_HOME (SQLite, logs), lakehouse, landing, outbox and catalogue file, all passed as environment
variables (``scripts/airflow_env.sh`` is sourced with them preset), on a free API port (from 28080),
so nothing of ``make run``'s ``var/`` state is touched. The pipeline's Spark is a Spark Connect server
of the benchmark's own (``sda.lake.server``, on a free port from 25002), started before Airflow and stopped
at the end; every task is a client of it. Runs start from the landing watcher (``sda.orchestration.landing_watch``)
within seconds of a file landing; the cadence (default 15 minutes) is only the safety net.

1. *warm-up* (``--warm-up scenario``, the default): ``make run``'s first simulation (``bench/latency_sample.py``:
   its window of three hours or more, the harsher sky, element sets 0.5-3 days old, the injected pair), so that
   the warm-up run fuses the objects' orbits over several passes and the screening uses them; with ``--warm-up
   short``, a generated catalogue and 5 simulated minutes of sensors (nothing fused). The local Airflow starts
   (``sda.orchestration.local_stack``, as ``make run``; own process group, stopped at the end even on error)
   with ``SDA_CADENCE_MINUTES=--cadence-minutes``; ``sda_pipeline`` is unpaused and the scheduler's first run
   processes the warm-up files. Measuring starts once that run has succeeded. ``--timeout-s`` bounds that
   warm-up, and then each file's wait for silver and gold.
2. *per file* i (after a random pause of 0..``--gap-s``, so landings fall at different moments of the
   run before theirs): the sensors' files -- with ``scenario``, the whole 5-minute chunks of the same sky passed
   since the last sample, observed on the continued true orbits (:mod:`sda.sim.feed`; the sample first waits
   for the next chunk to pass, so samples are at least 5 minutes apart, as make run's sensors deliver); with
   ``short``, 3 simulated minutes ending now -- are staged and a conjunction pair is designed
   (:func:`sda.sim.conjunction.design_conjunction`, TCA now + 2 h, miss 150 m, renumbered to NORAD 99801+2i /
   99802+2i with correct TLE checksums); then, at ``t0``, the files get mtime ``t0`` and are moved into
   ``<landing>/<kind>/bench-<i>/`` with ``os.replace`` (a directory of their own: simulator file names repeat
   within a 5-minute chunk), and the catalogue file is replaced by itself + the pair (``os.replace`` too, so
   ``catalog`` never reads half a TLE).
3. the Delta logs of ``silver.observations``, ``gold.alerts``, ``ops.ingested_files`` and
   ``ops.run_metrics`` are tailed (new ``_delta_log/*.json`` commits; the parquet files they add are
   read with pyarrow, no JVM in this process): ``landing_to_silver_s`` = commit time of the first
   silver rows whose ``source_file`` is a landed file - t0; ``landing_to_alert_s`` = commit time of
   the first alert row for the pair - t0.
4. *breakdown*, from the REST API (``/api/v2``, bearer token from ``/auth/token``) for the run that
   ingested the files (``ops.ingested_files.run_id``), once it has ended:

   * ``scheduler_delay_s`` = run start - t0 = ``sched_behind_active_run_s`` (the part of it during
     which another run of the DAG was running: ``max_active_runs=1``, and the run under way at t0 has a
     data interval ending before t0, so its ingest cannot take the file) + ``sched_cadence_wait_s`` (the part of t0 ->
     run_after during which no run was active: waiting for the next cadence tick) + ``sched_queue_s``
     (the rest: run creation and queued -> running);
   * per task: ``task_duration_s`` (Airflow start -> end), ``spark_work_s`` = ``ops.run_metrics.seconds``
     (the job's own time: Spark session creation, table checks and the stage's work),
     ``client_s`` = duration - work (Airflow task start-up, the client's Python imports and Spark
     Connect session, the run_metrics / progress commits after the work); ``task_gap_s`` = time between a
     task's start and the end of the task before it (the scheduler between tasks).

The alert may come from an earlier run than the file: a run already under way at t0 whose
``catalog`` task had not started yet reads the new catalogue (``alert_run`` in the sample).

Prints progress lines and, last, one JSON line (medians over the files, plus every sample); the same
JSON goes to ``--out`` (default ``bench/results/latency.json``).

This file is the command line and the report; the stack it starts is ``bench/latency_stack.py``, the
measurement of the warm-up and of each file ``bench/latency_measure.py``, what a sample lands
``bench/latency_sample.py``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import signal
import statistics
import sys
from pathlib import Path

from common import RESULTS, WORK, write_result
from latency_measure import Lake, measure_one, warm_up
from latency_sample import FIRST_PAIR_ID, MAX_FILES, WARMUP_MINUTES, simulate_into, warm_sky
from latency_stack import (
    DAG_ID,
    LOCATION_SETTINGS,
    UTC,
    Airflow,
    BenchError,
    Progress,
    bench_env,
    r2,
    say,
)

MARKER = ".sda-bench-latency"  # marks --work as this benchmark's scratch directory (safe to wipe)


def median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def summarize(samples: list[dict]) -> dict:
    runs = [s["pickup_run"] for s in samples]
    task_names = [name for name in dict.fromkeys(n for r in runs for n in r["tasks"])]

    def per_task(key: str) -> dict:
        out = {name: median([r["tasks"].get(name, {}).get(key) for r in runs]) for name in task_names}
        out["total"] = median([r[f"{key}_total"] for r in runs])
        return out

    return {
        "scheduler_delay_s": median([r["scheduler_delay_s"] for r in runs]),
        "sched_behind_active_run_s": median([r["sched_behind_active_run_s"] for r in runs]),
        "sched_cadence_wait_s": median([r["sched_cadence_wait_s"] for r in runs]),
        "sched_queue_s": median([r["sched_queue_s"] for r in runs]),
        "task_start_s": per_task("task_gap_s"),
        "client_s": per_task("client_s"),
        "server_work_s": per_task("spark_work_s"),
        "task_duration_s": per_task("task_duration_s"),
        "run_duration_s": median([r["run_duration_s"] for r in runs]),
        "alerts_from_run_active_at_t0": sum(1 for s in samples if not s["alert_from_pickup_run"]),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, checked (an unusable value or a --work that is not ours stops here)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=10,
                   help=f"files (and conjunction pairs) to land one after the other (1..{MAX_FILES}; default 10)")
    p.add_argument("--gap-s", type=float, default=30.0, help="longest random pause before each landing (default 30 s)")
    p.add_argument("--cadence-minutes", type=int, default=15,
                   help="SDA_CADENCE_MINUTES of the DAG under test, the safety net behind the landing watcher "
                        "(default 15)")
    p.add_argument("--timeout-s", type=float, default=1500.0,
                   help="limit for the warm-up and for each file to reach silver and gold (default 1500)")
    p.add_argument("--warm-up", choices=("scenario", "short"), default="scenario",
                   help="scenario (default): make run's first simulation (3 h or more, the harsher sky), so the "
                        "fused orbits are in use, and each sample the next 5-minute chunk of that sky; short: 5 "
                        "minutes of a generated catalogue, and 3 minutes of a new simulation per sample (nothing "
                        "fused)")
    p.add_argument("--seed", type=int, default=1, help="seed of the random landing phases (default 1)")
    p.add_argument("--work", type=Path, default=WORK / "latency",
                   help="working directory, wiped at the start (default var/bench/latency)")
    p.add_argument("--out", type=Path, default=RESULTS / "latency.json")
    args = p.parse_args(argv)
    if args.files < 1:
        p.error(f"--files {args.files}: at least 1 file is needed to measure anything")
    if args.files > MAX_FILES:
        p.error(f"--files {args.files}: at most {MAX_FILES} "
                f"(each file gets its own NORAD ids {FIRST_PAIR_ID}+2i/+2i+1 below 99900)")
    if args.cadence_minutes < 1:
        p.error(f"--cadence-minutes {args.cadence_minutes}: the DAG's cadence must be at least 1 minute")
    if not args.gap_s >= 0:
        p.error(f"--gap-s {args.gap_s}: expected a number of seconds >= 0")
    if not args.timeout_s > 0:
        p.error(f"--timeout-s {args.timeout_s}: expected a positive number of seconds")
    args.work = args.work.resolve()
    if args.work.is_dir() and any(args.work.iterdir()) and not (args.work / MARKER).is_file():
        p.error(f"--work {args.work}: not empty and not a previous latency-benchmark directory; refusing to wipe it")
    return args


def prepare_work(work: Path, cadence_minutes: int) -> tuple[dict[str, str], dict[str, Path]]:
    """``work`` wiped and marked, the benchmark's environment (also set in this process, so its simulator
    calls and settings see the same SDA_* locations) and its directories."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / MARKER).write_text("scratch directory of bench/latency.py; wiped on every run\n")
    env = bench_env(work, cadence_minutes)
    # this process's simulator calls and settings see the same SDA_* locations
    for key in LOCATION_SETTINGS:
        os.environ[key] = env[key]
    dirs = {"landing": Path(env["SDA_LANDING"]), "catalog": Path(env["SDA_CATALOG_FILE"]),
            "base_catalog": work / "catalog" / "base.tle", "staging": work / "staging"}
    for d in ("landing", "staging"):
        dirs[d].mkdir(parents=True, exist_ok=True)
    return env, dirs


def run_stack(args: argparse.Namespace, env: dict[str, str], work: Path, dirs: dict[str, Path],
              warm_files: list[str]) -> list[dict]:
    """Start the Spark Connect server and Airflow, warm up, measure every file; stop both even on error."""
    from sda.config.settings import load_settings
    from sda.lake import server

    lake = Lake(Path(env["SDA_LAKEHOUSE"]))
    spark_settings = load_settings(env={k: v for k, v in env.items() if k.startswith("SDA_")})
    airflow = Airflow(env, work / "airflow.log")
    progress = Progress(airflow)
    samples: list[dict] = []
    try:
        started = server.start(spark_settings)
        say(f"Spark Connect server at {spark_settings.connect_url}: {json.dumps(started)}")
        airflow.start()
        airflow.wait_ready()
        airflow.set_paused(False)
        say(f"unpaused {DAG_ID} (cadence {args.cadence_minutes} min): the scheduler now creates the runs")
        warm_up(airflow, lake, warm_files, args.timeout_s, progress)
        rng = random.Random(args.seed)
        for i in range(args.files):
            samples.append(measure_one(i, airflow, lake, args, dirs, rng, progress))
    finally:
        if airflow.alive() and airflow.token:
            try:
                airflow.set_paused(True)
            except Exception:
                pass
        airflow.stop()
        server.stop(spark_settings)
    return samples


def report(args: argparse.Namespace, env: dict[str, str], samples: list[dict]) -> dict:
    """The result: medians over the files, the breakdown, every sample and the machine; written to
    ``--out`` and printed as the last line."""
    alerts = sorted(s["landing_to_alert_s"] for s in samples)
    p90_index = min(len(alerts) - 1, max(0, -(-9 * len(alerts) // 10) - 1))
    result = {
        "files": len(samples),
        "landing_to_silver_median_s": median([s["landing_to_silver_s"] for s in samples]),
        "landing_to_alert_median_s": median(alerts),
        "landing_to_alert_p90_s": r2(alerts[p90_index]) if alerts else None,
        "cadence_minutes": args.cadence_minutes, "warm_up": args.warm_up,
        "breakdown": summarize(samples),
        "samples": samples,
        "machine": {"cores": os.cpu_count(), "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
                    "spark_master": env.get("SDA_SPARK_MASTER", "local[2] (default)"),
                    "parallelism": env.get("AIRFLOW__CORE__PARALLELISM")},
    }
    write_result(args.out, result, announce=say)
    return result


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    env, dirs = prepare_work(args.work, args.cadence_minutes)

    now = dt.datetime.now(UTC).replace(microsecond=0)
    if args.warm_up == "scenario":
        warm = warm_sky(dirs["landing"], dirs["catalog"])
    else:
        warm = simulate_into(dirs["landing"], now - dt.timedelta(minutes=WARMUP_MINUTES), now, seed=1, catalog=None,
                             catalog_out=dirs["catalog"])
    shutil.copy2(dirs["catalog"], dirs["base_catalog"])  # what the sensors observe in every sample
    say(f"warm-up data: catalogue {dirs['catalog']}, {len(warm.files)} files in {dirs['landing']}")

    samples = run_stack(args, env, args.work, dirs, warm.files)
    return report(args, env, samples)


if __name__ == "__main__":
    try:
        main()
    except BenchError as exc:
        print(f"latency.py: {exc}", file=sys.stderr)
        sys.exit(1)
