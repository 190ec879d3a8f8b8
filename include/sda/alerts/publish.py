"""Everything after the screening, on Spark + Delta: the alerts package's only table reads and writes.

``jobs/conjunction.py`` screens the catalogue and hands its close approaches to :func:`publish`:

1. **Assess** every event: Pc, its validity and the alert level (:mod:`sda.alerts.assessment`), from the
   newest element sets (gold ``catalog``) and object states (gold ``object_state``) read here.
2. ``gold.conjunctions``: every event, with pc / pc_valid / pc_flag / level (MERGE on event_id).
3. **Lifecycle** (:mod:`sda.alerts.plan`): new / updated / closed alerts from the events and the
   ``gold.alerts`` rows that may be affected, read here.
4. **Emission**: each change writes ``CDM-<alert_id>-v<version>.cdm`` (CCSDS 508.0-B-1 KVN) and its JSON
   twin ``CDM-<alert_id>-v<version>.json`` (the alert_events row) into ``settings.outbox``, each
   atomically and only when absent (:mod:`sda.alerts.outbox`).
5. ``gold.alert_events`` (one row per emitted change) and ``gold.alerts`` (the current state).

An object with a manoeuvre in ``gold.manoeuvres`` burnt at or before the run's screening start (the CDM's
CREATION_DATE) is flagged in the assessment (:func:`manoeuvred_objects`): its CDMs say MANEUVERABLE = YES.
:func:`publish_manoeuvres` writes each manoeuvre's OPM and JSON twin (:mod:`sda.alerts.manoeuvre_message`), and
the withdrawal of each published one that a re-fit of its window no longer finds (:func:`withdraw_manoeuvres`).

Crash safety (the order of writes): conjunctions -> outbox files (JSON, then CDM) -> ``alert_events``
(insert-if-absent on (alert_id, version)) -> ``alerts`` (upsert). The file names are deterministic
per (alert_id, version) and the CDM's MESSAGE_ID and CREATION_DATE (the emitting run's screening
start) are too, so a retry after a crash between the files and the MERGEs plans the same versions
and finds their files already there: nothing is written twice, nothing lost. Should the inputs have
changed in between, the outbox holds a version the table does not know: before planning, each alert's
next version is looked up in the outbox (:func:`sda.alerts.outbox.outbox_lookup`) and, if present,
*adopted* -- recorded as emitted, from its JSON twin (a missing CDM is rewritten from it) -- and the new
plan starts after it. A rerun of a finished run (same or new run id, unchanged results) finds every
alert's content unchanged: the ``alerts`` table's version and content hash are the guard.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from sda.alerts.assessment import RULES, assess, dedup_events
from sda.alerts.outbox import ALERT_FIELDS, TIME_FIELDS, emit, outbox_lookup
from sda.alerts.plan import Plan, plan_alerts
from sda.alerts.values import UTC, aware, missing
from sda.lake import schemas
from sda.lake.orbits import newest_element_sets, usable_fused
from sda.lake.tables import TABLES, table_exists
from sda.pipeline import faults, sinks
from sda.pipeline.space_weather import process_noise

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings

__all__ = ["EVENT_FIELDS", "publish", "rule_counts", "manoeuvred_objects", "publish_manoeuvres", "withdraw_manoeuvres"]

#: alerts older than this (TCA before screen start minus it) cannot match anything: not read
_LOOKBACK = dt.timedelta(days=1)
EVENT_FIELDS = tuple(schemas.ALERT_EVENTS.fieldNames())


def _conjunction_rows(assessed: pd.DataFrame, screen_start, run_id: str) -> list[tuple]:
    fields = schemas.CONJUNCTION.fieldNames()
    return [_spark_row({**e, "screen_start": screen_start, "run_id": run_id}, fields)
            for e in assessed.to_dict("records")]


def _spark_row(row: Mapping, fields: Iterable[str]) -> tuple:
    out = []
    for f in fields:
        v = row.get(f)
        if f in TIME_FIELDS and v is not None:
            v = aware(v)
        elif isinstance(v, (np.floating, np.integer, np.bool_)):
            v = v.item()
        if f == "version":
            v = int(v)
        if f in ("pc", "miss_probability", "p_dcp_sigma", "s_dcp_sigma") and missing(v):
            v = None
        out.append(v)
    return tuple(out)


def _read_inputs(spark: "SparkSession", settings: "Settings", ids: set[int], screen_start: dt.datetime):
    """(newest element set per object, newest object_state per object, the alerts that may be affected)."""
    id_list = sorted(ids)
    catalog = []
    states = []
    if id_list:
        # the newest element set per object, as the screening uses
        catalog = newest_element_sets(TABLES["catalog"].read(spark, settings).where(F.col("norad_id").isin(id_list)),
                                      "epoch", "perigee_km", "apogee_km", "name", "line1", "line2").collect()
        state = F.max_by(F.struct("last_observed", "residual_rms_m", "observations"), "last_observed")
        states = (TABLES["object_state"].read(spark, settings).where(F.col("norad_id").isin(id_list))
                  .groupBy("norad_id").agg(state.alias("s"))
                  .select("norad_id", "s.last_observed", "s.residual_rms_m", "s.observations")
                  .collect())
    since = (screen_start - _LOOKBACK).astimezone(UTC).replace(tzinfo=None)
    current = (TABLES["alerts"].read(spark, settings)
               .where((F.col("status") != "closed") | (F.col("tca") >= F.lit(since)))
               .collect())
    return catalog, states, [r.asDict() for r in current]


def _record(spark: "SparkSession", settings: "Settings", plan: Plan) -> None:
    """The emitted versions into ``alert_events`` (insert if absent), then each alert's newest into ``alerts``."""
    history = plan.adopted + plan.changes
    if not history:
        return
    rows = [_spark_row(r, EVENT_FIELDS) for r in history]
    sinks.merge_new(spark, spark.createDataFrame(rows, schemas.ALERT_EVENTS), "alert_events", settings)
    faults.checkpoint("conjunction:after-alert-events")
    latest: dict[str, dict] = {}
    for r in history:
        if r["alert_id"] not in latest or r["version"] > latest[r["alert_id"]]["version"]:
            latest[r["alert_id"]] = r
    rows = [_spark_row(r, ALERT_FIELDS) for r in latest.values()]
    sinks.upsert(spark, spark.createDataFrame(rows, schemas.ALERT), "alerts", settings)


