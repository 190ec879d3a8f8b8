"""Throughput of the pipeline against the engine's floor: observations per second through normalize,
dedup and correlate on a day of sensor files, beside a bare copy of the same files into Delta in the
same run; peak memory of the Spark server and of the client at 1x and 4x input; and whether ingest's
cost per run stays flat as the landing zone grows (issue 15).

    .venv/bin/python bench/throughput.py [--hours 24] [--objects 2000] [--quick] [--skip-replay] [--skip-memory]
        [--skip-ingest-scan] [--scan-sizes 100,1000,10000] [--scan-new 20] [--driver-memory 2g] [--out FILE]

Everything is offline and runs on Spark Connect servers of the benchmark's own (a free port each,
``local[2]``, ``--driver-memory``, stopped at the end), on lakehouses under ``var/bench/throughput``:

1. *simulate* ``--hours`` x ``--objects`` with the simulator's usual disorder, in a child process
   (default 24 h x 2,000 objects: ~3.7 million records, 1.4 GB of files; ``--quick``: 20 min x 300);
2. *pipeline*, on a fresh server and a fresh lakehouse, in a child process of its own (its peak memory
   is the stages' alone): the catalogue load, then ingest, normalize, dedup and correlate, each timed
   (its ``main()``, as Airflow runs it), all the landed files as one incremental batch;
3. *replay* of the simulated range, in the same child: normalize, dedup and correlate with ``--replay``
   over [start - 5 min, end + 5 min) (:mod:`sda.pipeline.replay`), each timed;
4. *bare copy*, on the same server, warm by now: the same landed files read with Spark's own readers
   (radar JSON lines with the frame schema and ``explode`` of the detections, one row per detection;
   optical CSV with its header; ISL beacon lines as text), written to three Delta tables, counted;
5. *memory at 1x*: a quarter of the hours (same objects), simulated and run as in 2 on another fresh
   server; phase 2 is the 4x input (default 6 h and 24 h of 2,000 objects);
6. *ingest scan*: on the first server, a landing zone of one-beacon ISL files grown to 100, 1,000 and
   10,000 files (``--scan-sizes``); at each size ``--scan-runs`` (3; ``--quick`` 2) ingest runs, each
   after ``--scan-new`` (20) new files land, are timed (the median is reported): the ledger's
   (path, size, mtime) check should keep a run's cost to its new files.

The memory peaks, the CPU seconds and the layers' write times are read by ``bench/throughput_measure.py``.

Figures (the last line printed is one JSON object; the same JSON goes to ``--out``, by default
``bench/results/throughput.json``, or ``throughput-quick.json`` with ``--quick``):

* ``records``: records in the landed files (the simulator's truth rows: radar detections, optical
  rows, ISL beacons, malformed lines), ``observations``: distinct observations into correlate (the
  deduplicated silver observations; ``silver_observations`` is normalize's output);
* ``pipeline_obs_per_s`` = observations / (normalize + dedup + correlate seconds). Ingest (Python on
  the client: reads, hashes and checks every record) and the catalogue load are *not* in the
  denominator; ``stage_s`` reports them apart, ``ingest_records_per_s`` = records / ingest seconds;
* ``copy_rows_per_s`` = the bare copy's rows / its seconds (read, explode, write, count); ``ratio_to_copy``
  = pipeline_obs_per_s / copy_rows_per_s; ``targets`` (5,000 obs/s, 0.25) and ``targets_met``;
* ``memory``: ``{"1x": ..., "4x": ...}`` (4x: the main scenario of 2), each with ``server_peak_mb`` =
  the server JVM's VmHWM (``/proc/<pid>/status``, a process-lifetime peak, hence a fresh server per
  size; bounded by ``--driver-memory`` plus the JVM's off-heap), ``server_workers_peak_mb`` = the largest
  sum of its Python workers' proportional set size (Pss: a shared page split between its sharers),
  sampled every 0.5 s through the run (``server_workers``: the most alive at once;
  ``server_workers_peak_mb_by_stage``: the same while each stage ran), ``client_peak_mb`` =
  VmHWM of the child process that ran the stages (its ru_maxrss would include the parent's), all read
  after correlate; ``memory_after_replay``: the same after the replay;
* ``layer_writes``: per table the batch's stages write, one row per observation (silver ``observations``,
  ``observations_dedup``, gold ``correlated``), the seconds of its MERGEs (Delta's ``executionTimeMs``)
  and the rows they inserted: the writing no query plan removes, to set beside the bare copy;
* ``cpu_s``: per stage (and ``replay <stage>``) the CPU seconds, user + system, of the server's JVM
  (``jvm``), of its Python workers (``python``: the Arrow UDFs; each worker's as last sampled, every
  0.5 s, so one that ends between two samples loses at most that) and of the process that ran the
  stages (``client``), and ``cores_busy`` = their sum / the stage's seconds (2 at most here);
  ``copy_cpu_s``: the same for the bare copy; ``pipeline_cpu_us_per_obs`` and ``copy_cpu_us_per_row``:
  all of it per observation through normalize, dedup and correlate, and per row of the copy. Their
  quotient is the ratio the two would have if they kept the cores equally busy: how much more work an
  observation is than a copied row, whatever the scheduling;
* ``ingest_scan``: seconds per ingest run at each landing-zone size (``ingest_scan_runs``: every run).

How long: the default, 25 to 33 minutes on this idle 2-core machine (2026-11-25: simulation 3 min,
the 24-h batch 9 min, its replay 9 min, the 1x run 4 min); ``--quick --skip-replay --skip-memory`` about
5 minutes, fixed costs per stage (20-30 s idle) dominating (``--skip-memory``, ``--skip-replay`` and
``--skip-ingest-scan`` leave phases out).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime as dt
import multiprocessing
import os
import re
import shutil
import statistics
import time
from pathlib import Path

from common import RESULTS, WORK, elapsed_logger, free_port, iso_z, run_stage, stage_argv, write_result
from throughput_measure import WorkerPeak, cpu_used, layer_writes, memory_now

from sda.pipeline.topology import stages_between, stages_upto

UTC = dt.timezone.utc
SIM_START = dt.datetime(2026, 11, 20, 6, 0, tzinfo=UTC)
WHOLE_RANGE = ("2026-01-01T00:00:00Z", "2100-01-01T00:00:00Z")  # ingest takes every file
# the target is sensor files through silver to correlated observations: the stages up to correlate (the ones
# after it work per object: bench/fusion_runs.py, bench/screening.py); FLOW is what a replay recomputes of them
RUN = stages_upto("correlate")
FLOW = stages_between("normalize", "correlate")
TARGETS = {"pipeline_obs_per_s": 5000, "ratio_to_copy": 0.25}
KEPT = ("records_in", "records_out", "observations", "duplicates", "late", "quarantined", "files_seen", "files_new",
        "bronze_records", "correlated", "uncorrelated")
MAX_OBJECTS = 29900  # sda.orbit.catalog.synthetic's NORAD id range
# one clock for the parent and its spawned children (they re-import this module)
_T0 = float(os.environ.setdefault("THROUGHPUT_BENCH_T0", str(time.time())))
say = elapsed_logger(_T0)


def settings_for(root: Path, catalog: Path, port: int, driver_memory: str):
    from sda.config.settings import load_settings

    return load_settings(env={}, lakehouse=root / "lakehouse", landing=root / "landing", outbox=root / "outbox",
                         catalog_file=catalog, connect_port=port, driver_memory=driver_memory)


def in_child(fn, *args):
    """``fn(*args)`` in a fresh (spawned) Python process: its ru_maxrss is that work's alone."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


