"""A stage job's command line: the options every stage shares, their validation, and run ids.

Every job builds its parser with :func:`stage_parser` and adds its own options to it (in the job's
``parser()``), so each option, with its default, is declared in one place. :func:`validate_args`
turns the shared ones into what the stages use (aware UTC instants, a checked run id, ``replay``),
and :func:`with_defaults` gives a namespace built by hand (a test, a direct call of a stage's
``run``) the defaults of the options it leaves out, so a stage reads ``args.replay`` and never has
to guess whether it is there.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re

from sda.orbit.times import parse_utc

# A run id becomes part of file paths (Great Expectations' Data Docs directories): besides the
# character set, it may not start with '.' nor hold '..' (no '.', '..', hidden or parent directory).
RUN_ID_RE = re.compile(r"^(?!\.)(?!.*\.\.)[A-Za-z0-9_.:+\-]{1,200}\Z")
_RUN_ID_CHARS_RE = re.compile(r"^[A-Za-z0-9_.:+\-]{1,200}\Z")


class StageArgumentError(ValueError):
    """A job argument is unusable; the message says which and why."""


def parse_instant(name: str, text: str) -> dt.datetime:
    """An ISO-8601 instant -> aware UTC datetime; naive values are taken as UTC."""
    try:
        return parse_utc(text)
    except ValueError:
        raise StageArgumentError(
            f"--{name} {text!r}: expected an ISO-8601 time such as 2026-11-21T06:00:00Z"
        ) from None


def stage_parser(stage: str, description: str) -> argparse.ArgumentParser:
    """The options every stage takes (its data interval, the run id, replay); a job adds its own."""
    parser = argparse.ArgumentParser(prog=f"jobs/{stage}.py", description=description)
    parser.add_argument("--start", required=True, help="data interval start (ISO-8601, UTC)")
    parser.add_argument("--end", required=True, help="data interval end (ISO-8601, UTC)")
    parser.add_argument("--run-id", required=True, help="the orchestrator's run id (lineage)")
    parser.add_argument("--replay", action="store_true",
                        help="recompute the event-time range [--start, --end) from the upstream tables instead of "
                             "consuming their change feed; no progress is committed (sda.pipeline.replay)")
    parser.add_argument("--mode", choices=("incremental", "replay"), default="incremental",
                        help="the same as a flag, for orchestrators: --mode replay is --replay (a backfill run)")
    return parser


def with_defaults(args: argparse.Namespace, parser: argparse.ArgumentParser) -> argparse.Namespace:
    """``args``, given (in place) every option of ``parser`` it does not hold yet, at the parser's
    default. A parsed command line holds them all already; a namespace made by hand may not."""
    for action in parser._actions:
        if action.dest != argparse.SUPPRESS and action.default != argparse.SUPPRESS and not hasattr(args, action.dest):
            setattr(args, action.dest, action.default)
    return args


def validate_args(args: argparse.Namespace) -> argparse.Namespace:
    """The shared options checked and normalised in place: aware UTC ``start`` < ``end``, a safe
    ``run_id``, and ``replay`` true for ``--replay`` or ``--mode replay``."""
    with_defaults(args, stage_parser("stage", "the options every stage shares"))
    args.start = parse_instant("start", args.start)
    args.end = parse_instant("end", args.end)
    if args.end <= args.start:
        raise StageArgumentError(f"--end {args.end.isoformat()} is not after --start {args.start.isoformat()}")
    args.run_id = check_run_id(args.run_id)
    args.replay = bool(args.replay) or args.mode == "replay"
    return args


def check_run_id(run_id: str, what: str = "--run-id") -> str:
    """``run_id`` unchanged, or :class:`StageArgumentError` saying what is wrong with it. Airflow's
    ids (``manual__2026-11-21T10:00:00.123456+00:00``, ``scheduled__...``, ``backfill__...``) pass."""
    if not _RUN_ID_CHARS_RE.match(run_id):
        raise StageArgumentError(f"{what} {run_id!r}: use 1-200 characters from letters, digits and _ . : + -")
    if not RUN_ID_RE.match(run_id):
        raise StageArgumentError(
            f"{what} {run_id!r}: may not start with '.' nor contain '..' (run ids become directory names)"
        )
    return run_id
