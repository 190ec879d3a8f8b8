"""Driving the stage jobs in-process the way Airflow does (same arguments, retries with the same run
id), and comparing lakehouses table by table. Shared by the determinism and exactly-once tests."""

from __future__ import annotations

import datetime as dt
import importlib
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from sda.sim.formats import file_time  # noqa: F401 - the simulated files' times, for the tests that land them

UTC = dt.timezone.utc
FAR_END = dt.datetime(2100, 1, 1, tzinfo=UTC)  # ingest takes every landed file
START = dt.datetime(2026, 1, 1, tzinfo=UTC)
FLOW = ("ingest", "normalize", "dedup", "correlate", "fuse")

# Columns that say when, by which run or through which file a row arrived, not what it is.
METADATA = frozenset({
    "run_id", "correlate_run_id", "late_run_id", "ingest_time", "ingest_date", "ingest_batch", "bronze_id",
    "source_file", "quarantine_time", "load_time", "updated", "outbox_file", "first_run_id",
})
COMPARED = ("observations", "observations_dedup", "correlated", "uncorrelated", "object_state", "passes",
            "fused_orbits",
            "late_data", "quarantine", "catalog", "conjunctions", "alerts", "alert_events")


def job(stage: str):
    return importlib.import_module(f"jobs.{stage}")


def iso(t: dt.datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


# SDA_TEST_STAGES=<file>: each stage run appends "<worker> <seconds> <stage> <run id> <lakehouse's directory>", to see
# which stages a scenario's time goes to.
_STAGES = os.environ.get("SDA_TEST_STAGES")


def run_stage(spark, settings, stage: str, run_id: str, extra: Sequence[str] = ()):
    import time

    argv = ["--start", iso(START), "--end", iso(FAR_END), "--run-id", run_id, *extra]
    began = time.perf_counter()
    result = job(stage).main(argv, settings=settings, spark=spark)
    if _STAGES:
        with open(_STAGES, "a") as out:
            out.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {time.perf_counter() - began:7.1f} "
                      f"{stage} {run_id} {Path(settings.lakehouse).parent.name}\n")
    return result


def run_flow(spark, settings, run_id: str, stages: Iterable[str] = FLOW) -> dict[str, dict]:
    return {stage: run_stage(spark, settings, stage, f"{run_id}") for stage in stages}


def land(files: Iterable[str], staging: Path, landing: Path) -> None:
    """Copy simulated files into a landing zone, keeping their relative paths; the copies get an old
    modification time so an ingest with any recent ``--end`` takes them."""
    old = dt.datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    for rel in files:
        target = landing / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(staging / rel, target)
        os.utime(target, (old, old))


def twin_lakehouses(spark, one, two, staging: Path) -> list[str]:
    """Two lakehouses on one simulation in ``staging`` (its catalogue written to ``one``'s catalogue file):
    the catalogue copied to ``two`` and loaded into both; the simulated files' relative paths (truth left
    out), for :func:`land`."""
    two.catalog_file.parent.mkdir(parents=True, exist_ok=True)
    two.catalog_file.write_bytes(one.catalog_file.read_bytes())
    for settings in (one, two):
        run_stage(spark, settings, "catalog", "catalog-1", ["--file", str(settings.catalog_file)])
    return sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file()
                  and not str(p.relative_to(staging)).startswith("_truth"))


def snapshot(spark, settings, tables: Iterable[str] = COMPARED,
             drop: frozenset[str] = METADATA) -> dict[str, list[tuple]]:
    """Every row of each table, metadata columns dropped, as a sorted list (floats rounded to 1e-9
    relative so a different summation order cannot tell two equal results apart)."""
    from sda.lake.tables import TABLES

    out = {}
    for name in tables:
        df = TABLES[name].read(spark, settings)
        cols = [c for c in df.columns if c not in drop]
        rows = [tuple(_canonical(v) for v in row) for row in df.select(*cols).collect()]
        out[name] = sorted(rows, key=repr)
    return out


def _canonical(value):
    if isinstance(value, float):
        return "NaN" if value != value else float(f"{value:.12g}")  # NaN != NaN: two equal rows would differ
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, (list, tuple)):  # an array column (a fused orbit's covariance)
        return tuple(_canonical(v) for v in value)
    return value


def differences(a: dict[str, list[tuple]], b: dict[str, list[tuple]], limit: int = 3) -> list[str]:
    """Readable differences between two snapshots (empty when they are equal). Rows are counted, not
    just collected: a row written twice is a difference."""
    from collections import Counter

    out = []
    for name in sorted(set(a) | set(b)):
        ra, rb = Counter(a.get(name, [])), Counter(b.get(name, []))
        if ra != rb:
            left, right = sorted((ra - rb).elements(), key=repr), sorted((rb - ra).elements(), key=repr)
            out.append(f"{name}: {ra.total()} vs {rb.total()} rows; only left {left[:limit]}; "
                       f"only right {right[:limit]}")
    return out


def assert_each_observation_once(spark, settings) -> None:
    """Every deduplicated observation is in exactly one of gold correlated and uncorrelated: the stages that
    move rows between them (re-association, acquisition, merging) never copy or drop one."""
    from sda.lake.tables import TABLES

    def ids(table: str) -> list[str]:
        return [r["obs_id"] for r in TABLES[table].read(spark, settings).select("obs_id").collect()]

    dedup, corr, unc = set(ids("observations_dedup")), ids("correlated"), ids("uncorrelated")
    assert len(corr) == len(set(corr)) and len(unc) == len(set(unc))
    assert not set(corr) & set(unc)
    assert set(corr) | set(unc) == dedup


def truth_key(sensor, t, a) -> tuple:
    """What matches a landed measurement to the simulator's truth: sensor, event time (ms), its first value."""
    import pandas as pd

    return str(sensor), pd.Timestamp(t).tz_localize(None).round("ms").value if pd.Timestamp(t).tzinfo else \
        pd.Timestamp(t).round("ms").value, round(float(a), 2)


def first_value(row) -> float:
    """A measurement's first value (range, right ascension x 1e6 or x), as :func:`truth_key` takes it."""
    for c in ("range_m", "ra_rad", "x_m"):
        if row.get(c) is not None and row[c] == row[c]:
            return row[c] * (1.0 if c != "ra_rad" else 1e6)
    raise ValueError(row)


def truth_bodies(result) -> dict:
    """:func:`truth_key` -> the true object, for every measurement of a simulation that reaches correlation."""
    from sda.orbit.sensors import load_sensors
    from sda.sim import scoring

    truth = scoring.landed_observations(result, load_sensors())
    return {truth_key(r["sensor_id"], r["event_time"], first_value(r)): r["true_id"] for r in truth.to_dict("records")}


def body_of(bodies: dict, row: dict):
    """The true object of a gold observation row (None when the truth does not know it)."""
    return bodies.get(truth_key(row["sensor_id"], row["event_time"], first_value(row)))