@contextlib.contextmanager
def own_server(settings):
    """A fresh Spark Connect server on ``settings.connect_port``, stopped when the block ends; yields its pid."""
    from sda.lake import server

    info = server.start(settings)
    try:
        if not info.get("started"):
            raise RuntimeError(f"something already answers on port {settings.connect_port}: not a server of ours")
        pid = server.read_pid(settings)
        say(f"Spark Connect server on port {settings.connect_port} (pid {pid}, {settings.spark_master}, "
            f"driver memory {settings.driver_memory}): up in {info['ready_s']} s, warm-up {info['warm_s']} s")
        yield pid
    finally:
        if info.get("started"):
            server.stop(settings)
            say(f"server on port {settings.connect_port} stopped")


# --- phases --------------------------------------------------------------------------------------

def sim_start(hours: float) -> dt.datetime:
    """The fixed start of incremental.py's scenarios, or earlier when the range would reach the present."""
    latest = dt.datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=hours + 2)
    return min(SIM_START, latest)


def simulate_into(root: Path, hours: float, objects: int, seed: int) -> dict:
    """The simulator's files in ``root/landing`` and its catalogue in ``root/catalog.tle`` (run in a child)."""
    from sda.sim.simulate import SimConfig, simulate

    start = sim_start(hours)
    t0 = time.perf_counter()
    sim = simulate(SimConfig(start=start, end=start + dt.timedelta(hours=hours), landing=root / "landing",
                             catalog_out=root / "catalog.tle", objects=objects, seed=seed))
    records = sum(sum(by_disorder.values()) for by_disorder in sim.counts.values())
    seconds = round(time.perf_counter() - t0, 1)
    say(f"simulated {hours:g} h x {objects:,} objects: {records:,} records in {len(sim.files):,} files ({seconds} s)")
    return {"start": start, "end": start + dt.timedelta(hours=hours), "hours": hours, "objects": objects,
            "records": records, "files": len(sim.files), "catalog": sim.catalog_file, "simulate_s": seconds}


