"""What the benchmarks share: where things are, progress lines, time stamps, argument types, running a
stage as the DAG runs it, the reference catalogue, summary figures and the results file.

``bench/`` is not a package: ``python bench/<name>.py`` puts this directory first on ``sys.path``, so a
benchmark imports ``from common import ...`` (and its sibling modules the same way); importing this module
puts the project root (for ``jobs.*``) and ``include/`` on ``sys.path`` as well. The tests put this directory
on ``sys.path`` (tests/bench/conftest.py). Time conversions are :mod:`sda.orbit.times`'; stage lists come
from :mod:`sda.pipeline.topology`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import math
import sys
import time
from collections.abc import Iterable
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# jobs.* (the stages' main functions), and sda.* without the editable install
for _path in (PROJECT_ROOT / "include", PROJECT_ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

RESULTS = PROJECT_ROOT / "bench" / "results"  # <name>.json per benchmark (bench/report.py renders them)
WORK = PROJECT_ROOT / "var" / "bench"  # scratch directories
# the CelesTrak snapshot that ships with ../shared/data beside the project (bench/correlation.py, screening.py)
CATALOG_DIR = PROJECT_ROOT.parent / "shared" / "data" / "catalog"
REFERENCE_FILES = ("celestrak_active_2025-10.tle", "celestrak_cosmos2251_debris_2025-10.tle")
ALL_TIME = ("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z")  # a stage's --start/--end that takes everything
CHI2_3_95 = 7.815  # d^2 of a 3-D Gaussian's 95 % ellipsoid


# --- progress -----------------------------------------------------------------------------------------------

def free_port() -> int:
    """A free TCP port on 127.0.0.1 (a benchmark's own Spark Connect server: runs side by side do not share one)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log(msg: str) -> None:
    """A progress line, stamped with the wall-clock time."""
    print(f"[{dt.datetime.now():%H:%M:%S}] {msg}", flush=True)


def elapsed_logger(t0: float, clock=time.time):
    """A progress-line function stamped with the seconds since ``t0`` on ``clock``."""
    def say(msg: str) -> None:
        print(f"[{clock() - t0:6.0f}s] {msg}", flush=True)
    return say


# --- time stamps (the conversions are sda.orbit.times') -----------------------------------------------------

def short_utc(t: float, seconds: bool = False) -> str:
    """Unix seconds -> ``MM-DDTHH:MM`` (``:SS`` with ``seconds``) in UTC, for progress lines."""
    from sda.orbit.times import utc

    return utc(t).strftime("%m-%dT%H:%M:%S" if seconds else "%m-%dT%H:%M")


def iso_z(t: dt.datetime | float | None, timespec: str = "auto") -> str | None:
    """A datetime (naive = UTC) or unix seconds -> ISO-8601 in UTC with a ``Z`` (None stays None)."""
    from sda.orbit.times import as_utc, utc

    if t is None:
        return None
    value = as_utc(t) if isinstance(t, dt.datetime) else utc(t)
    return value.isoformat(timespec=timespec).replace("+00:00", "Z")


def parse_iso(text: str) -> dt.datetime:
    """An ISO-8601 instant (``Z`` accepted, naive = UTC) -> an aware datetime; ValueError when it is not one."""
    from sda.orbit.times import as_utc

    return as_utc(dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00")))


# --- argument types -------------------------------------------------------------------------------------------

def in_range(high: float, what: str):
    """An argparse type: a number in (0, ``high``], refused with ``what`` it should be."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not 0.0 < value <= high:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what} in (0, {high:.0f}]")
        return value
    return parse


def age_range(text: str) -> tuple[float, float]:
    """An argparse type: element-set ages in days, ``LO:HI`` (:func:`sda.sim.tle_error.parse_age`)."""
    from sda.sim.tle_error import parse_age

    try:
        return parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# --- the stages -----------------------------------------------------------------------------------------------

def stage_argv(stage: str, settings, run_id: str, *extra: str, interval: tuple[str, str] = ALL_TIME) -> list[str]:
    """A stage's arguments as the DAG passes them (the topology's extra arguments, e.g. catalog's ``--file``)."""
    from sda.pipeline.topology import STAGE_BY_NAME

    own = [arg.format(catalog_file=settings.catalog_file) for arg in STAGE_BY_NAME[stage].extra_args]
    return ["--start", interval[0], "--end", interval[1], "--run-id", run_id, *own, *extra]


def run_stage(spark, settings, stage: str, argv: list[str]) -> dict:
    """One stage's ``main`` (``jobs/<stage>.py``) on the benchmark's session: its metrics."""
    return importlib.import_module(f"jobs.{stage}").main(argv, settings=settings, spark=spark)


def land(files: Iterable[str], staging: Path, landing: Path) -> None:
    """Copy simulated files (paths relative to ``staging``) into a landing zone, with an old modification time so that
    an ingest with any recent ``--end`` takes them."""
    import os
    import shutil

    for rel in files:
        target = landing / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(staging / rel, target)
        os.utime(target, (946684800, 946684800))


# --- the reference catalogue ----------------------------------------------------------------------------------

def reference_files(program: str) -> list[Path]:
    """The reference catalogue's files; exit 2 saying what is missing when they are not there."""
    missing = [f for f in REFERENCE_FILES if not (CATALOG_DIR / f).is_file()]
    if missing:
        print(f"{program}: reference catalogue not found in {CATALOG_DIR} ({', '.join(missing)}); "
              "it ships with ../shared/data beside the project", file=sys.stderr)
        raise SystemExit(2)
    return [CATALOG_DIR / f for f in REFERENCE_FILES]


def reference_catalogue(out: Path) -> Path:
    """The reference catalogue's files as one TLE file ``out`` (one of them has no final newline)."""
    texts = [(CATALOG_DIR / f).read_text() for f in REFERENCE_FILES]
    out.write_text("".join(t if t.endswith("\n") else t + "\n" for t in texts))
    return out


# --- figures and the results file -----------------------------------------------------------------------------

def stats(values: Iterable, count: bool = False) -> dict | None:
    """Median, p90 and max of the finite values (None when there is none), rounded; ``n`` first with ``count``."""
    import numpy as np

    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], float)
    if not len(v):
        return None
    return {**({"n": len(v)} if count else {}), "median": round(float(np.median(v)), 4),
            "p90": round(float(np.percentile(v, 90)), 4), "max": round(float(v.max()), 4)}


def ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def command_line(argv: list[str] | None = None) -> str:
    """The command that is running, as docs/performance.md prints it: ``bench/<name>.py`` and its arguments,
    shell-quoted (``argv`` defaults to this process's ``sys.argv``; a script under the project root is named
    relative to it)."""
    import shlex

    words = list(sys.argv if argv is None else argv)
    if not words:
        return ""
    script = Path(words[0])
    try:
        words[0] = str(script.resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        pass
    return shlex.join(words)


def add_dedup_flag(p: argparse.ArgumentParser) -> None:
    """``--truth-dedup``: duplicates folded by the truth's labels (a perfect dedup); by default by the dedup stage's
    own rule (:func:`sda.sim.scoring.landed_observations`). The output's ``dedup`` names which (:func:`dedup_of`)."""
    p.add_argument("--truth-dedup", action="store_true",
                   help="fold duplicates by the truth's labels (a perfect dedup), not by the dedup stage's own rule")


def dedup_of(args: argparse.Namespace) -> str:
    return "truth" if getattr(args, "truth_dedup", False) else "pipeline"


def write_result(out: Path, result: dict, line: dict | None = None, *, indent: int = 2, default=str,
                 announce=None) -> None:
    """The figures to ``out`` (JSON, indented) and, last, as one JSON line to stdout (``line``, else the same);
    ``announce``, a progress-line function, says where the file went before that line. The file records the
    command that made it (:func:`command_line`; bench/report.py prints it under the table) and, for a result
    with a ``seed``, that seed's role in bench/seeds.py's registry."""
    import seeds

    result = {"command": command_line(), **result}
    if "seed" in result:
        result["seed_role"] = seeds.role(result["seed"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=indent, default=default) + "\n")
    if announce is not None:
        announce(f"figures written to {out}")
    print(json.dumps(result if line is None else line, default=default), flush=True)
