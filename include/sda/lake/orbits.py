"""Which orbit each object is used with, read from the gold tables: the one way every stage picks it.

* :func:`active_catalog` -- gold ``catalog`` without the provisional objects no longer active;
* :func:`newest_element_sets` -- each object's newest element set (correlate's gate, the screening, the
  alerts' assessment, acquisition);
* :func:`newest_fused_orbits` / :func:`usable_fused` -- each object's newest usable fused orbit (gold
  ``fused_orbits``, jobs/fuse.py): converged, with a screening element set, not older than
  ``settings.fusion_max_age_h``, fitted over at least ``settings.fusion_min_span_s`` (or after a manoeuvre);
* :func:`with_fused_lines` -- the element sets the screening propagates: the catalogue's, or a fused object's
  by the renewal rule (:mod:`sda.orbit.screening.renewal`).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from sda.lake.tables import TABLES, table_exists
from sda.orbit.screening.renewal import Screened, renew

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from sda.config.settings import Settings


def active_catalog(spark: "SparkSession", settings: "Settings") -> "DataFrame":
    """gold ``catalog`` without the provisional objects that are no longer active (retired, or merged into a
    catalogued object: gold ``provisional_objects``): what correlation and screening use."""
    from pyspark.sql import functions as F

    catalog = TABLES["catalog"].read(spark, settings)
    if not table_exists("provisional_objects", settings):
        return catalog
    gone = TABLES["provisional_objects"].read(spark, settings).where(F.col("status") != F.lit("active"))
    return catalog.join(F.broadcast(gone.select("norad_id")), on="norad_id", how="left_anti")


def newest_element_sets(catalog: "DataFrame", *columns: str) -> "DataFrame":
    """The newest element set (largest ``epoch``) of each object in a gold ``catalog`` frame: ``norad_id``
    and ``columns``. The one way every stage picks the element set it uses (correlate's gate, the screening,
    the alerts' assessment), so they never disagree on which one that is."""
    from pyspark.sql import functions as F

    newest = F.max_by(F.struct(*columns), "epoch")
    return catalog.groupBy("norad_id").agg(newest.alias("e")).select("norad_id", *(f"e.{c}" for c in columns))


def newest_fused_orbits(fused: "DataFrame", since, *columns: str, min_span_s: float) -> "DataFrame":
    """The newest converged fused orbit (largest ``window_start``) of each object in a gold ``fused_orbits``
    frame, with a screening element set, its epoch at or after ``since``, fitted over at least ``min_span_s``
    (``settings.fusion_min_span_s``) -- or re-fitted after a detected manoeuvre (``prior_source`` manoeuvre: the
    orbit before it is known wrong, however short the fit after it): ``norad_id`` and ``columns``. The one
    way the screening, the assessment and correlation pick the fused orbit they use."""
    from pyspark.sql import functions as F

    usable = fused.where((F.col("status") == "converged") & F.col("line1").isNotNull()
                         & (F.col("epoch") >= F.lit(since))
                         & ((F.col("epoch_unix") - F.col("fit_start_unix") >= F.lit(min_span_s))
                            | (F.col("prior_source") == F.lit("manoeuvre"))))
    newest = F.max_by(F.struct(*columns), "window_start")
    return usable.groupBy("norad_id").agg(newest.alias("f")).select("norad_id", *(f"f.{c}" for c in columns))


def usable_fused(spark: "SparkSession", settings: "Settings", screen_start: dt.datetime, ids: list[int] | None,
                 *columns: str) -> list:
    """Each object's usable fused orbit (:func:`newest_fused_orbits`, at most ``settings.fusion_max_age_h``
    older than ``screen_start``): rows of norad_id and ``columns``, for the objects ``ids`` (None: all)."""
    from pyspark.sql import functions as F

    if not table_exists("fused_orbits", settings):
        return []
    since = (screen_start - dt.timedelta(hours=settings.fusion_max_age_h)).astimezone(dt.timezone.utc).replace(
        tzinfo=None)
    table = TABLES["fused_orbits"].read(spark, settings)
    if ids is not None:
        table = table.where(F.col("norad_id").isin(list(ids)))
    return newest_fused_orbits(table, since, *columns, min_span_s=settings.fusion_min_span_s).collect()


def with_fused_lines(spark: "SparkSession", settings: "Settings", rows: list, screen_start: dt.datetime,
                     screened: dict[int, tuple[str, str, float]] | None = None, fused: list | None = None) -> Screened:
    """The catalogue's newest element sets (``rows``) with, for each object that has a usable fused orbit
    (:func:`usable_fused`), the element set fitted to it instead, its ``epoch`` the fit's -- or the one the
    recorded screening (``screened``: norad_id -> (line1, line2, epoch unix) it propagated) holds, while it stays
    within ``settings.fusion_renew_m`` beyond the new set's own fit error of the new set over the horizon
    (:func:`sda.orbit.screening.renewal.renew`). ``fused``: the usable fused orbits already read (rows with
    line1, line2, epoch and lines_max_m; None: read here)."""
    screened = screened or {}
    start = screen_start.timestamp()
    end = start + settings.screening_horizon_h * 3600.0
    if fused is None:
        fused = usable_fused(spark, settings, screen_start, None, "line1", "line2", "epoch", "lines_max_m")
    return renew(rows, {int(r["norad_id"]): r for r in fused}, screened, start, end, settings.fusion_renew_m)