def timed_stage(spark, settings, stage: str, run_id: str, interval=WHOLE_RANGE, extra=()) -> tuple[float, dict]:
    """One stage's ``main()`` on the shared session, with the DAG's arguments: (seconds, its main figures)."""
    t0 = time.perf_counter()
    metrics = run_stage(spark, settings, stage, stage_argv(stage, settings, run_id, *extra, interval=interval))
    return round(time.perf_counter() - t0, 2), {k: metrics[k] for k in KEPT if k in metrics}


def pipeline_run(settings, server_pid: int, label: str, replay_range: tuple | None) -> dict:
    """In a child process: catalogue, ingest, normalize, dedup and correlate over every landed file (one
    incremental batch), each timed; the memory peaks; then, with ``replay_range``, the replay of it."""
    from sda.lake.spark import connect

    spark = connect(settings)
    out: dict = {"stage_s": {}, "stages": {}, "replay_s": {}, "replay": {}, "cpu_s": {}}
    with WorkerPeak(server_pid) as workers:
        for stage in RUN:
            cpu = workers.cpu_seconds()
            out["stage_s"][stage], out["stages"][stage] = timed_stage(spark, settings, stage, f"{label}-run")
            out["cpu_s"][stage] = cpu_used(cpu, workers.cpu_seconds(), out["stage_s"][stage])
            workers.mark(stage)
            say(f"[{label}] {stage}: {out['stage_s'][stage]} s {out['stages'][stage]}, CPU s {out['cpu_s'][stage]}")
        out["memory"] = memory_now(server_pid, workers)
        say(f"[{label}] memory after correlate: {out['memory']}")
        out["layer_writes"] = layer_writes(settings)
        say(f"[{label}] the layers' writes: {out['layer_writes']}")
        if replay_range:
            interval = (iso_z(replay_range[0]), iso_z(replay_range[1]))
            for stage in FLOW:
                cpu = workers.cpu_seconds()
                out["replay_s"][stage], out["replay"][stage] = timed_stage(spark, settings, stage, f"{label}-replay",
                                                                           interval, ["--replay"])
                out["cpu_s"][f"replay {stage}"] = cpu_used(cpu, workers.cpu_seconds(), out["replay_s"][stage])
                workers.mark(f"replay {stage}")
                say(f"[{label}] replay {stage}: {out['replay_s'][stage]} s {out['replay'][stage]}")
            out["memory_after_replay"] = memory_now(server_pid, workers)
    spark.stop()
    return out


