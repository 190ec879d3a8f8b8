"""``sda trace``'s alert hop, and the whole trace: the alert (gold ``alerts``, ``alert_events``), the conjunction
it was raised from (gold ``conjunctions``, by event_id: pair, TCA, screening run) and when that screening
finished (``ops.run_metrics``); then per object the orbit it used (:mod:`.orbit`) and the catalogue state and
observations (:mod:`.objects`), then their sources (:mod:`.sources`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sda.lake.tables import TABLES
from sda.pipeline import tracing
from sda.pipeline.lineage.objects import object_lineage
from sda.pipeline.lineage.orbit import orbit_used
from sda.pipeline.lineage.sources import bronze_records, landing_files

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings


class TraceError(LookupError):
    pass


def trace(spark: "SparkSession", settings: "Settings", alert_id: str, limit: int = 20) -> dict[str, Any]:
    """Every hop of an alert's lineage (see :mod:`sda.pipeline.lineage`), as plain rows;
    :func:`sda.pipeline.lineage.command.render` prints it.
    ``limit``: the fitted observations listed per fused orbit (all are counted)."""
    from pyspark.sql import functions as F

    c = F.col
    alert = [r.asDict() for r in TABLES["alerts"].read(spark, settings).where(c("alert_id") == alert_id).collect()]
    if not alert:
        known = [r["alert_id"] for r in TABLES["alerts"].read(spark, settings).select("alert_id").limit(5).collect()]
        raise TraceError(f"no alert {alert_id!r} in gold.alerts"
                         + (f" (some alert ids: {', '.join(known)})" if known else " (the table is empty)"))
    alert = alert[0]
    versions = [r.asDict() for r in TABLES["alert_events"].read(spark, settings).where(c("alert_id") == alert_id)
                .select("version", "status", "level", "event_id", "run_id", "cdm_file").orderBy("version").collect()]
    event_ids = sorted({alert["event_id"], alert_id, *[v["event_id"] for v in versions]})
    events = [r.asDict() for r in TABLES["conjunctions"].read(spark, settings).where(c("event_id").isin(event_ids))
              .select("event_id", "primary_id", "secondary_id", "screen_start", "tca", "miss_m", "pc", "level",
                      "run_id").collect()]
    current = next((e for e in events if e["event_id"] == alert["event_id"]), None)
    screened_by = current["run_id"] if current else alert.get("first_run_id")
    finished = (TABLES["run_metrics"].read(spark, settings)
                .where((c("stage") == "conjunction") & (c("run_id") == screened_by)).select("finished").collect())
    used_before = finished[0]["finished"] if finished else None

    # the correlate runs that had finished when the screening did: what the screening could know
    known_runs = None
    if used_before is not None:
        known_runs = [r["run_id"] for r in TABLES["run_metrics"].read(spark, settings)
                      .where((c("stage") == "correlate") & (c("finished") <= F.lit(used_before)))
                      .select("run_id").collect()]
    objects = {role: object_lineage(spark, settings, norad, alert["screen_start"], used_before, known_runs)
               for role, norad in (("primary", alert["primary_id"]), ("secondary", alert["secondary_id"]))}
    for role, obj in objects.items():
        obj["orbit_used"] = orbit_used(spark, settings, alert.get(f"{role[0]}_cov_source"), limit)

    bronze = bronze_records(spark, settings, {o["bronze_id"] for obj in objects.values() for o in obj["observations"]})
    landing = landing_files(spark, settings, sorted({b["source_file"] for b in bronze}))
    return {"alert": {k: alert[k] for k in ("alert_id", "version", "status", "level", "primary_id", "secondary_id",
                                             "tca", "miss_m", "pc", "screen_start", "first_run_id", "event_id",
                                             "p_cov_source", "s_cov_source")},
            "versions": versions, "conjunctions": sorted(events, key=lambda e: e["screen_start"]),
            "screened_by_run": screened_by, "objects": objects, "bronze": bronze, "landing_files": landing,
            "trace_id": tracing.trace_id(screened_by) if screened_by else None}
