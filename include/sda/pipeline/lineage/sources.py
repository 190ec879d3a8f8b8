"""``sda trace``'s source hop: the bronze records the observations came from (``bronze_id`` -> source file, record
number, ingest batch) and the landing files they were read from (``ops.ingested_files``: path, sha256, size, the
run that ingested it). The ``bronze_id`` is sha256(landing file sha256, record number), so a record can be found
again in its file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sda.lake.tables import BRONZE_BY_KIND, TABLES

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings


def bronze_records(spark: "SparkSession", settings: "Settings", bronze_ids: set[str]) -> list[dict[str, Any]]:
    """The bronze rows of the observations, in (source file, record number) order."""
    from pyspark.sql import functions as F

    bronze: list[dict[str, Any]] = []
    if bronze_ids:
        ids = spark.createDataFrame([(b,) for b in sorted(bronze_ids)], "bronze_id string")
        for spec in BRONZE_BY_KIND.values():
            found = (spec.read(spark, settings).join(F.broadcast(ids), "bronze_id", "left_semi")
                     .select("bronze_id", "sensor_kind", "source_file", "record_no", "ingest_batch", "run_id"))
            bronze += [r.asDict() for r in found.collect()]
    bronze.sort(key=lambda r: (r["source_file"], r["record_no"]))
    return bronze


def landing_files(spark: "SparkSession", settings: "Settings", files: list[str]) -> list[dict[str, Any]]:
    """The ledger rows of the landing files the bronze records came from."""
    from pyspark.sql import functions as F

    if not files:
        return []
    return [r.asDict() for r in TABLES["ingested_files"].read(spark, settings).where(F.col("file_path").isin(files))
            .select("file_path", "file_sha256", "file_size", "sensor_kind", "records", "run_id", "batch_id")
            .orderBy("file_path").collect()]
