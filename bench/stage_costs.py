"""Each stage's fixed cost, itemised: what one run of a stage pays besides its rows.

    .venv/bin/python bench/stage_costs.py [--objects 150] [--files 10] [--seed 7] [--sky harsh] [--work DIR]
                                          [--out FILE]

1. The simulator writes 30 minutes of sensor files over ``--objects`` generated objects (the sky ``--sky``, the
   injected pair). The files of the first 20 minutes land at once and every stage of the DAG runs on them, in DAG
   order (sda.pipeline.topology), on a Spark Connect server of the benchmark's own: the warm-up, which creates the
   tables and fills them.
2. *batch*: ``--files`` more files land (the next ones by time) and every stage runs again: the figures of a
   small micro-batch, the size the alert's path carries (bench/latency.py).
3. *nothing new*: every stage runs once more with nothing landed: what a run costs that has nothing to do.

For each stage and run, measured in this process (the stage runs in-process, as ``jobs/<stage>.py`` would, on one
session): wall seconds; the Spark plans it executed through the Spark Connect client (queries, commands, writes:
one gRPC ``ExecutePlan`` each) and the seconds spent waiting on them; schema and explain round trips
(``AnalyzePlan``: a DataFrame's ``columns`` or ``schema``); configuration round trips; the Delta commits it made
(new ``_delta_log/*.json`` files under the lakehouse); the client's own CPU seconds; and ``sites``, its eight costliest
round trips by the project line that made them (the innermost frame in ``include/`` or ``jobs/``; a write through
``sda.pipeline.sinks`` is charged to the line that called the sink). Python start-up and imports
are not in these figures (the stage runs in a warm process): bench/latency.py measures a task's start.

What it leaves out: the scheduler and the task's start (bench/latency.py), the quality gates (they are no stage of
the topology's), and any other client of the server.
The machine should be idle: every figure here is seconds of a shared two-core machine.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import os
import shutil
import sys
import time
from pathlib import Path

from common import RESULTS, WORK, command_line, elapsed_logger, free_port, land, run_stage, stage_argv, write_result

# Spark's static SQL settings this benchmark has been asked to try: set when the server starts, refused by a session
STATIC_SQL = frozenset({"spark.sql.codegen.cache.maxEntries", "spark.sql.extensions", "spark.sql.warehouse.dir"})
ROUND_TRIPS = {"_execute_and_fetch_as_iterator": "plans", "_analyze": "analyze", "config": "config"}


class RoundTrips:
    """Counts and times the round trips of ``client`` (a class: by default the Spark Connect client's), the calls of
    :data:`ROUND_TRIPS`, inside a ``with`` block (the class is as it was after it)."""

    def __init__(self, client=None) -> None:
        if client is None:
            from pyspark.sql.connect.client import core

            client = core.SparkConnectClient
        self.client, self.originals = client, {}
        self.calls: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
        # (round trip, the project line that made it) -> [count, seconds]: where a stage's round trips come from
        self.sites: dict[tuple[str, str], list] = collections.defaultdict(lambda: [0, 0.0])

    def __enter__(self) -> RoundTrips:
        for method, name in ROUND_TRIPS.items():
            self.originals[method] = getattr(self.client, method)
            setattr(self.client, method, self._timed(self.originals[method], name))
        return self

    def __exit__(self, *exc) -> None:
        for method, original in self.originals.items():
            setattr(self.client, method, original)

    def _timed(self, original, name: str):
        calls = self.calls

        def timed(client, *args, **kwargs):
            started = time.perf_counter()
            try:
                out = original(client, *args, **kwargs)
                return list(out) if name == "plans" else out  # an iterator's time is its consumer's
            finally:
                seconds = time.perf_counter() - started
                calls[name][0] += 1
                calls[name][1] += seconds
                site = self.sites[(name, _project_line())]
                site[0] += 1
                site[1] += seconds
        return timed

    def take_sites(self, top: int = 8) -> list[list]:
        """The ``top`` costliest (round trip, project line) pairs since the last call: [kind, line, count, s]."""
        rows = sorted(self.sites.items(), key=lambda kv: -kv[1][1])[:top]
        self.sites.clear()
        return [[kind, line, n, round(s, 3)] for (kind, line), (n, s) in rows]

    def take(self) -> dict[str, list]:
        out = {name: [n, round(s, 3)] for name, (n, s) in self.calls.items()}
        self.calls.clear()
        return out


_ROOT = Path(__file__).resolve().parents[1]
_PROJECT = (str(_ROOT / "include"), str(_ROOT / "jobs"))


def _project_line() -> str:
    """The innermost frame of the project's own code (include/, jobs/) on the stack: ``path:line function``."""
    import traceback

    for frame in reversed(traceback.extract_stack()[:-2]):
        if frame.filename.startswith(_PROJECT) and "/pipeline/sinks.py" not in frame.filename:
            return f"{Path(frame.filename).relative_to(_ROOT)}:{frame.lineno} {frame.name}"
    return "?"


def server_cpu_s(settings) -> float:
    """CPU seconds (user and system) of the Spark Connect server so far: every live process of its process group
    (the JVM and its Python workers; it starts in a session of its own), from ``/proc``; 0 where there is no
    ``/proc``. On a shared machine this, not the wall time, is what a stage takes from the other work."""
    from sda.lake import server

    pid, ticks, total = server.read_pid(settings), os.sysconf("SC_CLK_TCK"), 0
    if pid is None or not Path("/proc").is_dir():
        return 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a process that ended meanwhile
        if int(fields[2]) == pid:  # its process group (field 5 of proc(5), counted after the name)
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def commits(lakehouse: Path) -> int:
    return sum(1 for _ in lakehouse.rglob("_delta_log/*.json"))


def run_all(spark, settings, trips: RoundTrips, run_id: str, say) -> dict[str, dict]:
    """Every stage once, in DAG order: its figures."""
    from sda.pipeline.topology import stage_names

    out = {}
    for stage in stage_names():
        before, t0, cpu0 = commits(settings.lakehouse), time.perf_counter(), time.process_time()
        server0 = server_cpu_s(settings)
        run_stage(spark, settings, stage, stage_argv(stage, settings, run_id))
        wall = time.perf_counter() - t0
        calls = trips.take()
        out[stage] = {"wall_s": round(wall, 2), "client_cpu_s": round(time.process_time() - cpu0, 2),
                      "server_cpu_s": round(server_cpu_s(settings) - server0, 2),
                      "commits": commits(settings.lakehouse) - before,
                      **{f"{name}": calls.get(name, [0, 0.0])[0] for name in ROUND_TRIPS.values()},
                      **{f"{name}_s": calls.get(name, [0, 0.0])[1] for name in ROUND_TRIPS.values()}}
        out[stage]["sites"] = trips.take_sites()
        say(f"{run_id} {stage}: {out[stage]}")
    out["total"] = {key: round(sum(row[key] for row in out.values()), 2)
                    for key in next(iter(out.values())) if key != "sites"}
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/stage_costs.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--objects", type=int, default=150)
    p.add_argument("--files", type=int, default=10, help="files in the measured batch (default 10)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--sky", choices=("kind", "harsh", "storm"), default="harsh")
    p.add_argument("--work", type=Path, default=WORK / "stage_costs")
    p.add_argument("--out", type=Path, default=RESULTS / "stage_costs.json")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting to try, on the server and the session, over sda.lake.spark.session_conf's "
                        "(repeatable): to compare settings on the same work")
    args = p.parse_args(argv)
    bad = [c for c in args.conf if "=" not in c or not c.split("=", 1)[0].startswith("spark.")]
    if bad:
        p.error(f"--conf takes spark.KEY=VALUE, not {bad[0]!r}")
    if args.objects < 2 or args.files < 1:
        p.error("--objects must be 2 or more and --files 1 or more")
    return args


