"""quality: validate what this run wrote to one layer, record it, and gate the run.

    python jobs/quality.py --start ISO --end ISO --run-id ID --layer bronze,silver|gold

For each table of the layer, the rows *this run* wrote are selected by their lineage column --
``run_id`` (bronze, silver, conjunctions, alerts) or ``correlate_run_id`` (correlated, uncorrelated)
-- and validated with :func:`sda.quality.gates.validate`. Selecting by run id rather than by change-feed
version keeps the job stateless and exactly repeatable: a retry validates the same rows, writes the
same ``ops/data_quality`` rows (MERGE on run_id + table + expectation) and the same quarantine keys,
and needs no progress row of its own. Delta's file statistics on the run id column skip the files
of other runs.

The rows are already in their table when this job runs, so quarantine-severity failures are copied
to ``ops/quarantine`` (reason: the failed checks) for triage but not deleted: removing rows *before*
they are published is what a stage calling ``validate()`` does with ``result.passed``. A
fail-severity failure is a gate: the job prints which checks failed and exits with status 3, so the
orchestrator stops before gold is published (or before alerts leave, for the gold layer).

A table with no rows from this run is skipped (reported as such). Whatever the outcome, the job
then rebuilds the run's report page (:mod:`sda.quality.report`: counts per stage, the checks with links to
their Data Docs pages, a separation plot per alert), which the DAG's quality tasks link to.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sda.config.settings import Settings
from sda.lake.tables import TABLES
from sda.pipeline import runtime
from sda.pipeline.arguments import stage_parser
from sda.quality import gates as quality
from sda.quality import report

STAGE = "quality"
GATE_FAILED_EXIT = 3
LAYERS = {
    "bronze": ("radar_frames", "optical_tracks", "isl_beacons", "tdm_messages", "space_weather_lines"),
    "silver": ("observations", "observations_dedup", "space_weather"),
    "gold": ("uncorrelated", "correlated", "conjunctions", "alerts", "alert_events"),
}


def lineage_column(table: str) -> str:
    return "correlate_run_id" if "correlate_run_id" in TABLES[table].schema.fieldNames() else "run_id"


def rows_of_run(spark: SparkSession, settings: Settings, table: str, run_id: str):
    return TABLES[table].read(spark, settings).where(F.col(lineage_column(table)) == run_id)


def tables_with_rows(spark: SparkSession, settings: Settings, tables: list[str], run_id: str) -> set[str]:
    """Which of ``tables`` hold rows of ``run_id``: one query for all of them."""
    probes = [rows_of_run(spark, settings, t, run_id).select(F.lit(t).alias("t")).limit(1) for t in tables]
    if not probes:
        return set()
    union = probes[0]
    for probe in probes[1:]:
        union = union.unionByName(probe)
    return {r["t"] for r in union.collect()}


def parse_layers(text: str) -> list[str]:
    """``--layer bronze,silver``: known layers, in the order given, each once."""
    layers = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [layer for layer in layers if layer not in LAYERS]
    if not layers or unknown:
        raise argparse.ArgumentTypeError(
            f"{'unknown layer(s) ' + ', '.join(unknown) if unknown else 'no layer named'}; known: {', '.join(LAYERS)}")
    return layers


def run(spark: SparkSession, settings: Settings, args: argparse.Namespace) -> dict[str, Any]:
    layers = parse_layers(args.layer) if isinstance(args.layer, str) else list(args.layer)
    tables: dict[str, Any] = {}
    failed: list[str] = []
    validated: list[quality.QualityResult] = []
    try:
        present = tables_with_rows(spark, settings, [t for layer in layers for t in LAYERS[layer]], args.run_id)
        for layer in layers:
            for table in LAYERS[layer]:
                if table not in present:
                    tables[table] = {"skipped": "no rows from this run"}
                    continue
                rows = rows_of_run(spark, settings, table, args.run_id)
                result = quality.validate(spark, settings, layer, table, rows, args.run_id, deferred=True)
                validated.append(result)
                try:
                    tables[table] = result.metrics()
                    if not result.gate_passed:
                        failed.append(result.summary())
                finally:
                    result.release()
        # one write of every check's row and one Data Docs build for the whole gate
        quality.build_docs(settings, validated)
        quality.record_results(spark, settings, validated)
    finally:
        # the page says why a run stopped too: it is written whatever the gate decided
        page = report.write_run_report(spark, settings, args.run_id)
        print(f"run report: {page}", file=sys.stderr)
    return {"layer": ",".join(layers), "gate_passed": not failed, "tables": tables, "gate_failures": failed,
            "report": str(page)}


def parser() -> argparse.ArgumentParser:
    p = stage_parser(STAGE, "validate the rows this run wrote to a layer; fail the run on a broken gate")
    p.add_argument("--layer", required=True, type=parse_layers,
                   help=f"the layers whose tables to validate, comma-separated ({', '.join(LAYERS)})")
    return p


def main(argv: list[str] | None = None, settings: Settings | None = None,
         spark: SparkSession | None = None) -> dict[str, Any]:
    quality.preload_gx()  # its imports overlap connecting, the lag check and the first reads
    metrics = runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)
    if not metrics["gate_passed"]:
        print(f"quality gate FAILED for layer {metrics['layer']} (run {metrics['run_id']}): do not publish.",
              file=sys.stderr)
        for text in metrics["gate_failures"]:
            print(text, file=sys.stderr)
        raise SystemExit(GATE_FAILED_EXIT)
    return metrics


if __name__ == "__main__":
    main(sys.argv[1:])
