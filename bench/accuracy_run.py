"""bench/accuracy.py's run: the stages as the DAG runs them over the simulated files, and the tables it scores.

Every stage of :mod:`sda.pipeline.topology` runs once, in DAG order, over all of event time (one incremental
batch), with the topology's own arguments (catalog's ``--file``) and the screening starting at the run's end.
"""

from __future__ import annotations

import datetime as dt
import time

from common import iso_z, log, run_stage, stage_argv

from sda.pipeline.topology import stage_names

SCORED_TABLES = ("catalog", "object_state", "conjunctions", "alerts", "fused_orbits")


def run_stages(spark, settings, end: dt.datetime) -> dict:
    """Every stage, as the DAG runs them (no quality gate: they only validate): seconds per stage."""
    screen = iso_z(end)
    seconds = {}
    for stage in stage_names():
        extra = ["--screen-start", screen] if stage == "conjunction" else []
        started = time.monotonic()
        run_stage(spark, settings, stage, stage_argv(stage, settings, f"accuracy_{stage}", *extra))
        seconds[stage] = round(time.monotonic() - started, 1)
        log(f"{stage}: {seconds[stage]} s")
    return seconds


def read_tables(spark, settings) -> dict:
    """The scored tables as pandas: the newest element set and object state per object, the observation times."""
    from sda.lake.tables import TABLES

    out = {name: TABLES[name].read(spark, settings).toPandas() for name in SCORED_TABLES}
    out["observed_times"] = (TABLES["correlated"].read(spark, settings).select("norad_id", "event_time")
                             .toPandas())
    out["catalog"] = out["catalog"].sort_values("epoch").groupby("norad_id").tail(1)
    out["object_state"] = out["object_state"].sort_values("last_observed").groupby("norad_id").tail(1)
    return out
