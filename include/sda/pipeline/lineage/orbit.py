"""``sda trace``'s orbit hop: which orbit an alert used for each object, and what a fused one was fitted to
(:func:`sda.pipeline.lineage.command.render_orbit` prints it).

An alert records per object where the covariance of its Pc came from (``p_cov_source`` / ``s_cov_source``):

- ``fused/<regime>/<fused_id>``: the object's fused orbit (gold ``fused_orbits``, jobs/fuse.py) -- its
  screening element set and its covariance propagated to TCA. The trace names that fit (window, epoch,
  status, weighted residual RMS, observations per kind, outliers, prior) and the observations it was
  fitted to: the object's gold ``correlated`` rows with ``window_start <= event_time < window_end``.
  A window is refitted whenever observations of it arrive (each fit has a new ``fused_id``), so a fit
  an older alert used may be gone from the table: it is then looked up in the table's change feed.
  Whether the rows found are exactly the ones fitted is checked against the fit's ``obs_digest``
  (:func:`sda.orbit.fusion.arcs.obs_digest`): all of the window's rows, else those correlated by the
  correlate runs that had finished when the fuse run did; ``match`` says which, or ``changed``.
- anything else (``observed/<regime>``, ``tle/<regime>``): the catalogue's element set and the
  modelled covariance (:mod:`sda.orbit.uncertainty`).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sda.lake.tables import TABLES, table_exists

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings

FUSED_PREFIX = "fused/"
ORBIT_COLUMNS = ("fused_id", "norad_id", "window_start", "window_end", "fit_start", "epoch", "status", "reason",
                 "rms", "iterations", "observations", "outliers", "n_radar", "n_optical", "n_isl", "used_radar",
                 "used_optical", "used_isl", "prior_source", "source", "regime", "sigma_r_m", "sigma_t_m",
                 "sigma_n_m", "obs_digest", "line1", "line2", "run_id")
OBS_COLUMNS = ("obs_id", "sensor_id", "sensor_kind", "event_time", "correlate_run_id")
KINDS = ("radar", "optical", "isl")


def orbit_kind(cov_source: str | None) -> str:
    """``fused`` when an alert screened the object on its fused orbit (``cov_source`` fused/...), else
    ``catalogue`` (its element set and the modelled covariance)."""
    return "fused" if fused_id_of(cov_source) is not None else "catalogue"


def fused_id_of(cov_source: str | None) -> str | None:
    """The fused_id a covariance source names (``fused/<regime>/<fused_id>``), None for any other source."""
    if not cov_source or not cov_source.startswith(FUSED_PREFIX):
        return None
    return cov_source.rsplit("/", 1)[-1] or None


def fitted_subset(rows: list[dict[str, Any]], digest: str | None,
                  known_runs: Iterable[str] | None) -> tuple[list[dict[str, Any]], str]:
    """Which of a window's correlated ``rows`` the fit with ``digest`` used: (rows, match), match ``window``
    when all of them, ``known`` when those correlated by ``known_runs``, else (all rows, ``changed``)."""
    from sda.orbit.fusion.arcs import obs_digest

    if digest and obs_digest(r["obs_id"] for r in rows) == digest:
        return rows, "window"
    if digest and known_runs is not None:
        known = set(known_runs)
        subset = [r for r in rows if r.get("correlate_run_id") in known]
        if subset and obs_digest(r["obs_id"] for r in subset) == digest:
            return subset, "known"
    return rows, "changed"


def observation_summary(rows: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    """Count, count per sensor (and per kind), and the first ``limit`` by event time (obs_id, sensor, time)."""
    ordered = sorted(rows, key=lambda r: (r["event_time"], r["obs_id"]))
    return {"count": len(rows),
            "by_sensor": dict(sorted(Counter(r["sensor_id"] for r in rows).items())),
            "by_kind": dict(sorted(Counter(r["sensor_kind"] for r in rows).items())),
            "listed": [{k: r[k] for k in ("obs_id", "sensor_id", "sensor_kind", "event_time")}
                       for r in ordered[:max(limit, 0)]]}


def catalogue_orbit(cov_source: str | None) -> dict[str, Any]:
    return {"kind": "catalogue", "cov_source": cov_source,
            "note": "the catalogue element set and the modelled covariance"}


def orbit_used(spark: "SparkSession", settings: "Settings", cov_source: str | None, limit: int) -> dict[str, Any]:
    """What an alert's ``*_cov_source`` names (module docstring): ``kind`` catalogue or fused; for a fused
    orbit ``fused_orbit`` (its row, None when not found), ``found`` (table | change feed | None) and
    ``fitted_observations`` (:func:`observation_summary` plus ``match``)."""
    fused_id = fused_id_of(cov_source)
    if fused_id is None:
        return catalogue_orbit(cov_source)
    row, found = _fused_row(spark, settings, fused_id)
    out: dict[str, Any] = {"kind": "fused", "cov_source": cov_source, "fused_id": fused_id, "found": found,
                           "fused_orbit": row, "fitted_observations": None}
    if row is not None:
        rows = _window_rows(spark, settings, row)
        fitted, match = fitted_subset(rows, row.get("obs_digest"), _known_runs(spark, settings, row.get("run_id")))
        out["fitted_observations"] = {**observation_summary(fitted, limit), "match": match,
                                      "window_rows": len(rows)}
    return out


def _fused_row(spark: "SparkSession", settings: "Settings", fused_id: str) -> tuple[dict[str, Any] | None, str | None]:
    """The fused_orbits row of ``fused_id``: from the table, else (refitted since) from its change feed."""
    from pyspark.sql import functions as F

    if not table_exists("fused_orbits", settings):
        return None, None
    spec = TABLES["fused_orbits"]
    found = spec.read(spark, settings).where(F.col("fused_id") == fused_id).select(*ORBIT_COLUMNS).limit(1).collect()
    if found:
        return found[0].asDict(), "table"
    try:
        feed = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
                .load(spec.path(settings))
                .where((F.col("fused_id") == fused_id) & F.col("_change_type").isin("insert", "update_postimage"))
                .orderBy(F.col("_commit_version").desc()).select(*ORBIT_COLUMNS).limit(1).collect())
    except Exception:  # change-feed files vacuumed or the log truncated: the fit is gone
        return None, None
    return (feed[0].asDict(), "change feed") if feed else (None, None)


def _window_rows(spark: "SparkSession", settings: "Settings", orbit: dict[str, Any]) -> list[dict[str, Any]]:
    """The object's correlated rows in the fit's window (event_date pruned with a day's margin)."""
    from pyspark.sql import functions as F

    c = F.col
    lo, hi = orbit["window_start"], orbit["window_end"]
    day = dt.timedelta(days=1)
    return [r.asDict() for r in TABLES["correlated"].read(spark, settings)
            .where((c("event_date") >= F.lit((lo - day).date())) & (c("event_date") <= F.lit((hi + day).date()))
                   & (c("norad_id") == orbit["norad_id"]) & (c("event_time") >= F.lit(lo))
                   & (c("event_time") < F.lit(hi)))
            .select(*OBS_COLUMNS).collect()]


def _known_runs(spark: "SparkSession", settings: "Settings", fuse_run: str | None) -> list[str] | None:
    """The correlate runs that had finished when the fuse run ``fuse_run`` did (None: that run is not recorded)."""
    from pyspark.sql import functions as F

    if not fuse_run:
        return None
    c = F.col
    metrics = TABLES["run_metrics"].read(spark, settings)
    finished = metrics.where((c("stage") == "fuse") & (c("run_id") == fuse_run)).select("finished").collect()
    if not finished:
        return None
    return [r["run_id"] for r in metrics.where((c("stage") == "correlate")
                                               & (c("finished") <= F.lit(finished[0]["finished"])))
            .select("run_id").collect()]
