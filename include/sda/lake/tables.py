"""The table registry: every Delta table of the lakehouse, declared once.

A :class:`TableSpec` names a table, its layer, schema, partitioning and properties. Change data feed
is on for every table, so any consumer can read what changed by version. Jobs never spell a path:
they ask the registry (``TABLES["silver_observations"].path(settings)``), and :func:`ensure_tables`
creates whatever is missing (idempotent, safe to call from every job).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sda.lake import schemas

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql import types as T

    from sda.config.settings import Settings

BASE_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    "delta.appendOnly": "false",
    # retention longer than any change-feed consumer's lag (see docs/operating.md, "Table upkeep")
    "delta.logRetentionDuration": "interval 30 days",
    "delta.deletedFileRetentionDuration": "interval 7 days",
}


@dataclasses.dataclass(frozen=True)
class TableSpec:
    name: str
    layer: str  # bronze | silver | gold | ops
    schema: "T.StructType"
    description: str
    partition_by: tuple[str, ...] = ()
    append_only: bool = False
    key: tuple[str, ...] = ()  # the natural key writers MERGE on (empty: append-only log)
    # Columns that a row's key determines (a partition column, a time in the key): MERGEs restrict the
    # target to the source's range of them, so Delta prunes partitions / skips files and a MERGE costs
    # what the batch touches, not the table's size.
    prune: tuple[str, ...] = ()
    # The columns Delta keeps per-file min/max/null statistics of (``delta.dataSkippingStatsColumns``):
    # the ones reads and MERGEs filter by. Empty: Delta's default, the first 32 columns. Every written
    # row passes through the statistics of each listed column, so a wide table lists few: for the
    # observation tables, all 25 cost a MERGE more than its rows' Parquet encoding (bench/throughput.py).
    stats: tuple[str, ...] = ()
    # Nullable columns registered after the table's first release: a table made before them gains them with
    # its next write (Delta's schema evolution); until then readers take them as null (registered_columns).
    added_columns: tuple[str, ...] = ()

    @property
    def properties(self) -> dict[str, str]:
        props = dict(BASE_PROPERTIES)
        props["delta.appendOnly"] = "true" if self.append_only else "false"
        if self.stats:
            props["delta.dataSkippingStatsColumns"] = ",".join(self.stats)
        return props

    def path(self, settings: "Settings") -> str:
        return settings.table_path(f"{self.layer}/{self.name}")

    def read(self, spark: "SparkSession", settings: "Settings") -> "DataFrame":
        return spark.read.format("delta").load(self.path(settings))


BRONZE_STATS = ("ingest_time", "ingest_batch", "run_id")
BRONZE_ADDED = ("format_version", "extra_fields")  # the wire formats' versions (sda.transforms.versions)
OBSERVATION_STATS = ("sensor_id", "event_time", "ingest_batch")

_SPECS = [
    # an append-only log (a commit costs an append, not a MERGE): the row committed last per (stage,
    # source_table) holds the version consumed (sda.pipeline.changefeed.consumed_versions); maintenance drops the rest
    TableSpec("progress", "ops", schemas.PROGRESS,
              "per stage and upstream table, the Delta versions consumed (the latest row counts)",
              key=("stage", "source_table", "version")),
    TableSpec("ingested_files", "ops", schemas.INGESTED_FILES,
              "ledger of landing files already ingested: makes ingest exactly-once per file",
              key=("file_path", "file_sha256")),
    TableSpec("quarantine", "ops", schemas.QUARANTINE,
              "records refused by a stage, with the reason and the raw bytes", key=("quarantine_id",),
              stats=("stage", "sensor_kind", "quarantine_time", "run_id")),
    TableSpec("radar_frames", "bronze", schemas.BRONZE, "raw radar frames (JSON lines)",
              partition_by=("ingest_date",), append_only=True, stats=BRONZE_STATS,
              added_columns=BRONZE_ADDED),
    TableSpec("optical_tracks", "bronze", schemas.BRONZE, "raw optical archive rows (CSV)",
              partition_by=("ingest_date",), append_only=True, stats=BRONZE_STATS,
              added_columns=BRONZE_ADDED),
    TableSpec("isl_beacons", "bronze", schemas.BRONZE, "raw inter-satellite-link beacon messages",
              partition_by=("ingest_date",), append_only=True, stats=BRONZE_STATS,
              added_columns=BRONZE_ADDED),
    TableSpec("tdm_messages", "bronze", schemas.BRONZE,
              "CCSDS TDM measurements (one per segment and epoch, with the segment's metadata)",
              partition_by=("ingest_date",), append_only=True, stats=BRONZE_STATS,
              added_columns=BRONZE_ADDED),
    TableSpec("space_weather_lines", "bronze", schemas.BRONZE,
              "raw CelesTrak CSSI space-weather files, a record per line (headers, comments and blanks included)",
              partition_by=("ingest_date",), append_only=True, stats=BRONZE_STATS,
              added_columns=BRONZE_ADDED),
    TableSpec("observations", "silver", schemas.OBSERVATION,
              "every well-formed observation in the common envelope (SI units, event time)",
              partition_by=("event_date",), key=("obs_id",), prune=("event_date",), stats=OBSERVATION_STATS),
    TableSpec("observations_dedup", "silver", schemas.DEDUPED,
              "observations with redeliveries and same-track repeats collapsed",
              partition_by=("event_date",), key=("obs_id",), prune=("event_date",), stats=OBSERVATION_STATS),
    TableSpec("space_weather", "silver", schemas.SPACE_WEATHER,
              "Kp, ap and F10.7 per 3-hour interval from the CSSI space-weather files: the newest issue's value, "
              "observed (the interval had ended when it was issued) or forecast (sda.pipeline.space_weather)",
              key=("interval_start",), prune=("interval_start",), stats=("interval_start", "issued", "run_id")),
    TableSpec("catalog", "gold", schemas.CATALOG, "catalogued objects: TLE history by epoch",
              key=("norad_id", "epoch")),
    TableSpec("correlated", "gold", schemas.CORRELATED, "observations associated with a catalogue object",
              partition_by=("event_date",), key=("obs_id",), prune=("event_date",),
              stats=(*OBSERVATION_STATS, "norad_id")),
    TableSpec("uncorrelated", "gold", schemas.UNCORRELATED, "observations no catalogue object explains",
              partition_by=("event_date",), key=("obs_id",), prune=("event_date",), stats=OBSERVATION_STATS),
    # object_state and passes are partitioned by ``final``: the provisional rows a run may refine or
    # finalize are one small partition, whatever the history.
    TableSpec("object_state", "gold", schemas.OBJECT_STATE, "per object and event-time window state",
              partition_by=("final",), key=("norad_id", "window_start"), prune=("window_start",),
              stats=("norad_id", "window_start", "window_end", "last_observed")),
    TableSpec("fused_orbits", "gold", schemas.FUSED_ORBITS,
              "per object and event-time arc window, the orbit fitted to its correlated observations (jobs/fuse.py)",
              key=("norad_id", "window_start"), prune=("window_start",),
              stats=("norad_id", "window_start", "epoch", "status")),
    TableSpec("sensor_calibrations", "gold", schemas.SENSOR_CALIBRATIONS,
              "per sensor, event-time arc window and quantity, the bias estimated from well-determined fits' "
              "residuals; the fuse stage applies it to the later windows (sda.orbit.estimation.calibration)",
              key=("sensor_id", "window_start", "quantity"), prune=("window_start",),
              stats=("sensor_id", "window_start")),
    TableSpec("reassociations", "gold", schemas.REASSOCIATIONS,
              "every move of an observation by re-association against fused orbits: from, to, round, why "
              "(jobs/fuse.py, sda.pipeline.reassociation)",
              partition_by=("event_date",), key=("move_id",), prune=("event_date",),
              stats=("obs_id", "window_start")),
    TableSpec("manoeuvres", "gold", schemas.MANOEUVRES,
              "per object and arc window, a manoeuvre its observations revealed: burn bracket, delta-v, the test, "
              "the orbit re-fitted after it (jobs/fuse.py, sda.orbit.manoeuvre.detection)",
              key=("norad_id", "window_start", "seq"), prune=("window_start",),
              stats=("norad_id", "window_start", "burn_time")),
    TableSpec("provisional_objects", "gold", schemas.PROVISIONAL_OBJECTS,
              "objects in no catalogue that uncorrelated observations revealed, under provisional numbers "
              "80000-89999: active, retired or merged (jobs/acquire.py, sda.orbit.acquisition.search)",
              key=("norad_id",), stats=("norad_id", "status")),
    TableSpec("passes", "gold", schemas.PASSES, "a sensor's passes over an object (session windows)",
              partition_by=("final",), key=("sensor_id", "norad_id", "pass_start"), prune=("pass_start",),
              stats=("sensor_id", "norad_id", "pass_start", "pass_end")),
    TableSpec("watermarks", "ops", schemas.WATERMARKS,
              "per sensor and ingest batch, the event times that arrived: the watermarks' source",
              key=("sensor_id", "ingest_batch")),
    TableSpec("late_data", "ops", schemas.LATE_DATA,
              "observations that arrived after their event-time window was final, with their lateness",
              partition_by=("event_date",), key=("obs_id",), prune=("event_date",), stats=OBSERVATION_STATS),
    TableSpec("propagation_errors", "ops", schemas.PROPAGATION_ERRORS,
              "objects SGP4 refused to propagate during a run (error code and first failing time): "
              "skipped, not screened",
              key=("stage", "run_id", "norad_id")),
    TableSpec("screening_state", "ops", schemas.SCREENING_STATE,
              "the conjunction screening's state per object: element-set epoch screened, horizon, threshold, step, "
              "code version (what the next screening need not redo)", key=("norad_id",)),
    TableSpec("screening_events", "ops", schemas.SCREENING_EVENTS,
              "the open events of the recorded screening, kept for pairs that did not change", key=("event_id",)),
    TableSpec("conjunctions", "gold", schemas.CONJUNCTION,
              "close approaches under the screening threshold, with their 2-D Pc and level",
              key=("event_id",)),
    TableSpec("alerts", "gold", schemas.ALERT,
              "current state of each conjunction alert (new | updated | closed), see sda.alerts.plan",
              key=("alert_id",)),
    TableSpec("alert_events", "gold", schemas.ALERT_EVENTS,
              "every emitted alert change (one CDM + JSON in the outbox each): the alerts' history",
              key=("alert_id", "version")),
    TableSpec("run_metrics", "ops", schemas.RUN_METRICS,
              "per stage and run: records in/out/quarantined/duplicates/late, duration, all reported figures",
              key=("stage", "run_id")),
    TableSpec("data_quality", "ops", schemas.DATA_QUALITY,
              "one row per data-quality expectation per validated table per run (sda.quality.gates)",
              key=("run_id", "table", "expectation")),
]

TABLES: dict[str, TableSpec] = {spec.name: spec for spec in _SPECS}
# the bronze table of each observation kind (normalize's inputs), and of every landing kind (ingest's outputs)
BRONZE_BY_KIND = {"radar": TABLES["radar_frames"], "optical": TABLES["optical_tracks"], "isl": TABLES["isl_beacons"],
                  "tdm": TABLES["tdm_messages"]}
BRONZE_BY_LANDING_KIND = {**BRONZE_BY_KIND, "space_weather": TABLES["space_weather_lines"]}


def registered_columns(df: "DataFrame", spec: TableSpec) -> list["Column"]:
    """``spec``'s columns of ``df`` (a read of its table), in their registered order; an added column
    (:attr:`TableSpec.added_columns`) that a table made before it lacks reads as a typed null. Only a table
    with added columns costs a schema round trip."""
    from pyspark.sql import functions as F

    have = set(df.columns) if spec.added_columns else None
    return [F.lit(None).cast(f.dataType).alias(f.name) if have is not None and f.name not in have
            else F.col(f"`{f.name}`") for f in spec.schema.fields]


def table_exists(name: str, settings: "Settings") -> bool:
    """Whether a registered table has been created (its Delta log has a commit)."""
    from pathlib import Path

    log_dir = Path(TABLES[name].path(settings)) / "_delta_log"
    return log_dir.is_dir() and any(log_dir.glob("*.json"))


def ensure_tables(spark: "SparkSession", settings: "Settings", names: list[str] | None = None) -> None:
    """Create the named (default: all) tables where they do not exist yet (``CREATE TABLE IF NOT
    EXISTS delta.`<path>` ... USING delta``: plain SQL, as a Spark Connect session runs it)."""
    missing = [name for name in (names or list(TABLES)) if not table_exists(name, settings)]
    if not missing:
        return  # the usual case: no Delta round trip (each job calls this for every table)
    # a fresh lakehouse: the CREATE statements go to the server four at a time (each is a Delta
    # commit of its own; sequentially they cost a first run ~15 s)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(_create_with_retry, spark, create_statement(TABLES[n], settings), n) for n in missing]
        for future in futures:
            future.result()


def create_statement(spec: TableSpec, settings: "Settings") -> str:
    """The ``CREATE TABLE IF NOT EXISTS`` statement of a registered table."""
    columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}"
                        for f in spec.schema.fields)
    sql = f"CREATE TABLE IF NOT EXISTS delta.`{spec.path(settings)}` ({columns}) USING delta"
    if spec.partition_by:
        sql += " PARTITIONED BY (" + ", ".join(f"`{c}`" for c in spec.partition_by) + ")"
    sql += " COMMENT " + sql_string(spec.description)
    if spec.properties:
        sql += " TBLPROPERTIES (" + properties_sql(spec.properties) + ")"
    return sql


def sql_string(text: str) -> str:
    """A SQL string literal of ``text`` (quotes and backslashes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION: the other creator's _delta_log exists, its first commit
# not yet (seen with catalog and ingest on a fresh lakehouse in the compose stack)
_CONCURRENT_CREATE = ("DELTA_PROTOCOL_CHANGED", "DELTA_METADATA_CHANGED", "ConcurrentAppend", "ProtocolChanged",
                      "MetadataChanged", "DELTA_CONCURRENT", "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION")


def _create_with_retry(spark: "SparkSession", statement: str, name: str, attempts: int = 4) -> None:
    """Two jobs may create the same table at the same moment (the first run of a fresh lakehouse):
    the loser's commit conflicts, and running ``CREATE TABLE IF NOT EXISTS`` again then finds it."""
    import time

    for attempt in range(attempts):
        try:
            spark.sql(statement).collect()
            return
        except Exception as exc:  # Delta's conflict arrives as a generic error naming its class
            if attempt == attempts - 1 or not any(tag in str(exc) for tag in _CONCURRENT_CREATE):
                raise
            time.sleep(0.5 * (attempt + 1))


def properties_sql(properties: dict[str, str]) -> str:
    """``'k' = 'v', ...``: table properties as ``TBLPROPERTIES (...)`` lists them."""
    return ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in properties.items())


