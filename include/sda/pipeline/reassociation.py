"""The fuse stage's re-association: before it fits an arc window, the window's observations are decided again
against the fused orbits of the windows before it (:mod:`sda.orbit.correlation.reassociation`).

* **The basis** of window ``k`` (:func:`basis`): per object, its newest fused orbit of windows ``k - 4 .. k - 1``
  that the pipeline would use (converged, fitted over at least ``settings.fusion_min_span_s``).
* **The decision** (:func:`sda.orbit.correlation.reassociation.retest`): on the basis where it finds an object,
  else the element sets'; then a wider pass for the rows no gate took, against every element set with its
  modelled sigmas widened.
* **Which rows** (:func:`window_rows`): the window's rows of ``uncorrelated``, and of ``correlated`` those the
  correlator decided (``correlate_run_id`` without a prefix, or this module's :data:`PREFIX`); the rows the
  fuse stage's manoeuvre candidates (``reassociated:``) and the ``acquire`` stage (``acquired:``, ``merged:``)
  placed are theirs. All of them when a fit of the basis was written in this run, else the ones that are new in
  this run (the stage's change feed); none when the basis is empty (the correlator's decision is then final).
* **The moves** (:func:`apply`): a row whose decision changed is rewritten in the table of its new status
  (upsert on ``obs_id``, ``correlate_run_id`` ``gated:<the run that first decided it>``) and deleted from the
  other; every change of status or object is one row of gold ``reassociations`` (from, to, the window, the
  run's round, why, the basis' digest), keyed by a hash of those, so a retry writes nothing twice.

Each write is an idempotent upsert keyed by ``obs_id``, and a row's decision depends only on the observation,
the catalogue and the basis, so a retried or split run converges on the same rows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import TYPE_CHECKING, Any

from sda.lake import schemas
from sda.lake.tables import TABLES, table_exists
from sda.orbit.correlation import reassociation as R
from sda.pipeline import faults, sinks

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from sda.config.settings import Settings

LOOKBACK_WINDOWS = 4
PREFIX = R.PREFIX
BASIS_COLUMNS = ("fused_id", "epoch_unix", "fit_start_unix", "x_km", "y_km", "z_km", "vx_kms", "vy_kms", "vz_kms",
                 "b_m2_kg", "covariance", "rms", "iterations", "status")
DECIDED = [("status", "string"), ("norad_id", "long"), ("residual_m", "double"), ("candidates", "int"),
           ("ambiguous", "boolean"), ("reason", "string"), ("nearest_norad_id", "long"),
           ("nearest_residual_m", "double"), ("gate_d2", "double"), ("nearest_gate_d2", "double")]


def _instant(k: int, arc_s: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(k * arc_s, dt.timezone.utc)


def basis(spark: "SparkSession", settings: "Settings", k: int, arc_s: float) -> dict[int, dict]:
    """Per object, the fused orbit window ``k`` is decided against (module docstring)."""
    from pyspark.sql import functions as F

    if not table_exists("fused_orbits", settings):
        return {}
    rows = (TABLES["fused_orbits"].read(spark, settings)
            .where(F.col("window_start").between(F.lit(_instant(k - LOOKBACK_WINDOWS, arc_s)),
                                                 F.lit(_instant(k - 1, arc_s))))
            .where((F.col("status") == "converged")
                   & ((F.unix_micros("epoch") - F.unix_micros("fit_start")) >= F.lit(settings.fusion_min_span_s * 1e6)))
            .select("norad_id", "window_start", F.unix_micros("epoch").alias("epoch_us"),
                    F.unix_micros("fit_start").alias("fit_start_us"), *[c for c in BASIS_COLUMNS if "_unix" not in c])
            .groupBy("norad_id").agg(F.max_by(F.struct("*"), "window_start").alias("p")).select("p.*").collect())
    out = {}
    for r in rows:
        row = r.asDict()
        row["epoch_unix"], row["fit_start_unix"] = row.pop("epoch_us") / 1e6, row.pop("fit_start_us") / 1e6
        out[int(row["norad_id"])] = row
    return out


def _movable(column: str = "correlate_run_id"):
    from pyspark.sql import functions as F

    return ~F.col(column).contains(":") | F.col(column).startswith(PREFIX)


def window_rows(spark: "SparkSession", settings: "Settings", k: int, arc_s: float,
                only: "DataFrame | None") -> "DataFrame":
    """Window ``k``'s rows to decide again (module docstring; ``only``: their obs_ids, else all), with
    ``status`` and the columns the tables store of a decision (null where one does not)."""
    from pyspark.sql import functions as F

    lo, hi = _instant(k, arc_s), _instant(k + 1, arc_s)
    days = [lo.date() + dt.timedelta(days=d) for d in range((hi.date() - lo.date()).days + 1)]
    deduped = [f.name for f in schemas.DEDUPED.fields]
    parts = []
    for table, status in (("correlated", "correlated"), ("uncorrelated", "uncorrelated")):
        rows = (TABLES[table].read(spark, settings).where(F.col("event_date").isin(days))
                .where((F.col("event_time") >= F.lit(lo)) & (F.col("event_time") < F.lit(hi))))
        if table == "correlated":
            rows = rows.where(_movable())
        have = set(rows.columns)
        parts.append(rows.select(*deduped, "correlate_run_id", F.lit(status).alias("status"),
                                 *[(F.col(c) if c in have else F.lit(None)).cast(t).alias(c)
                                   for c, t in DECIDED if c != "status"],
                                 *[(F.col(c) if c in have else F.lit(None)).cast("double").alias(c)
                                   for c in R.RESIDUAL_COLUMNS]))
    rows = parts[0].unionByName(parts[1])
    if only is not None:
        rows = rows.join(F.broadcast(only.select("obs_id").distinct()), on="obs_id", how="left_semi")
    return rows


def retest_window(spark: "SparkSession", settings: "Settings", k: int, arc_s: float, catalogue: "Callable[[], tuple]",
                  only: "DataFrame | None", round_no: int, run_id: str) -> tuple[dict[str, Any], set[int]]:
    """Decide window ``k``'s rows again against its basis and write what changed. ``catalogue``: (norad ids,
    Satrecs, uncertainty model, candidate rows) as the correlate stage builds it. Returns the figures and the
    objects that gained or lost observations (their window ``k`` must be fitted again)."""
    from sda.orbit.fusion.arcs import result_from_row
    from sda.orbit.sensors import load_sensors, sensor_sigmas

    fits = basis(spark, settings, k, arc_s)
    figures: dict[str, Any] = {"retested": 0, "rewritten": 0, "moved": 0}
    if not fits:
        return figures, set()
    rows = window_rows(spark, settings, k, arc_s, only).localCheckpoint()
    current = rows.drop(*[f.name for f in schemas.DEDUPED.fields if f.name not in R.OBSERVATION_COLUMNS]).toPandas()
    if current.empty:
        return figures, set()
    ids, sats, model, bodies = catalogue()
    observed = current.drop_duplicates("obs_id")[R.OBSERVATION_COLUMNS]
    decided = R.retest(observed, ids, sats, {n: result_from_row(r) for n, r in fits.items()}, k * arc_s,
                       settings.correlation_gate_km, sensor_sigmas(load_sensors()), model=model, bodies=bodies,
                       light_time=settings.light_time)
    changes = R.compare(_before_the_move(current, decided), decided)
    changes = changes[changes["rewrite"]]
    figures.update(retested=len(current), rewritten=len(changes), moved=int(changes["move"].sum()))
    if changes.empty:
        return figures, set()
    apply(spark, settings, rows, changes, (k, arc_s, R.basis_digest(fits), round_no, run_id))
    # whose fit input changed: the objects a row left or joined, or that a held row names (a fit's candidates)
    touched = {int(n) for c in ("norad_id", "from_norad_id", "nearest_norad_id", "from_nearest_norad_id")
               for n in changes[c].dropna()}
    return figures, touched


def _before_the_move(current: "pd.DataFrame", decided: "pd.DataFrame") -> "pd.DataFrame":
    """One row per observation: a crash between a move's two writes leaves it in both tables, and the copy the
    move came from (the one not in the table of its decision) is what it was."""
    status = current["obs_id"].map(decided.set_index("obs_id")["status"])
    order = (current["status"] == status).astype(int)  # the copy in the decision's table last
    return current.assign(_o=order.to_numpy()).sort_values(["obs_id", "_o"], kind="stable").drop_duplicates(
        "obs_id").drop(columns="_o")


def apply(spark: "SparkSession", settings: "Settings", rows: "DataFrame", changes: "pd.DataFrame",
          context: tuple) -> None:
    """Write the ``changes`` (rewritten decisions, :func:`sda.orbit.correlation.reassociation.compare`) of the
    window's ``rows``: each into the table of its status (the row there first, then gone from the other, so a
    crash between leaves it in both and the retry finishes the move), every move logged (module docstring).
    ``context``: (window, arc seconds, basis digest, round, run id)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    k, arc_s, digest, round_no, run_id = context
    columns = [c for c, _ in DECIDED] + list(R.RESIDUAL_COLUMNS) + ["move", "from_status"]
    types = dict(DECIDED) | dict.fromkeys(R.RESIDUAL_COLUMNS, "double") | {"move": "boolean", "from_status": "string"}
    frame = changes[["obs_id", *columns]].astype(object).where(changes[["obs_id", *columns]].notna(), None)
    decided = spark.createDataFrame(frame.values.tolist(),
                                    "obs_id string, " + ", ".join(f"{c} {types[c]}" for c in columns))
    base = rows.select(*[f.name for f in schemas.DEDUPED.fields], "correlate_run_id").dropDuplicates(["obs_id"])
    joined = base.join(decided, on="obs_id").withColumn(
        "correlate_run_id", F.concat(F.lit(PREFIX), F.regexp_replace("correlate_run_id", f"^{PREFIX}", "")))
    joined = joined.localCheckpoint()
    for table, other in (("correlated", "uncorrelated"), ("uncorrelated", "correlated")):
        mine = joined.where(F.col("status") == table)
        if mine.take(1):
            sinks.upsert(spark, mine.select(*[f.name for f in TABLES[table].schema.fields]), table, settings,
                         unique=True)
            faults.checkpoint(f"fuse:reassociated-into-{table}")
            sinks.delete_keys(spark, mine.select("obs_id", "event_date"), other, settings)
    moves = changes[changes["move"]]
    if len(moves):
        log = [_move(r, k, arc_s, digest, round_no, run_id) for r in moves.itertuples(index=False)]
        times = rows.select("obs_id", "event_time", "event_date").dropDuplicates(["obs_id"])
        logged = T.StructType([f for f in schemas.REASSOCIATIONS.fields if f.name not in ("event_time", "event_date")])
        entries = spark.createDataFrame(log, logged)
        sinks.merge_new(spark, entries.join(times, on="obs_id").select(*schemas.REASSOCIATIONS.fieldNames()),
                        "reassociations", settings, unique=True)