def bare_copy(spark, landing: Path, target: Path) -> dict:
    """The landed files into Delta with Spark's own readers: read, explode the radar frames' detections,
    write, count. The engine's floor for moving these bytes into tables."""
    from pyspark.sql import functions as F

    from sda.lake import wire_formats

    shutil.rmtree(target, ignore_errors=True)
    t0 = time.perf_counter()
    frames = {
        "radar": (spark.read.schema(wire_formats.RADAR_FRAME).option("pathGlobFilter", "*.jsonl")
                  .json(str(landing / "radar")).select("sensor", "frame", F.explode("dets").alias("det"))
                  .select("sensor", "frame", "det.*")),
        "optical": (spark.read.schema(wire_formats.OPTICAL_ROW).option("header", "true")
                    .option("pathGlobFilter", "*.csv").csv(str(landing / "optical"))),
        "isl": spark.read.option("pathGlobFilter", "*.bcn").text(str(landing / "isl")),
    }
    for kind, df in frames.items():
        df.write.format("delta").mode("overwrite").save(str(target / kind))
    rows = {kind: spark.read.format("delta").load(str(target / kind)).count() for kind in frames}
    seconds = round(time.perf_counter() - t0, 2)
    total = sum(rows.values())
    say(f"bare copy: {total:,} rows {rows} in {seconds} s = {total / seconds:,.0f} rows/s")
    return {"rows": total, "by_kind": rows, "seconds": seconds}


def template_beacon(landing: Path) -> str:
    """A valid ISL beacon line from the simulated files (the ingest scan's files are copies of it)."""
    from sda.transforms import wire

    for path in sorted((landing / "isl").glob("*.bcn")):
        for raw in path.read_bytes().splitlines():
            text = raw.decode(errors="replace")
            if wire.check_record("isl", text) is None:
                return text
    raise RuntimeError(f"no valid ISL beacon under {landing / 'isl'}")


def ingest_scan(spark, root: Path, beacon: str, port: int, driver_memory: str, sizes: list[int], new: int,
                runs: int) -> tuple[dict, dict]:
    """Ingest's seconds per run with ``new`` new files on a landing zone of each size (median of ``runs``)."""
    settings = settings_for(root, root / "catalog.tle", port, driver_memory)
    folder = settings.landing / "isl" / "scan"
    folder.mkdir(parents=True)
    landed = 0

    def grow(to: int) -> None:
        nonlocal landed
        while landed < to:  # one beacon a file, its sequence number made unique
            text = re.sub(r"\|seq=\d+", f"|seq={landed}", beacon, count=1)
            (folder / f"ISL-01_{landed:06d}.bcn").write_text(text + "\n")
            landed += 1

    medians, every = {}, {}
    for size in sizes:
        grow(size - new * runs)
        catch_up_s, caught = timed_stage(spark, settings, "ingest", f"scan-{size}-catch-up")
        times = []
        for k in range(runs):
            grow(landed + new)
            seconds, figures = timed_stage(spark, settings, "ingest", f"scan-{size}-{k}")
            if figures.get("files_new") != new or figures.get("files_seen") != landed:
                raise RuntimeError(f"ingest scan at {landed} files: expected {new} new of {landed}, got {figures}")
            times.append(seconds)
        medians[str(size)], every[str(size)] = round(statistics.median(times), 2), times
        say(f"ingest scan: {size:,} files landed, {new} new per run: {times} s "
            f"(catch-up of {caught.get('files_new', 0):,} files: {catch_up_s} s)")
    return medians, every