def sync_properties(spark: "SparkSession", settings: "Settings", name: str, current: dict[str, str]) -> dict[str, str]:
    """Set the registered properties a table made earlier lacks or has otherwise (``current``: its
    properties now, e.g. from ``DESCRIBE DETAIL``); returns those set. Only files written afterwards
    follow a changed statistics setting: the maintenance job calls this before compacting."""
    changed = {k: v for k, v in TABLES[name].properties.items() if current.get(k) != v}
    if changed:
        statement = f"ALTER TABLE delta.`{TABLES[name].path(settings)}` SET TBLPROPERTIES ({properties_sql(changed)})"
        spark.sql(statement).collect()
    return changed


def add_missing_columns(spark: "SparkSession", settings: "Settings", name: str) -> list[str]:
    """Bring an existing table up to its registered schema by adding the (nullable) columns it lacks
    (``ALTER TABLE ... ADD COLUMNS``: a lakehouse made before a column was registered). Returns them."""
    spec = TABLES[name]
    have = set(spec.read(spark, settings).schema.fieldNames())
    missing = [f for f in spec.schema.fields if f.name not in have]
    if missing:
        if any(not f.nullable for f in missing):
            raise ValueError(f"table {name}: cannot add the non-nullable column(s) "
                             f"{', '.join(f.name for f in missing if not f.nullable)} to existing rows")
        columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
        spark.sql(f"ALTER TABLE delta.`{spec.path(settings)}` ADD COLUMNS ({columns})").collect()
    return [f.name for f in missing]