def publish(spark: "SparkSession", settings: "Settings", events: pd.DataFrame, screen_start: dt.datetime,
            run_id: str, *, screen_end: dt.datetime | None = None, lifecycle: bool = True,
            kept: pd.DataFrame | None = None, fused_rows: list | None = None) -> dict[str, Any]:
    """Everything after the screening: assess, write ``conjunctions``, run the alert lifecycle, emit the
    outbox files, write ``alert_events`` and ``alerts``. Idempotent and crash-safe (module docstring).

    events: the screening's approaches (:func:`sda.alerts.assessment.assess` columns; more are ignored),
    possibly several per event_id (the closest is kept). screen_start / screen_end: the screened interval
    (default end: ``screen_start + settings.screening_horizon_h``). ``lifecycle=False`` (a replay) stops
    after the ``conjunctions`` upsert: no alert changes, no outbox files. Returns the run's figures: events,
    alerts_new, alerts_updated, alerts_closed, alerts_unchanged, alerts_recovered (versions found in the
    outbox from an interrupted attempt), emitted_files, red, yellow, pc_invalid and the alert rules' counts
    (:func:`rule_counts`) among this run's events.
    kept: the open events an incremental screening kept without re-assessing them (their alerts are
    still found, :func:`sda.alerts.plan.plan_alerts`).
    fused_rows: every object's usable fused orbit already read (:data:`sda.alerts.fused.FUSED_COLUMNS`; None:
    the events' objects' are read here).
    """
    screen_start = aware(screen_start)
    screen_end = aware(screen_end) if screen_end is not None else (
        screen_start + dt.timedelta(hours=float(settings.screening_horizon_h)))
    events = dedup_events(events)
    n_events = 0 if events is None else len(events)
    ids: set[int] = set()
    if n_events:
        ids = {int(x) for x in events["primary_id"]} | {int(x) for x in events["secondary_id"]}
    from sda.alerts.fused import FUSED_COLUMNS, fused_orbits

    catalog, states, current = _read_inputs(spark, settings, ids, screen_start)
    if fused_rows is None:
        fused_rows = usable_fused(spark, settings, screen_start, sorted(ids), *FUSED_COLUMNS) if ids else []
    fused = fused_orbits([r for r in fused_rows if int(r["norad_id"]) in ids])
    manoeuvred = manoeuvred_objects(spark, settings, ids, screen_start) if lifecycle else set()
    noise = process_noise(spark, settings, screen_start - dt.timedelta(days=2), screen_end) if fused else None
    assessed = assess(events, states, catalog, settings, fused=fused, manoeuvred=manoeuvred, noise=noise)

    if len(assessed):
        conj = spark.createDataFrame(_conjunction_rows(assessed, screen_start, run_id), schemas.CONJUNCTION)
        sinks.upsert(spark, conj, "conjunctions", settings)
    levels = assessed["level"].tolist() if len(assessed) else []
    if not lifecycle:  # a replay: the screening record only (jobs/conjunction.py replay)
        return {"events": len(assessed), "red": levels.count("red"), "yellow": levels.count("yellow")}

    outbox = Path(settings.outbox)
    plan = plan_alerts(assessed, current, screen_start, screen_end, run_id, settings, outbox_lookup(outbox), kept=kept)
    written = 0
    for row in plan.adopted + plan.changes:  # adopted: rewrite a CDM whose JSON twin made it, but not itself
        written += emit(row, outbox, str(settings.cdm_originator))
    faults.checkpoint("conjunction:after-outbox")
    _record(spark, settings, plan)
    return {
        "events": len(assessed),
        "alerts_new": plan.count("new"),
        "alerts_updated": plan.count("updated"),
        "alerts_closed": plan.count("closed"),
        "alerts_unchanged": plan.unchanged,
        "alerts_recovered": len(plan.adopted),
        "emitted_files": written,
        "red": levels.count("red"),
        "yellow": levels.count("yellow"),
        "pc_invalid": int((~assessed["pc_valid"].astype(bool)).sum()) if len(assessed) else 0,
        **rule_counts(assessed),
        **open_by_level(current, plan.adopted + plan.changes),
    }


