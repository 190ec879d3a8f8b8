"""Bounded cost of a micro-batch: the same ~20,000 new observations through normalize, dedup and
correlate when bronze already holds ~100,000 rows and when it holds >= 2,000,000, and a full
recompute of the same stages at both sizes.

    .venv/bin/python bench/incremental.py [--small-rows 100000] [--large-rows 2000000] [--minutes 56] [--out FILE]

How the data is made (all offline):

1. the simulator writes ``--minutes`` of radar/optical/ISL files (~20,000 records with its usual
   disorder) and its catalogue; ``jobs/ingest.py`` lands them in a template bronze: *the micro-batch*;
2. *history*: the optical and ISL rows of that bronze (one observation per row) copied N times, copy
   k moved back k hours (every time in the payloads shifted, so each copy is a distinct set of
   observations with its own ids), one ingest batch per copy, oldest first; N is what it takes to
   reach ``--small-rows`` / ``--large-rows`` bronze rows;
3. small: the catalogue and the history in a fresh lakehouse, then ``full``: normalize + dedup +
   correlate over all of it from nothing (a full recompute of a bronze of that size);
4. large: the small lakehouse's state *after* that recompute (bronze, silver, gold, watermarks),
   replicated back in time (copy k moved k x the history's span, ids made unique, ingest batches
   before the newer copies') until bronze holds ``--large-rows``, with every stage's progress at its
   end -- the state the pipeline would be in had it processed all of it. Processing two million rows
   from nothing takes this 2-core machine well over an hour, so ``full_large_s`` is only timed with
   ``--full-large`` (it then wipes every output and reruns the stages over the large bronze);
5. ``incremental``, at both sizes: the micro-batch appended to bronze as the next ingest batch, then
   normalize + dedup + correlate -- each reads only what changed.

The history copies are moved in time but their objects are not, so most of them end up in
``gold.uncorrelated`` rather than ``gold.correlated``; the association work per observation is the
same either way, and the tables a micro-batch MERGEs into (silver, dedup, uncorrelated) hold the
whole history.

Timings are wall-clock seconds of each stage's ``main()`` in one warm Spark session (no JVM start).
Prints each figure as it goes and, last, one JSON line; the same JSON goes to ``--out``
(default ``bench/results/incremental.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import shutil
import time
from pathlib import Path

import pandas as pd  # module level: pandas_udf resolves its type hints here
from common import RESULTS, WORK, run_stage, stage_argv, write_result

from sda.pipeline.topology import stages_between

UTC = dt.timezone.utc
SIM_START = dt.datetime(2026, 11, 20, 6, 0, tzinfo=UTC)
# what a micro-batch costs from bronze to correlation: the batch is appended to bronze directly (no ingest),
# and the stages after correlate work per object, not per observation (bench/fusion_runs.py times them)
FLOW = stages_between("normalize", "correlate")
INTERVAL = ("2026-01-01T00:00:00Z", "2100-01-01T00:00:00Z")
ISO_RE = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?Z")
TMS_RE = re.compile(r"t_ms=(\d+)")
HISTORY_KINDS = ("optical", "isl")  # one observation per bronze row: history rows cost what they count


def shift_payload(payload: str, hours: int) -> str:
    """Every ISO time and every ``t_ms`` in a raw record moved back by ``hours`` (fractions kept)."""
    def iso(m: re.Match) -> str:
        t = dt.datetime.fromisoformat(m.group(1)) - dt.timedelta(hours=hours)
        return t.isoformat() + (m.group(2) or "") + "Z"

    def tms(m: re.Match) -> str:
        return f"t_ms={int(m.group(1)) - hours * 3_600_000}"

    return TMS_RE.sub(tms, ISO_RE.sub(iso, payload))


def settings_for(root: Path, catalog: Path):
    from sda.config.settings import load_settings

    return load_settings(env={}, lakehouse=root / "lakehouse", landing=root / "landing", outbox=root / "outbox",
                         catalog_file=catalog, shuffle_partitions=4, driver_memory="8g")


def run(spark, settings, stage: str, run_id: str, extra=()) -> dict:
    """One stage as Airflow would run it (its ``main``), on the shared session."""
    return run_stage(spark, settings, stage, stage_argv(stage, settings, run_id, *extra, interval=INTERVAL))


def make_template(spark, root: Path, minutes: float):
    """Simulated files -> template bronze (the micro-batch) and the catalogue file."""
    from sda.lake.tables import BRONZE_BY_KIND
    from sda.sim.simulate import SimConfig, simulate

    sim = simulate(SimConfig(start=SIM_START, end=SIM_START + dt.timedelta(minutes=minutes), landing=root / "landing",
                             catalog_out=root / "catalog.tle", seed=11))
    settings = settings_for(root, sim.catalog_file)
    run(spark, settings, "ingest", "template")
    frames = {kind: spec.read(spark, settings).localCheckpoint() for kind, spec in BRONZE_BY_KIND.items()}
    return frames, sim.catalog_file


def history(frames: dict, copies_n: int) -> dict:
    """Optical and ISL bronze rows copied ``copies_n`` times, copy k moved back k hours (the
    micro-batch spans less than an hour, so copies never overlap); one ingest batch per copy, batch
    1 = the oldest."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    @pandas_udf("string")
    def shifted(payload: pd.Series, back: pd.Series) -> pd.Series:
        return pd.Series([shift_payload(p, int(k)) for p, k in zip(payload, back)])

    out = {}
    for kind, df in frames.items():
        if kind not in HISTORY_KINDS:
            continue
        spark = df.sparkSession
        back = spark.range(1, copies_n + 1).select(F.col("id").cast("int").alias("back"))
        copies = df.crossJoin(back)
        out[kind] = copies.select(
            F.sha2(F.concat_ws(":", "bronze_id", F.col("back").cast("string")), 256).alias("bronze_id"),
            "sensor_kind",
            F.concat(F.lit("history/"), F.col("back").cast("string"), F.lit("/"), "source_file").alias("source_file"),
            "record_no",
            shifted("payload", "back").alias("payload"),
            (F.col("ingest_time") - F.make_interval(hours=F.col("back"))).alias("ingest_time"),
            F.to_date(F.col("ingest_time") - F.make_interval(hours=F.col("back"))).alias("ingest_date"),
            F.lit("history").alias("run_id"),
            (F.lit(copies_n + 1) - F.col("back")).cast("long").alias("ingest_batch"),
        )
    return out