# --- the run ---------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small scenario (20 minutes x 300 objects): minutes")
    p.add_argument("--hours", type=float, help="simulated hours (default 24; --quick 1/3)")
    p.add_argument("--objects", type=int, help="simulated objects (default 2000; --quick 300)")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--driver-memory", default="2g", help="the servers' driver memory (the pipeline's default: 2g)")
    p.add_argument("--skip-replay", action="store_true", help="leave out the replay of the range")
    p.add_argument("--skip-memory", action="store_true", help="leave out the 1x memory run (a quarter of the hours)")
    p.add_argument("--skip-ingest-scan", action="store_true", help="leave out the ingest scan")
    p.add_argument("--scan-sizes", default="100,1000,10000", help="landing-zone sizes of the ingest scan")
    p.add_argument("--scan-new", type=int, default=20, help="new files per ingest run in the scan")
    p.add_argument("--scan-runs", type=int, help="timed ingest runs at each size (default 3; --quick 2)")
    p.add_argument("--work", type=Path, default=WORK / "throughput")
    p.add_argument("--out", type=Path, help="default bench/results/throughput.json (--quick: throughput-quick.json)")
    args = p.parse_args(argv)
    args.hours = args.hours or (1 / 3 if args.quick else 24.0)
    args.objects = args.objects or (300 if args.quick else 2000)
    args.scan_runs = args.scan_runs or (2 if args.quick else 3)
    args.out = args.out or RESULTS / f"throughput{'-quick' if args.quick else ''}.json"
    args.scan_sizes = sorted(int(s) for s in args.scan_sizes.split(","))
    if not 0 < args.hours <= 168:
        p.error(f"--hours {args.hours}: expected more than 0 and at most 168 (the simulator's 7 days)")
    if not 1 <= args.objects <= MAX_OBJECTS:
        p.error(f"--objects {args.objects}: expected 1..{MAX_OBJECTS} (sda.orbit.catalog.synthetic's NORAD id range)")
    step = args.scan_new * args.scan_runs
    if args.scan_new < 1 or args.scan_runs < 1 or any(b - a < step for a, b in zip([0] + args.scan_sizes,
                                                                                  args.scan_sizes)):
        p.error(f"--scan-sizes {args.scan_sizes}: sizes must grow by at least --scan-new x --scan-runs = {step}")
    return args


def rate(n: float, seconds: float) -> float | None:
    return round(n / seconds, 1) if seconds else None


def cpu_total(used: dict) -> float:
    """The CPU seconds of a :func:`throughput_measure.cpu_used` reading, JVM, workers and client together."""
    return sum(used[k] for k in ("jvm", "python", "client"))


def memory_entry(sim: dict, run: dict) -> dict:
    observations = run["stages"]["correlate"].get("observations", 0)
    return {"hours": round(sim["hours"], 3), "objects": sim["objects"], "records": sim["records"], **run["memory"],
            "observations": observations, "stage_s": run["stage_s"],
            "pipeline_obs_per_s": rate(observations, sum(run["stage_s"][s] for s in FLOW))}