def open_by_level(current: Iterable[Mapping], history: Iterable[Mapping]) -> dict[str, int]:
    """The alerts open after a run, by level (``open_alerts_<red|yellow|none>``): each alert's newest version
    among ``current`` (the table's rows read before the run, every open one among them) and the run's
    ``history`` (its emitted versions), counted unless closed."""
    newest: dict[str, Mapping] = {}
    for row in (*current, *history):
        known = newest.get(row["alert_id"])
        if known is None or int(row["version"]) >= int(known["version"]):
            newest[row["alert_id"]] = row
    out = dict.fromkeys(("open_alerts_red", "open_alerts_yellow", "open_alerts_none"), 0)
    for row in newest.values():
        if row["status"] != "closed":
            out[f"open_alerts_{row['level']}"] = out.get(f"open_alerts_{row['level']}", 0) + 1
    return out


def rule_counts(assessed: pd.DataFrame) -> dict[str, int]:
    """Among the assessed events, how many each alert rule fired for (``rule_<name>``; an event can fire
    several) and for how many it was the only one (``rule_<name>_only``)."""
    fired = [] if not len(assessed) else [str(r).split(",") for r in assessed["alert_rule"] if not missing(r)]
    out = {}
    for rule in RULES:
        out[f"rule_{rule}"] = sum(rule in f for f in fired)
        out[f"rule_{rule}_only"] = sum(f == [rule] for f in fired)
    return out


def manoeuvred_objects(spark: "SparkSession", settings: "Settings", ids: Iterable[int], at: dt.datetime) -> set[int]:
    """Of ``ids``, the objects with a manoeuvre in gold ``manoeuvres`` burnt at or before ``at`` (the CDM's
    CREATION_DATE, the run's screening start): their CDMs say MANEUVERABLE = YES."""
    ids = sorted({int(n) for n in ids})
    if not ids or not table_exists("manoeuvres", settings):
        return set()
    until = aware(at).astimezone(UTC).replace(tzinfo=None)
    rows = (TABLES["manoeuvres"].read(spark, settings)
            .where(F.col("norad_id").isin(ids) & (F.col("burn_time") <= F.lit(until)))
            .select("norad_id").distinct().collect())
    return {int(r["norad_id"]) for r in rows}


