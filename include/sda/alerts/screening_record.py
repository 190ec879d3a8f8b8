"""The conjunction stage's record of its screening (``ops.screening_state`` and ``ops.screening_events``):
what the next, incremental screening reads to know what it need not redo (jobs/conjunction.py)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from sda.alerts.values import aware
from sda.lake import schemas
from sda.lake.orbits import usable_fused
from sda.lake.tables import TABLES
from sda.orbit import screening
from sda.pipeline import faults, runtime

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings

STAGE = "conjunction"


def read_state(spark: "SparkSession", settings: "Settings"
               ) -> tuple["screening.ScreeningState | None", dict[int, tuple[Any, Any]], dict[int, tuple]]:
    """The recorded screening state, per object the object state its events' Pc used, and per object the
    element set it screened with its epoch, (line1, line2, epoch unix) (None, {}, {} when nothing is recorded)."""
    from sda.lake.tables import table_exists

    if not table_exists("screening_state", settings):
        return None, {}, {}
    rows = TABLES["screening_state"].read(spark, settings).collect()
    if not rows:
        return None, {}, {}
    head = rows[0]
    if any((r["horizon_start"], r["horizon_end"], r["threshold_km"], r["step_s"], r["code_version"])
           != (head["horizon_start"], head["horizon_end"], head["threshold_km"], head["step_s"], head["code_version"])
           for r in rows):
        runtime.progress(STAGE, "the recorded screening state is not one screening's: screening in full")
        return None, {}, {}
    events = TABLES["screening_events"].read(spark, settings).drop("event_id", "run_id").toPandas()
    events = events.astype(screening.APPROACH_COLUMNS) if len(events) else screening.empty_events()
    events["flag"] = events["flag"].astype(object).where(events["flag"].notna(), None)
    state = screening.ScreeningState(
        aware(head["horizon_start"]).timestamp(), aware(head["horizon_end"]).timestamp(),
        float(head["threshold_km"]), float(head["step_s"]), head["code_version"],
        {int(r["norad_id"]): aware(r["epoch"]).timestamp() for r in rows}, events)
    refs = {int(r["norad_id"]): _state_ref(r["state_observed"], r["state_rms_m"]) for r in rows
            if r["state_observed"] is not None}
    lines = {int(r["norad_id"]): (r["line1"], r["line2"], aware(r["epoch"]).timestamp()) for r in rows
             if r.asDict().get("line1")}
    return state, refs, lines


def _state_ref(observed, rms) -> tuple[Any, Any]:
    return (aware(observed).timestamp() if observed is not None else None,
            None if rms is None else round(float(rms), 6))


def newest_states(spark: "SparkSession", settings: "Settings", screen_start: dt.datetime, fused: list | None = None
                  ) -> dict[int, tuple[Any, Any]]:
    """Per object, the newest gold object_state (last_observed, residual RMS): what its Pc uses. ``fused``:
    the usable fused orbits already read (rows with epoch and rms; None: read here)."""
    newest = F.max_by(F.struct("last_observed", "residual_rms_m"), "last_observed")
    rows = (TABLES["object_state"].read(spark, settings).groupBy("norad_id").agg(newest.alias("s"))
            .select("norad_id", "s.last_observed", "s.residual_rms_m").collect())
    states = {int(r["norad_id"]): _state_ref(r["last_observed"], r["residual_rms_m"]) for r in rows}
    # a fused object's Pc uses its fused orbit: a new fit (its epoch and RMS) re-assesses its kept events
    for r in usable_fused(spark, settings, screen_start, None, "epoch", "rms") if fused is None else fused:
        states[int(r["norad_id"])] = _state_ref(r["epoch"], r["rms"])
    return states


def write_state(spark: "SparkSession", settings: "Settings", events: pd.DataFrame, epochs: dict[int, Any],
                lines: dict[int, tuple[str, str]], states: dict[int, tuple[Any, Any]], screen_start: dt.datetime,
                screen_end: dt.datetime,
                threshold_km: float, step_s: float, mode: str, run_id: str) -> None:
    """Record the screening: its open events, then (last: the next run trusts what it says) the state
    per object. Each table is replaced whole in one Delta commit; a crash between the two leaves the
    old state, and the next run redoes this one's increment (the events it keeps are unchanged)."""
    ev = events.copy()
    ev.insert(0, "event_id", screening.event_keys(ev))
    ev["run_id"] = run_id
    ev["flag"] = ev["flag"].astype(object).where(ev["flag"].notna(), None)
    columns = schemas.SCREENING_EVENTS.fieldNames()
    rows = [tuple(v.item() if isinstance(v, np.generic) else v for v in rec)
            for rec in ev[columns].itertuples(index=False)]
    (spark.createDataFrame(rows, schemas.SCREENING_EVENTS).write.format("delta").mode("overwrite")
     .save(TABLES["screening_events"].path(settings)))
    faults.checkpoint("conjunction:after-screening-events")
    version = screening.code_version()
    start_utc, end_utc = aware(screen_start), aware(screen_end)
    rows = []
    for norad, epoch in sorted(epochs.items()):
        observed, rms = states.get(norad, (None, None))
        rows.append((norad, aware(epoch), None if observed is None else aware(observed), rms,
                     start_utc, end_utc, float(threshold_km), float(step_s), version, mode, run_id,
                     *lines.get(norad, (None, None))))
    (spark.createDataFrame(rows, schemas.SCREENING_STATE).write.format("delta").mode("overwrite")
     .save(TABLES["screening_state"].path(settings)))