def summarize(args, sim: dict, run: dict, copy: dict, scan, sim1: dict | None, run1: dict | None,
              settings) -> dict:
    """The figures of the main scenario (``sim``/``run``: the 4x input) and of the 1x memory run."""
    observations = run["stages"]["correlate"].get("observations", 0)
    pipeline_s = round(sum(run["stage_s"][s] for s in FLOW), 2)
    pipeline_rate = rate(observations, pipeline_s)
    copy_rate = rate(copy["rows"], copy["seconds"])
    ratio = round(pipeline_rate / copy_rate, 3) if pipeline_rate and copy_rate else None
    memory = {"1x": memory_entry(sim1, run1) if run1 else None, "4x": memory_entry(sim, run)}
    replay_s = run["replay_s"] or None
    pipeline_cpu = sum(cpu_total(run["cpu_s"][s]) for s in FLOW)
    return {
        "records": sim["records"], "observations": observations,
        "silver_observations": run["stages"]["normalize"].get("records_out"),
        "copy_rows": copy["rows"], "copy_s": copy["seconds"], "copy_rows_per_s": copy_rate,
        "pipeline_s": pipeline_s, "pipeline_obs_per_s": pipeline_rate, "ratio_to_copy": ratio,
        "stage_s": run["stage_s"], "ingest_records_per_s": rate(sim["records"], run["stage_s"]["ingest"]),
        "layer_writes": run["layer_writes"],
        "cpu_s": run["cpu_s"], "copy_cpu_s": copy["cpu_s"],
        "pipeline_cpu_us_per_obs": round(pipeline_cpu / observations * 1e6, 1) if observations else None,
        "copy_cpu_us_per_row": round(cpu_total(copy["cpu_s"]) / copy["rows"] * 1e6, 1) if copy["rows"] else None,
        "replay_s": replay_s,
        "replay_obs_per_s": rate(run["replay"]["correlate"].get("observations", 0), sum(replay_s.values()))
        if replay_s else None,
        "memory": memory, "memory_after_replay": run.get("memory_after_replay"),
        "ingest_scan": scan[0] if scan else None, "ingest_scan_runs": scan[1] if scan else None,
        "ingest_scan_new_files": None if scan is None else args.scan_new,
        "targets": TARGETS,
        "targets_met": {"pipeline_obs_per_s": bool(pipeline_rate and pipeline_rate >= TARGETS["pipeline_obs_per_s"]),
                        "ratio_to_copy": bool(ratio and ratio >= TARGETS["ratio_to_copy"])},
        "scenario": {"hours": round(sim["hours"], 3), "objects": sim["objects"], "start": iso_z(sim["start"]),
                     "files": sim["files"], "simulate_s": sim["simulate_s"], "quick": args.quick},
        "stages": run["stages"],
        "machine": {"cores": os.cpu_count(), "spark_master": settings.spark_master,
                    "driver_memory": settings.driver_memory, "shuffle_partitions": settings.shuffle_partitions},
        "wall_s": round(time.time() - _T0, 1),
    }


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    sim = in_child(simulate_into, args.work / "main", args.hours, args.objects, args.seed)
    settings = settings_for(args.work / "main", sim["catalog"], free_port(), args.driver_memory)
    replay_range = (sim["start"] - dt.timedelta(minutes=5), sim["end"] + dt.timedelta(minutes=5))
    scan = None
    with own_server(settings) as pid:
        run = in_child(pipeline_run, settings, pid, "main", None if args.skip_replay else replay_range)
        from sda.lake.spark import connect

        spark = connect(settings)
        with WorkerPeak(pid) as sampler:
            cpu = sampler.cpu_seconds()
            copy = bare_copy(spark, settings.landing, args.work / "copy")
            copy["cpu_s"] = cpu_used(cpu, sampler.cpu_seconds(), copy["seconds"])
        if not args.skip_ingest_scan:
            scan = ingest_scan(spark, args.work / "scan", template_beacon(settings.landing), settings.connect_port,
                               args.driver_memory, args.scan_sizes, args.scan_new, args.scan_runs)
        spark.stop()
    sim1 = run1 = None
    if not args.skip_memory:  # 1x: a quarter of the hours, on a fresh server (its VmHWM is a lifetime peak)
        sim1 = in_child(simulate_into, args.work / "quarter", args.hours / 4, args.objects, args.seed)
        settings1 = settings_for(args.work / "quarter", sim1["catalog"], free_port(), args.driver_memory)
        with own_server(settings1) as pid1:
            run1 = in_child(pipeline_run, settings1, pid1, "1x", None)
    result = summarize(args, sim, run, copy, scan, sim1, run1, settings)
    write_result(args.out, result, announce=say)
    return result


if __name__ == "__main__":
    main()
