"""How a stage job runs: ``main(argv)`` -> :func:`run_stage` -> the stage's ``run``, then its
metrics, then its progress.

A job is ``main(argv)`` -> :func:`run_stage` (parse and validate arguments, :mod:`.arguments`; build
the session, ensure tables) -> the stage's ``run(spark, settings, args)``, which reads, calls pure
transforms, writes through the sinks (:mod:`.sinks`) and returns its figures, including ``consumed``
(upstream table -> last Delta version read). :func:`run_stage` then checks the conservation
equation, records the figures in ``ops.run_metrics`` (:mod:`.run_metrics`), and only then commits
the consumed versions to ``ops.progress`` (:mod:`.changefeed`). A run that ends, either way, adds itself to
its stage's Prometheus textfile (:mod:`.exposition`) and its span to its run's trace (:mod:`.tracing`).

Exactly-once *effect* comes from the pairing of a replayable input with idempotent outputs:

* inputs are read by version (:func:`sda.pipeline.changefeed.read_changes`: the change feed from this
  stage's last consumed version + 1 to the table's current version), so a rerun reads the very same rows;
* every output is idempotent for those rows -- :func:`sda.pipeline.sinks.merge_new` inserts keys not
  present yet, :func:`sda.pipeline.sinks.upsert` replaces state by key with values recomputed from
  durable tables, and :func:`sda.pipeline.sinks.append_once` appends with Delta's
  ``txnAppId``/``txnVersion``, which Delta itself skips when that (app, version) is already committed;
* progress is committed last, in one Delta commit for all the stage's inputs. A crash before it
  (before the writes, between two of them, or after all of them) leaves the old progress, and the
  Airflow retry replays the same versions into sinks that already hold some or all of the rows:
  nothing is lost, nothing doubled. The outputs and the progress thus change together as far as any
  reader can tell, which is what committing them atomically is for.

:func:`sda.pipeline.faults.checkpoint` marks the points between writes; tests arm them to kill a
stage there.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sda.config.settings import Settings, SettingsError, load_settings
from sda.lake.tables import ensure_tables
from sda.pipeline import exposition, faults, logcontext, tracing
from sda.pipeline.arguments import StageArgumentError, validate_args
from sda.pipeline.changefeed import commit_progress, consumed_versions
from sda.pipeline.run_metrics import ConservationError, record_run_metrics, summary_line, upstream_lag

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger("sda")

StageBody = Callable[["SparkSession", Settings, argparse.Namespace], dict[str, Any]]


def run_stage(
    stage: str,
    argv: Sequence[str] | None,
    body: StageBody,
    parser: argparse.ArgumentParser,
    settings: Settings | None = None,
    spark: "SparkSession | None" = None,
    check: Callable[[argparse.Namespace, Settings], None] | None = None,
) -> dict[str, Any]:
    """Parse and validate, build the session, ensure tables, run ``body``, log a one-line summary.

    ``check(args, settings)`` validates the stage's own arguments (e.g. confines a path to the
    settings' roots) before any session is built; it raises :class:`StageArgumentError` or
    :class:`SettingsError` and may normalise ``args`` in place.

    Bad arguments exit with status 2 and a message (argparse's convention); bad settings likewise.
    """
    # our INFO lines in the task log, not hundreds of Great Expectations' registration notices
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    try:
        logcontext.configure()
        args = validate_args(parser.parse_args(argv))
        settings = settings or load_settings()
        if check is not None:
            check(args, settings)
    except (StageArgumentError, SettingsError) as exc:
        parser.error(str(exc))
    from sda.lake.spark import SparkServerUnavailable, activate, connect, is_server_gone

    started = time.monotonic()
    if spark is None:
        try:
            spark = connect(settings)
        except SparkServerUnavailable as exc:
            parser.exit(1, f"{parser.prog}: {exc}\n")
    activate(spark)
    try:
        return _run_body(stage, spark, settings, args, body, started)
    except SparkServerUnavailable:
        raise
    except Exception as exc:
        if not is_server_gone(exc):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise SparkServerUnavailable(
            f"{stage}: the Spark Connect server at {getattr(spark, 'sda_url', settings.connect_url)} "
            f"stopped answering ({first}); "
            "the stage's writes are idempotent: restart the server (`sda server start`) and retry the task"
        ) from exc


def _run_body(stage: str, spark: "SparkSession", settings: Settings, args: argparse.Namespace, body: StageBody,
              started: float) -> dict[str, Any]:
    """Ensure the tables, run ``body``, log and record its figures, then commit the consumed versions."""
    ensure_tables(spark, settings)
    before = {} if args.replay else consumed_versions(spark, settings, stage)
    if not args.replay:
        args.consumed = dict(before)  # where the change feeds start (changefeed.changes_for): read once
        args.latest = {}  # where they end, as the lag read them (each taken once: changefeed.changes_for)
    lag = upstream_lag(spark, stage, settings, before, getattr(args, "latest", None)) if before else {}
    batch = (f"replay {args.start.isoformat()}..{args.end.isoformat()}" if args.replay
             else logcontext.feed_batch(before, getattr(args, "latest", None)))
    with logcontext.bound(args.run_id, stage, batch):
        return _logged_run(stage, spark, settings, args, body, started, before, lag)


def _logged_run(stage: str, spark: "SparkSession", settings: Settings, args: argparse.Namespace, body: StageBody,
                started: float, before: dict[str, int], lag: dict[str, Any]) -> dict[str, Any]:
    progress(stage, "started: interval %s .. %s%s, run %s", args.start.isoformat(), args.end.isoformat(),
             " (replay)" if args.replay else "", args.run_id)
    start_ns = time.time_ns() - int((time.monotonic() - started) * 1e9)  # when run_stage began
    try:
        metrics = _measured_run(stage, spark, settings, args, body, started, before, lag)
    except Exception as exc:
        failed = {"seconds": round(time.monotonic() - started, 2), "mode": "replay" if args.replay else "incremental"}
        _observe(settings, stage, args.run_id, start_ns, failed, (str(exc).strip().splitlines() or [repr(exc)])[0])
        raise
    _observe(settings, stage, args.run_id, start_ns, metrics)
    return metrics


def _observe(settings: Settings, stage: str, run_id: str, start_ns: int, metrics: dict[str, Any],
             error: str | None = None) -> None:
    """The run in the stage's Prometheus textfile (:mod:`sda.pipeline.exposition`) and as a span of its run's
    trace (:mod:`sda.pipeline.tracing`); a file that cannot be written is logged, and does not fail the stage."""
    try:
        exposition.record_stage_run(settings, stage, metrics, ok=error is None)
        tracing.export(settings, tracing.span(stage, run_id, start_ns, time.time_ns(), metrics, error))
    except OSError as exc:
        log.warning("%s: the metrics textfile or the span was not written: %s", stage, exc)


def _measured_run(stage: str, spark: "SparkSession", settings: Settings, args: argparse.Namespace, body: StageBody,
                  started: float, before: dict[str, int], lag: dict[str, Any]) -> dict[str, Any]:
    """``body``, its figures logged and recorded, then the consumed versions committed."""
    metrics = body(spark, settings, args)
    metrics = {"stage": stage, "run_id": args.run_id, "seconds": round(time.monotonic() - started, 2),
               "mode": "replay" if args.replay else "incremental", **lag, **metrics}
    log.info("stage summary %s", json.dumps(metrics, default=str, sort_keys=True))
    log.info("%s", summary_line(metrics))
    print(json.dumps(metrics, default=str, sort_keys=True), file=sys.stdout, flush=True)
    conserved = record_run_metrics(spark, settings, stage, args, metrics)
    if conserved is False:
        # Before the progress commit: the inputs stay unconsumed, and every retry fails the same way
        # until someone looks.
        raise ConservationError(
            f"{stage} run {args.run_id}: records in ({metrics['records_in']}) != out ({metrics['records_out']}) + "
            f"quarantined ({metrics['quarantined']}) + duplicates ({metrics['duplicates']}) + "
            f"late ({metrics.get('late', 0)})"
        )
    faults.checkpoint(f"{stage}:before-progress")
    if not args.replay:  # a replay reads a range, not the feed: the incremental position stays where it was
        consumed = {t: int(v) for t, v in (metrics.get("consumed") or {}).items()}
        # nothing new consumed (a run with nothing to do): no commit at all
        commit_progress(spark, stage, {t: v for t, v in consumed.items() if before.get(t) != v}, args.run_id,
                        settings)
    return metrics


def progress(stage: str, message: str, *values: Any) -> None:
    """One progress line in the task log (``<stage>: ...``): long stages call it between their steps."""
    log.info("%s: " + message, stage, *values)