def append_bronze(settings, frames: dict) -> int:
    from sda.lake.tables import BRONZE_BY_KIND

    total = 0
    for kind, df in frames.items():
        df.write.format("delta").mode("append").save(BRONZE_BY_KIND[kind].path(settings))
        total += df.count()
    return total


def timed_flow(spark, settings, run_id: str) -> tuple[float, dict]:
    per_stage, figures = {}, {}
    for stage in FLOW:
        t0 = time.perf_counter()
        metrics = run(spark, settings, stage, run_id)
        per_stage[stage] = round(time.perf_counter() - t0, 2)
        figures[stage] = {k: metrics.get(k) for k in ("records_in", "records_out", "duplicates", "late", "quarantined")}
    return round(sum(per_stage.values()), 2), {"per_stage_s": per_stage, "records": figures}


REPLICATED = ("radar_frames", "optical_tracks", "isl_beacons", "observations", "observations_dedup", "correlated",
              "uncorrelated", "object_state", "passes", "watermarks")
RENAMED_IDS = ("obs_id", "bronze_id")  # made unique per replica
CONSUMERS = {"normalize": ("radar_frames", "optical_tracks", "isl_beacons"), "dedup": ("observations",),
             "correlate": ("observations_dedup",)}


def build_history(spark, base: Path, name: str, rows: int, template: dict, catalog: Path):
    """A fresh lakehouse with the catalogue and ``rows`` bronze rows of history."""
    from sda.lake.tables import ensure_tables

    root = base / name
    shutil.rmtree(root, ignore_errors=True)
    settings = settings_for(root, catalog)
    ensure_tables(spark, settings)
    run(spark, settings, "catalog", f"{name}-catalog")  # --file: settings.catalog_file, as the DAG passes it
    per_copy = sum(template[k].count() for k in HISTORY_KINDS)
    copies_n = -(-rows // per_copy)
    t0 = time.perf_counter()
    bronze_rows = append_bronze(settings, history(template, copies_n))
    print(f"[{name}] history: {bronze_rows:,} bronze rows ({copies_n} hourly copies) written in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    return settings, copies_n, bronze_rows


def replicate(spark, src, dst, blocks: int, hours: int) -> int:
    """``dst`` = ``blocks`` copies of everything ``src`` holds (bronze, silver, gold, watermarks), copy
    k moved back k * ``hours`` hours and its ingest batches before the newer copies', then the
    stages' progress at the end of it: the state a pipeline that had processed all of it would be in.
    Returns the bronze rows written."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    from sda.lake.tables import TABLES, ensure_tables
    from sda.pipeline import changefeed

    @pandas_udf("string")
    def shifted(payload: pd.Series, back: pd.Series) -> pd.Series:
        return pd.Series([shift_payload(p, int(k)) for p, k in zip(payload, back)])

    ensure_tables(spark, dst)
    run(spark, dst, "catalog", "replica-catalog")
    batches = int(TABLES["watermarks"].read(spark, src).agg(F.max("ingest_batch")).first()[0])
    bronze_rows = 0
    for name in REPLICATED:
        spec = TABLES[name]
        df = spec.read(spark, src)
        for k in range(blocks):  # one commit per copy, oldest first, as the pipeline would have written them
            back_h = (blocks - 1 - k) * hours
            out = df
            for field in spec.schema.fields:
                kind = field.dataType.typeName()
                if kind == "timestamp":
                    out = out.withColumn(field.name, F.col(field.name) - F.make_interval(hours=F.lit(back_h)))
            for field in spec.schema.fields:
                if field.name in ("event_date", "ingest_date"):
                    source = "event_time" if field.name == "event_date" else "ingest_time"
                    out = out.withColumn(field.name, F.to_date(source))
                if field.name in RENAMED_IDS and back_h:
                    out = out.withColumn(field.name, F.sha2(F.concat_ws(":", field.name, F.lit(str(back_h))), 256))
            if "payload" in df.columns and back_h:
                out = out.withColumn("payload", shifted("payload", F.lit(back_h)))
            if "ingest_batch" in df.columns:
                out = out.withColumn("ingest_batch", F.col("ingest_batch") + F.lit(k * batches))
            out.write.format("delta").mode("append").save(spec.path(dst))
            if name in ("radar_frames", "optical_tracks", "isl_beacons"):
                bronze_rows += df.count()
    for stage, tables in CONSUMERS.items():
        versions = {t: changefeed.table_version(spark, t, dst) for t in tables}
        changefeed.commit_progress(spark, stage, versions, "replica", dst)
    return bronze_rows


def micro_batch(spark, settings, name: str, template: dict) -> dict:
    from pyspark.sql import functions as F

    from sda.lake.tables import TABLES

    batch_id = int(TABLES["watermarks"].read(spark, settings).agg(F.max("ingest_batch")).first()[0]) + 1
    batch = {kind: df.withColumn("ingest_batch", F.lit(batch_id).cast("long")) for kind, df in template.items()}
    batch_rows = append_bronze(settings, batch)
    incr_s, incr = timed_flow(spark, settings, f"{name}-incremental")
    print(f"[{name}] micro-batch of {batch_rows:,} bronze rows ({incr['records']['normalize']['records_in']:,} "
          f"observations) on top: {incr_s} s {incr['per_stage_s']}", flush=True)
    sizes = {t: TABLES[t].read(spark, settings).count()
             for t in ("observations", "observations_dedup", "correlated", "uncorrelated", "object_state")}
    return {"batch_bronze_rows": batch_rows, "incremental_s": incr_s, "incremental": incr, "table_rows_after": sizes}


def full_recompute(spark, settings, name: str) -> dict:
    """Forget every stage's output and progress, keep bronze and the catalogue, run the stages again."""
    from sda.lake.tables import TABLES, ensure_tables

    for spec in TABLES.values():
        if spec.layer != "bronze" and spec.name != "catalog":
            shutil.rmtree(spec.path(settings), ignore_errors=True)
    ensure_tables(spark, settings)
    full_s, full = timed_flow(spark, settings, f"{name}-full-again")
    print(f"[{name}] full recompute: {full_s} s {full['per_stage_s']}", flush=True)
    return {"full_s": full_s, "full": full}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small-rows", type=int, default=100_000, help="bronze rows before the micro-batch, small size")
    p.add_argument("--large-rows", type=int, default=2_000_000, help="bronze rows before the micro-batch, large size")
    p.add_argument("--minutes", type=float, default=56.0,
                   help="simulated minutes in the micro-batch (default 56: ~20k observations)")
    p.add_argument("--full-large", action="store_true",
                   help="also time a full recompute of the large bronze (over an hour on 2 cores)")
    p.add_argument("--work", type=Path, default=WORK / "incremental")
    p.add_argument("--out", type=Path, default=RESULTS / "incremental.json")
    args = p.parse_args(argv)
    if not 1_000 <= args.small_rows < args.large_rows <= 50_000_000:
        p.error(f"--small-rows {args.small_rows} / --large-rows {args.large_rows}: "
                "need 1000 <= small < large <= 50,000,000")
    if not 1 <= args.minutes <= 59:
        p.error(f"--minutes {args.minutes}: expected 1..59 (history copies are an hour apart)")

    from sda.lake import server

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    template_settings = settings_for(args.work / "template", args.work / "catalog.tle")
    with server.running(template_settings) as spark:  # the pipeline's server, if one answers
        result = measure(spark, args, template_settings)
    summary = {k: v for k, v in result.items() if k not in ("detail", "machine")}
    write_result(args.out, result, summary)
    return result


def measure(spark, args, template_settings) -> dict:
    """The small and large states, their micro-batches and full recomputes: the figures."""
    template, catalog = make_template(spark, args.work / "template", args.minutes)

    small_settings, hours, small_rows = build_history(spark, args.work, "small", args.small_rows, template, catalog)
    full_small_s, full_small = timed_flow(spark, small_settings, "small-full")
    print(f"[small] full recompute over {small_rows:,} bronze rows: {full_small_s} s {full_small['per_stage_s']}",
          flush=True)

    # The large state: the small one, processed for real above, replicated back in time. Processing
    # 2M rows from nothing takes this 2-core machine over an hour; --full-large times that too.
    blocks = -(-args.large_rows // small_rows)
    large_settings = settings_for(args.work / "large", catalog)
    shutil.rmtree(args.work / "large", ignore_errors=True)
    t0 = time.perf_counter()
    large_rows = replicate(spark, small_settings, large_settings, blocks, hours)
    print(f"[large] {blocks} copies of the small state: {large_rows:,} bronze rows in {time.perf_counter() - t0:.0f} s",
          flush=True)

    small = micro_batch(spark, small_settings, "small", template)
    large = micro_batch(spark, large_settings, "large", template)
    full_large = full_recompute(spark, large_settings, "large") if args.full_large else None
    result = {
        "incremental_small_s": small["incremental_s"],
        "incremental_large_s": large["incremental_s"],
        "ratio_large_small": round(large["incremental_s"] / small["incremental_s"], 3),
        "full_small_s": full_small_s,
        "full_large_s": full_large["full_s"] if full_large else None,
        "full_large_note": None if full_large else (
            "not run (pass --full-large; expect ~20x full_small_s on 2 cores): the large state was built by "
            "replicating the small state, processed for real"),
        "bronze_rows_small": small_rows,
        "bronze_rows_large": large_rows,
        "batch_bronze_rows": small["batch_bronze_rows"],
        "batch_observations": small["incremental"]["records"]["normalize"]["records_in"],
        "target_ratio": 1.3,
        "detail": {"small": {**small, "full": full_small}, "large": {**large, "full": full_large}},
        "machine": {"cores": __import__("os").cpu_count(), "spark_master": template_settings.spark_master},
    }
    return result


if __name__ == "__main__":
    main()