def _move(r, k: int, arc_s: float, digest: str, round_no: int, run_id: str) -> tuple:
    """One row of gold ``reassociations`` (without the observation's times, joined from its row)."""
    import pandas as pd

    to_norad = None if pd.isna(r.norad_id) else int(r.norad_id)
    from_norad = None if pd.isna(r.from_norad_id) else int(r.from_norad_id)
    key = f"{r.obs_id}|{r.from_status}|{from_norad}|{r.status}|{to_norad}|{digest}"
    return (hashlib.sha256(key.encode()).hexdigest()[:32], r.obs_id, _instant(k, arc_s), r.from_status, from_norad,
            r.status, to_norad, r.why, int(round_no), digest, run_id)


class Rounds:
    """The run's re-association, window after window (module docstring): ``new`` holds (obs_id, k) of the rows
    new in this run (the fuse stage's change feeds); :meth:`before_fit` decides window ``k`` again and says
    which objects must be fitted there besides the ones the run refits anyway."""

    def __init__(self, spark: "SparkSession", settings: "Settings", arc_s: float, new: "DataFrame", run_id: str):
        self.spark, self.settings, self.arc_s, self.run_id = spark, settings, arc_s, run_id
        self.new = new.select("obs_id", "k").localCheckpoint()
        self.new_windows = {int(r["k"]) for r in self.new.select("k").distinct().collect()}
        self.written: set[int] = set()  # windows whose fits this run wrote
        self.round = 0
        self.figures: dict[str, int] = {"retested": 0, "rewritten": 0, "moved": 0, "rounds": 0}
        self._catalogue: tuple | None = None

    def windows(self, newest: int | None) -> set[int]:
        """The windows to visit besides the refitted ones: those with new rows, and the ones after a window whose
        fits were written (up to ``newest``, the newest window with observations)."""
        after = {w + d for w in self.written for d in range(1, LOOKBACK_WINDOWS + 1)}
        return self.new_windows | {w for w in after if newest is not None and w <= newest}

    def catalogue(self) -> tuple:
        """(norad ids, Satrecs, uncertainty model, candidate rows): the catalogue as the correlate stage uses it."""
        if self._catalogue is None:
            import numpy as np

            from sda.lake.orbits import active_catalog, newest_element_sets
            from sda.orbit import correlation
            from sda.orbit.correlation.association import distinct_bodies
            from sda.orbit.screening import satrecs_from_lines

            rows = newest_element_sets(active_catalog(self.spark, self.settings), "line1", "line2").collect()
            ids = np.array([int(r["norad_id"]) for r in rows], dtype=np.int64)
            sats = satrecs_from_lines([r["line1"] for r in rows], [r["line2"] for r in rows])
            self._catalogue = (ids, sats, correlation.prediction_model(sats), distinct_bodies(ids, sats))
        return self._catalogue

    def before_fit(self, k: int) -> set[int]:
        """Decide window ``k`` again (all its rows when a fit of its basis was written in this run, else its new
        ones); returns the objects that gained or lost observations there."""
        everything = any(k - d in self.written for d in range(1, LOOKBACK_WINDOWS + 1))
        if not everything and k not in self.new_windows:
            return set()
        from pyspark.sql import functions as F

        only = None if everything else self.new.where(F.col("k") == k)
        self.round += 1
        figures, touched = retest_window(self.spark, self.settings, k, self.arc_s, self.catalogue, only,
                                         self.round, self.run_id)
        for name, n in figures.items():
            self.figures[name] += n
        self.figures["rounds"] = self.round
        return touched