def _try_settings(extra: dict[str, str]) -> None:
    """``extra`` over the pipeline's Spark settings for the server this benchmark starts; the SQL ones
    (``spark.sql.*``, ``spark.databricks.*``) for its session too (a session cannot change the others, nor Spark's
    static SQL settings, e.g. ``spark.sql.codegen.cache.maxEntries``: those go to the server alone)."""
    if not extra:
        return
    from sda.lake import server
    from sda.lake import spark as spark_module

    sql = {k: v for k, v in extra.items() if k.startswith(("spark.sql.", "spark.databricks.")) and k not in STATIC_SQL}
    pipeline_session, pipeline_server = spark_module.session_conf, spark_module.server_conf
    spark_module.session_conf = lambda settings: {**pipeline_session(settings), **sql}
    spark_module.server_conf = lambda settings: {**pipeline_server(settings), **extra}
    server.server_conf = spark_module.server_conf  # the name sda.lake.server starts the server with


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    say = elapsed_logger(time.time())
    from sda.config.settings import load_settings
    from sda.lake import server
    from sda.lake.spark import connect
    from sda.sim.formats import file_time
    from sda.sim.simulate import SimConfig, simulate

    _try_settings(dict(c.split("=", 1) for c in args.conf))
    shutil.rmtree(args.work, ignore_errors=True)
    settings = load_settings(env={}, lakehouse=args.work / "lakehouse", landing=args.work / "landing",
                             outbox=args.work / "outbox", catalog_file=args.work / "catalog.tle",
                             connect_port=free_port(), shuffle_partitions=2)
    start = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.timezone.utc)
    staging = args.work / "staging"
    result = simulate(SimConfig(start=start, end=start + dt.timedelta(minutes=30), landing=staging,
                                catalog_out=settings.catalog_file, objects=args.objects, seed=args.seed, sky=args.sky,
                                inject_conjunction=True, tca=start + dt.timedelta(hours=1)))
    files = sorted((f for f in result.files), key=lambda f: (file_time(f), f))
    warm = [f for f in files if file_time(f) < start + dt.timedelta(minutes=20)]
    batch = [f for f in files if f not in set(warm)][: args.files]
    server.start(settings)
    try:
        spark = connect(settings)
        with RoundTrips() as trips:
            land(warm, staging, settings.landing)
            run_all(spark, settings, trips, "warm-up", say)
            land(batch, staging, settings.landing)
            measured = {"batch": run_all(spark, settings, trips, "batch", say),
                        "nothing_new": run_all(spark, settings, trips, "nothing-new", say)}
    finally:
        server.stop(settings)
    # the totals as top-level figures (docs/performance.md's generated block), each stage's row in a list (the page's
    # per-stage table is written from it)
    totals = {f"{run}_{key}": value for run, rows in measured.items() for key, value in rows.pop("total").items()}
    out = {"benchmark": "stage_costs", "date": dt.date.today().isoformat(),
           "command": command_line(["bench/stage_costs.py", *(sys.argv[1:] if argv is None else argv)]),
           "objects": args.objects, "seed": args.seed, "sky": args.sky, "files_in_batch": len(batch),
           "settings_tried": dict(c.split("=", 1) for c in args.conf),
           "warm_up_files": len(warm), **totals,
           "stages": [{"run": run, "stage": stage, **row}
                      for run, rows in measured.items() for stage, row in rows.items()],
           "leaves_out": "the task's start (Python start-up and imports, the Spark Connect session) and the "
                         "scheduler (bench/latency.py); the quality gates"}
    write_result(args.out, out, {"benchmark": "stage_costs", **totals}, announce=say)
    return out


if __name__ == "__main__":
    main()
