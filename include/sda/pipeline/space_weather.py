"""``silver.space_weather``: Kp, ap and F10.7 per 3-hour interval, from the CSSI files ingest takes.

**Written by ingest** (:func:`merge_intervals`), in the same ledger batch as the files' lines go to bronze
``space_weather_lines``: the intervals of the batch's files (:func:`sda.transforms.cssi.interval_table`)
are MERGEd on ``interval_start``, and a row is replaced only by a *newer* value: a later issue (``issued``,
the file's UPDATED time), on a tie the larger ``source_file``, then the larger ``source_sha256``. The table
therefore holds, per interval, the value of the newest issue ever landed, whatever order or runs the files
came in, and a replayed batch (a crash before the ledger said done) changes nothing. As files are issued
every 3 hours, an interval is first a forecast and then, from the first issue after it ended, an
observation (``observed``).

**Read** by whoever needs the indices (the fuse stage's drag, the simulator's scoring): :func:`read`
(a DataFrame of the intervals overlapping a time range) and :func:`read_pandas` (the same, as a pandas
frame in time order). :func:`run_summary` is what the run report shows of the space weather a run received.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from sda.config.settings import Settings
from sda.lake import schemas
from sda.lake.tables import TABLES, table_exists
from sda.pipeline import sinks

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from sda.orbit.estimation.noise import ProcessNoise

TABLE = "space_weather"
STORM_KP = 5.0  # a geomagnetic storm: Kp 5 (NOAA G1) or more
# the source row is newer than the target row: a later issue, then the larger file path, then the larger sha256
NEWER = ("s.issued > t.issued OR (s.issued = t.issued AND (s.source_file > t.source_file OR "
         "(s.source_file = t.source_file AND s.source_sha256 > t.source_sha256)))")
COLUMNS = ("interval_start", "interval_end", "kp", "ap", "ap_daily", "f107_obs", "f107_adj", "f107_obs_ctr81",
           "f107_adj_ctr81", "f107_obs_lst81", "f107_adj_lst81", "observed", "issued", "source_file")


def kp_symbol(kp: float) -> str:
    """Kp as it is spoken, in thirds: 4/3 -> ``1+``, 5/3 -> ``2-``, 2 -> ``2o``."""
    thirds = round(kp * 3)
    whole, rest = divmod(thirds, 3)
    return f"{whole}o" if rest == 0 else f"{whole}+" if rest == 1 else f"{whole + 1}-"


def newest_per_interval(rows: "pa.Table") -> "pa.Table":
    """One row per ``interval_start``: the newest (:data:`NEWER`'s order), in interval order."""
    keys = zip(rows["interval_start"].to_pylist(), rows["issued"].to_pylist(), rows["source_file"].to_pylist(),
               rows["source_sha256"].to_pylist())
    best: dict[dt.datetime, tuple[tuple, int]] = {}
    for index, (start, *rank) in enumerate(keys):
        if start not in best or tuple(rank) > best[start][0]:
            best[start] = (tuple(rank), index)
    return rows.take([best[start][1] for start in sorted(best)])


def merge_intervals(spark: "SparkSession", settings: Settings, tables: list["pa.Table | None"],
                    ingest_time: dt.datetime, run_id: str, batch_id: int) -> int:
    """MERGE the intervals of a batch's CSSI files (``tables``, None for files of other kinds) into
    ``silver.space_weather``, each replacing the row of its interval only when newer; returns the
    intervals written (the batch's newest per interval)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    tables = [t for t in tables if t is not None and t.num_rows]
    if not tables:
        return 0
    rows = newest_per_interval(pa.concat_tables(tables))
    schema = to_arrow_schema(schemas.SPACE_WEATHER)
    for name, value in (("ingest_time", ingest_time), ("ingest_batch", batch_id), ("run_id", run_id)):
        rows = rows.append_column(schema.field(name), pa.repeat(pa.scalar(value, schema.field(name).type),
                                                               rows.num_rows))
    source = spark.createDataFrame(rows.select(schema.names), schemas.SPACE_WEATHER)
    sinks.merge(spark, TABLE, settings, source, lambda m: m.whenMatchedUpdateAll(NEWER).whenNotMatchedInsertAll())
    return rows.num_rows


def issue_of(intervals: "pa.Table | None") -> str | None:
    """A CSSI file's issue time (ISO, UTC) from its intervals; None when it gave none."""
    if intervals is None or not intervals.num_rows:
        return None
    return _iso(intervals["issued"][0].as_py())


def read(spark: "SparkSession", settings: Settings, start: dt.datetime | None = None,
         end: dt.datetime | None = None) -> "DataFrame":
    """The intervals overlapping ``[start, end)`` (either bound may be None: open)."""
    from pyspark.sql import functions as F

    df = TABLES[TABLE].read(spark, settings)
    if start is not None:
        df = df.where(F.col("interval_end") > F.lit(start))
    if end is not None:
        df = df.where(F.col("interval_start") < F.lit(end))
    return df


def read_pandas(spark: "SparkSession", settings: Settings, start: dt.datetime | None = None,
                end: dt.datetime | None = None) -> "pd.DataFrame":
    """:func:`read` as a pandas frame of :data:`COLUMNS`, in time order (times in UTC); empty, with those
    columns, before the table exists."""
    import pandas as pd

    if not table_exists(TABLE, settings):
        return pd.DataFrame({name: [] for name in COLUMNS})
    frame = read(spark, settings, start, end).select(*COLUMNS).orderBy("interval_start").toPandas()
    for name in ("interval_start", "interval_end", "issued"):
        frame[name] = pd.to_datetime(frame[name], utc=True)
    return frame


def process_noise(spark: "SparkSession", settings: Settings, start: dt.datetime | None = None,
                  end: dt.datetime | None = None) -> "ProcessNoise":
    """The fused predictions' model error with the Kp landed over ``[start, end)``: a storm grows the density
    forecast's error (:class:`sda.orbit.estimation.noise.ProcessNoise`); quiet without space weather."""
    from sda.orbit.estimation.noise import ProcessNoise, SpaceWeather

    return ProcessNoise(weather=SpaceWeather.from_frame(read_pandas(spark, settings, start, end)))


def run_summary(spark: "SparkSession", settings: Settings, start: dt.datetime, end: dt.datetime,
                issues: list[str | None]) -> dict[str, Any]:
    """What the run report shows of the space weather a run received: the CSSI files it took
    (``issues``: each one's issue time, None for a file that gave no interval), the newest issue, and over
    the run's data interval ``[start, end)`` the largest observed and forecast Kp in the table and whether a
    storm (Kp >= :data:`STORM_KP`) was observed."""
    from pyspark.sql import functions as F

    stats = {row["observed"]: row for row in read(spark, settings, start, end).groupBy("observed")
             .agg(F.max("kp").alias("kp"), F.count(F.lit(1)).alias("n")).collect()}
    observed, forecast = stats.get(True), stats.get(False)
    max_kp = None if observed is None else observed["kp"]
    dated = [issue for issue in issues if issue is not None]
    return {"files": len(issues), "newest_issue": max(dated) if dated else None,
            "interval": [_iso(start), _iso(end)], "observed_intervals": 0 if observed is None else observed["n"],
            "max_observed_kp": max_kp, "storm_observed": max_kp is not None and max_kp >= STORM_KP,
            "max_forecast_kp": None if forecast is None else forecast["kp"]}


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
