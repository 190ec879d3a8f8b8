"""``sda``: the command line for everything a user does outside the Airflow UI.

    sda simulate --start ... --end ... [--inject-conjunction]   write simulated sensor files
    sda catalog generate --objects 300 --out FILE               an offline synthetic catalogue
    sda catalog fetch --group active --out FILE                 CelesTrak (needs network)
    sda stage --start ... --end ... catalog --celestrak active  fetch a CelesTrak group into gold catalog
    sda catalog check FILE                                      parse a TLE/OMM file, report rejects
    sda stage NAME --start ... --end ... [--run-id ...]          run one stage on the Spark Connect server
    sda server start|stop|status|restart|run|ready              the long-lived Spark Connect server (sda.lake.server)
    sda replay --start ... --end ... [--stages a,b] [--dry-run]  recompute stages for an event-time range
    sda trace ALERT_ID [--json]                                 an alert's lineage back to the landing files
    sda tables [--create]                                       the table registry (--create: create missing tables)
    sda status                                                  row counts of every table
    sda settings                                                the effective settings
    sda export omm|oem --out DIR [...]                          the catalogue as CCSDS OMM / OEM (sda.pipeline.export)
    sda score [--truth SUMMARY] [--json]                        alerts against the simulator's truth
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from sda.config.settings import PROJECT_ROOT, SettingsError, load_settings
from sda.pipeline.topology import stage_names

STAGES = stage_names()


def _cmd_simulate(argv: list[str]) -> int:
    from sda.sim import simulate

    return simulate.main(argv)


def _cmd_catalog(args: argparse.Namespace) -> int:
    from sda.orbit import catalog

    if args.action in ("generate", "fetch"):
        args.out = str(_confined_out(args.out))
    if args.action == "generate":
        from sda.orbit.catalog import synthetic

        if args.epoch:
            epoch = dt.datetime.fromisoformat(args.epoch.replace("Z", "+00:00"))
        else:
            epoch = dt.datetime.now(dt.timezone.utc)
        text = synthetic.generate_catalog(args.objects, epoch, args.seed)
        _write_text(args.out, text)
        print(f"wrote {args.objects} objects to {args.out}")
        return 0
    if args.action == "fetch":
        try:
            text = catalog.fetch_celestrak(args.group, "tle")
        except OSError as exc:  # the message names the URL
            print(f"sda catalog fetch: {exc}; use a local TLE/OMM file instead", file=sys.stderr)
            return 1
        _write_text(args.out, text)
        entries, rejected = catalog.parse_text(text)
        print(f"wrote {len(entries)} objects ({len(rejected)} rejected) to {args.out}")
        return 0
    entries, rejected = catalog.load_catalog(args.file)
    objects = len(catalog.latest_by_object(entries))
    print(f"{args.file}: {len(entries)} element sets, {objects} objects, {len(rejected)} rejected")
    for rej in rejected[:20]:
        print(f"  {rej.where}: {rej.reason}")
    return 0 if entries else 1


def _celestrak_group(text: str) -> str:
    from sda.orbit import catalog

    try:
        return catalog.check_celestrak_group(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _confined_out(out: str) -> Path:
    """``--out`` of ``catalog generate|fetch``: inside the catalogue directory (that of the settings'
    ``catalog_file``) or the landing zone, ``..`` and symlinks resolved (else UnsafePathError, exit 2)."""
    from sda.config.paths import confine

    settings = load_settings()
    return confine(out, [settings.catalog_file.parent, settings.landing], "--out")


def _write_text(path: str, text: str) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, out)


def _submit(stage: str, job_args: list[str]) -> int:
    """``python jobs/<stage>.py ...``: the job as a client of the Spark Connect server (``sda server``)."""
    return subprocess.call([sys.executable, str(PROJECT_ROOT / "jobs" / f"{stage}.py"), *job_args])


def _cmd_server(argv: list[str]) -> int:
    from sda.lake import server

    return server.main(argv)


def _manual_run_id(kind: str = "manual") -> str:
    return f"{kind}__{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}"


def _cmd_stage(args: argparse.Namespace) -> int:
    run_id = args.run_id or _manual_run_id()
    return _submit(args.name, ["--start", args.start, "--end", args.end, "--run-id", run_id, *args.extra])


def _cmd_replay(args: argparse.Namespace) -> int:
    from sda.pipeline import replay

    settings = load_settings()
    try:
        request = replay.plan(args.start, args.end, args.stages, args.dry_run, max_hours=settings.replay_max_hours)
    except replay.ReplayError as exc:
        print(f"sda replay: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(request.describe(settings.cadence_minutes), indent=2))
    if request.dry_run:
        print("dry run: nothing was recomputed")
        return 0
    run_id = args.run_id or _manual_run_id("replay")
    for stage in request.stages:
        print(f"sda replay: {stage} ...", flush=True)
        code = _submit(stage, request.job_args(stage, f"{run_id}.{stage}"))
        if code != 0:
            print(f"sda replay: {stage} failed with exit status {code}; later stages were not run", file=sys.stderr)
            return code
    print(f"sda replay: done ({', '.join(request.stages)}), run id {run_id}")
    return 0


def _cmd_tables(create: bool = False) -> int:
    from sda.lake.tables import TABLES, ensure_tables

    settings = load_settings()
    if create:  # what the first job of a fresh lakehouse would do, done ahead (make run, a deployment's init)
        from sda.lake.spark import SparkServerUnavailable, build_session

        try:
            ensure_tables(build_session("sda-tables", settings), settings)
        except SparkServerUnavailable as exc:
            print(f"sda tables --create: {exc}", file=sys.stderr)
            return 1
        print(f"sda tables: all {len(TABLES)} tables exist under {settings.lakehouse}")
        return 0
    for spec in TABLES.values():
        part = f" partitioned by {', '.join(spec.partition_by)}" if spec.partition_by else ""
        print(f"{spec.layer:7s} {spec.name:20s} {spec.path(settings)}{part}\n        {spec.description}")
    return 0


def _cmd_status() -> int:
    from sda.lake.spark import build_session
    from sda.lake.tables import TABLES

    settings = load_settings()
    spark = build_session("sda-status", settings)
    for spec in TABLES.values():
        path = Path(spec.path(settings))
        count = spark.read.format("delta").load(str(path)).count() if (path / "_delta_log").is_dir() else None
        print(f"{spec.layer:7s} {spec.name:20s} {'-' if count is None else count}")
    spark.stop()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sda", description="sda-fusion: space-domain-awareness sensor fusion")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("simulate", help="write simulated sensor files (see `sda simulate --help`)", add_help=False)
    cat = sub.add_parser("catalog", help="generate, fetch or check a catalogue")
    cat_sub = cat.add_subparsers(dest="action", required=True)
    gen = cat_sub.add_parser("generate", help="a synthetic catalogue with realistic shells (offline)")
    gen.add_argument("--objects", type=int, default=load_settings().sim_objects,
                     help="how many objects (default: the setting SDA_SIM_OBJECTS)")
    gen.add_argument("--epoch", help="ISO-8601 epoch (default now)")
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--out", default=str(load_settings().catalog_file),
                     help="catalogue file to write, in the catalog_file's directory or the landing zone")
    fetch = cat_sub.add_parser("fetch", help="download a CelesTrak GP group as TLE (needs network)")
    fetch.add_argument("--group", default="active", type=_celestrak_group,
                       help="CelesTrak GP group: letters, digits and '-' (default active)")
    fetch.add_argument("--out", default=str(load_settings().catalog_file),
                       help="catalogue file to write, in the catalog_file's directory or the landing zone")
    check = cat_sub.add_parser("check", help="parse a TLE/OMM file and report rejected records")
    check.add_argument("file")
    sub.add_parser("server", help="start, stop or check the Spark Connect server (see `sda server --help`)",
                   add_help=False)
    stage = sub.add_parser("stage", help="run one pipeline stage on the Spark Connect server")
    stage.add_argument("name", choices=STAGES)
    stage.add_argument("--start", required=True)
    stage.add_argument("--end", required=True)
    stage.add_argument("--run-id")
    # further job arguments (e.g. catalog --file X) are passed through: see main()
    rep = sub.add_parser("replay", help="recompute stages for an event-time range (see sda.pipeline.replay)")
    rep.add_argument("--start", required=True, help="range start, ISO-8601 (UTC if no offset)")
    rep.add_argument("--end", required=True, help="range end, ISO-8601 (exclusive)")
    rep.add_argument("--stages", default=None,
                     help="comma-separated, of normalize,dedup,correlate,fuse,acquire,conjunction (default: all six)")
    rep.add_argument("--dry-run", action="store_true", help="print the plan, recompute nothing")
    rep.add_argument("--run-id", help="lineage id (default replay__<UTC time>)")
    trace = sub.add_parser("trace",
                           help="lineage of an alert: the orbits it used (a fused orbit and the observations "
                                "fitted, or the catalogue's), observations, bronze rows, landing files")
    trace.add_argument("alert_id")
    trace.add_argument("--json", action="store_true", help="print JSON instead of text")
    trace.add_argument("--limit", type=int, default=20,
                       help="observations listed per object and per fused orbit (all are counted)")
    tabs = sub.add_parser("tables", help="list the table registry")
    tabs.add_argument("--create", action="store_true",
                      help="create the tables that do not exist yet (on the Spark Connect server), then exit")
    sub.add_parser("status", help="row counts of every table")
    sub.add_parser("settings", help="print the effective settings")
    from sda.pipeline import export

    export.add_parser(sub)
    from sda.sim import score_command

    score_command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["simulate"]:
            return _cmd_simulate(argv[1:])
        if argv[:1] == ["server"]:
            return _cmd_server(argv[1:])
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra and args.command != "stage":
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.extra = extra
        if args.command == "catalog":
            return _cmd_catalog(args)
        if args.command == "stage":
            return _cmd_stage(args)
        if args.command == "replay":
            return _cmd_replay(args)
        if args.command == "trace":
            from sda.pipeline import lineage

            return lineage.main(args)
        if args.command == "tables":
            return _cmd_tables(args.create)
        if args.command == "status":
            return _cmd_status()
        if args.command == "export":
            from sda.pipeline import export

            return export.main(args)
        if args.command == "score":
            from sda.sim import score_command

            return score_command.main(args)
        for key, value in sorted(load_settings().as_env().items()):
            print(f"{key}={value}")
        return 0
    except SettingsError as exc:
        print(f"sda: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