def publish_manoeuvres(spark: "SparkSession", settings: "Settings") -> dict[str, int]:
    """One OPM and its JSON twin (:mod:`sda.alerts.manoeuvre_message`) for every gold ``manoeuvres`` row whose
    OPM is not in the outbox yet, from the row, the ``fused_orbits`` row its ``fused_id`` names and the
    object's newest catalogue name. The outbox is the record of what was published (the table is small, read
    whole): a retry or a rerun writes nothing twice. A row whose fused orbit is not (or no longer) in
    ``fused_orbits`` -- the fuse stage stopped between its two writes, or refitted the window since -- is
    left for a later run (``manoeuvre_messages_pending``). Then the withdrawals (:func:`withdraw_manoeuvres`)."""
    from sda.alerts import manoeuvre_message as mm
    from sda.alerts.assessment import intl_designator

    out = {"manoeuvre_messages": 0, "manoeuvre_files": 0, "manoeuvre_messages_pending": 0,
           "manoeuvre_withdrawals": 0, "manoeuvre_withdrawals_pending": 0}
    if not table_exists("manoeuvres", settings):
        return out
    outbox = Path(settings.outbox)
    current = [r.asDict() for r in TABLES["manoeuvres"].read(spark, settings).collect()]
    todo = [r for r in current if not mm.emitted(outbox, r["manoeuvre_id"])]
    ids = sorted({int(r["norad_id"]) for r in todo})
    orbits = _orbits_named(spark, settings, todo)
    names = {int(c["norad_id"]): c.asDict() for c in newest_element_sets(
        TABLES["catalog"].read(spark, settings).where(F.col("norad_id").isin(ids)), "name", "line1").collect()
        } if todo else {}
    for row in sorted(todo, key=lambda r: (aware(r["burn_time"]), int(r["norad_id"]), r["manoeuvre_id"])):
        orbit = orbits.get(row["fused_id"])
        if orbit is None:
            out["manoeuvre_messages_pending"] += 1
            continue
        known = names.get(int(row["norad_id"])) or {}
        out["manoeuvre_files"] += mm.emit(row, orbit, outbox, known.get("name"), intl_designator(known.get("line1")),
                                          str(settings.cdm_originator))
        out["manoeuvre_messages"] += 1
    out.update(withdraw_manoeuvres(spark, settings, current))
    return out


def _orbits_named(spark: "SparkSession", settings: "Settings", rows: list[dict]) -> dict[str, dict]:
    """The ``fused_orbits`` rows (:data:`~sda.alerts.manoeuvre_message.ORBIT_FIELDS`) the manoeuvre rows name."""
    from sda.alerts import manoeuvre_message as mm

    if not rows:
        return {}
    since = aware(min(r["window_start"] for r in rows)).astimezone(UTC).replace(tzinfo=None)
    ids = sorted({int(r["norad_id"]) for r in rows})
    return {o["fused_id"]: o.asDict() for o in (
        TABLES["fused_orbits"].read(spark, settings)
        .where(F.col("norad_id").isin(ids) & (F.col("window_start") >= F.lit(since))
               & F.col("fused_id").isin(sorted({r["fused_id"] for r in rows})))
        .select(*mm.ORBIT_FIELDS).collect())}


def withdraw_manoeuvres(spark: "SparkSession", settings: "Settings", current: list[dict]) -> dict[str, int]:
    """A withdrawal (:func:`sda.alerts.manoeuvre_message.withdraw`) for every published manoeuvre no longer in
    gold ``manoeuvres`` (``current``) that no current detection revises: its window was re-fitted and found no
    such burn. The withdrawal names the window's fused orbit now in ``fused_orbits``; while that is still the
    detecting fit (the fuse stage stopped between its writes) it waits (``manoeuvre_withdrawals_pending``)."""
    from sda.alerts import manoeuvre_message as mm

    out = {"manoeuvre_withdrawals": 0, "manoeuvre_withdrawals_pending": 0}
    outbox = Path(settings.outbox)
    gone = mm.to_withdraw(outbox, current)
    if not gone:
        return out
    keys = sorted({(int(m["norad_id"]), aware(m["window_start"]).astimezone(UTC).replace(tzinfo=None)) for m in gone})
    since = min(w for _, w in keys)
    now = {(int(o["norad_id"]), aware(o["window_start"])): o.asDict() for o in (
        TABLES["fused_orbits"].read(spark, settings)
        .where(F.col("norad_id").isin(sorted({n for n, _ in keys})) & (F.col("window_start") >= F.lit(since)))
        .select(*mm.ORBIT_FIELDS).collect())}
    for man in sorted(gone, key=lambda m: (aware(m["burn_time"]), int(m["norad_id"]), m["manoeuvre_id"])):
        orbit = now.get((int(man["norad_id"]), aware(man["window_start"])))
        if orbit is None or orbit["fused_id"] == man["fused_id"]:
            out["manoeuvre_withdrawals_pending"] += 1
            continue
        mm.withdraw(man, orbit, outbox, str(settings.cdm_originator))
        out["manoeuvre_withdrawals"] += 1
    return out
