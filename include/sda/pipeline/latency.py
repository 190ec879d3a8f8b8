"""Landing-to-alert latency, as the service measures it on itself: for each file a DAG run ingested, the seconds
from its landing (its modification time when ingest read it, ``ops.ingested_files.file_mtime_us``) to the end of
the same run's screening, when that run's alerts and CDMs are out (:func:`sda.pipeline.runtime` records the
screening's figures after it has published). The conjunction stage adds the histogram to its figures
(``landing_to_alert``); :mod:`sda.pipeline.exposition` exposes it as ``sda_landing_to_alert_seconds``.

A DAG run is one batch: its stages share its run id, so the files are those whose ledger row carries the run id
of the screening. A screening run by hand under another run id, and a replay, measure nothing. A file's mtime is
when it was written into the landing zone (a sensor feed that keeps its files' original times makes the figure an
upper bound on the pipeline's part).
"""

from __future__ import annotations

import bisect
import datetime as dt
from typing import TYPE_CHECKING, Any

from sda.config.settings import Settings

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

# seconds: the alert path's target is one minute; the cadence is 15
BUCKETS = (5.0, 10.0, 15.0, 30.0, 45.0, 60.0, 90.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0)


def histogram(seconds: list[float]) -> dict[str, Any]:
    """Prometheus's cumulative histogram of ``seconds``: ``buckets`` (upper bound -> observations at or below
    it, the bounds of :data:`BUCKETS`), ``count``, ``sum`` and ``max``."""
    ordered = sorted(seconds)
    return {"count": len(ordered), "sum": round(sum(ordered), 3), "max": round(ordered[-1], 3) if ordered else None,
            "buckets": {str(b): bisect.bisect_right(ordered, b) for b in BUCKETS}}


def landing_to_alert(spark: "SparkSession", settings: Settings, run_id: str, done_at: dt.datetime) -> dict[str, Any]:
    """The histogram of the run's files' seconds from landing to ``done_at`` (one small ledger read)."""
    from pyspark.sql import functions as F

    from sda.lake.tables import TABLES

    rows = (TABLES["ingested_files"].read(spark, settings)
            .where((F.col("run_id") == run_id) & (F.col("status") == "done") & F.col("file_mtime_us").isNotNull())
            .select("file_mtime_us").collect())
    done_us = done_at.timestamp() * 1e6
    return histogram([max(0.0, (done_us - int(r["file_mtime_us"])) / 1e6) for r in rows])
