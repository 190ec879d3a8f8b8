"""Bronze schemas: the records as landed, one table per landing kind (``radar_frames``, ``optical_tracks``,
``isl_beacons``, ``tdm_messages``, ``space_weather_lines``: :data:`BRONZE`), and the landing kinds with the suffix
of each one's files. What a landed record looks like (the wire formats) is :mod:`sda.lake.wire_formats`; a CSSI
space-weather file is :mod:`sda.transforms.cssi`."""

from __future__ import annotations

from pyspark.sql import types as T

# The landing kinds, each with a bronze table. ``tdm`` (CCSDS Tracking Data Messages, KVN or XML) is a
# format, not a sensor type: normalize gives each of its measurements the kind of envelope it fills.
SENSOR_KINDS = ("radar", "optical", "isl", "tdm")
# Every landing kind: the observation kinds normalize reads, and ``space_weather`` (CelesTrak's CSSI files,
# issued every 3 hours), which ingest also parses into ``silver.space_weather``.
LANDING_KINDS = (*SENSOR_KINDS, "space_weather")
LANDING_SUFFIX = {"radar": ".jsonl", "optical": ".csv", "isl": ".bcn", "tdm": (".kvn", ".xml", ".tdm"),
                  "space_weather": ".txt"}

BRONZE = T.StructType(
    [
        T.StructField("bronze_id", T.StringType(), False),  # sha256(file sha256, record number)
        T.StructField("sensor_kind", T.StringType(), False),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("record_no", T.LongType(), False),  # 0-based line number in the file
        T.StructField("payload", T.StringType(), False),  # the raw record, as landed
        T.StructField("ingest_time", T.TimestampType(), False),
        T.StructField("ingest_date", T.DateType(), False),
        T.StructField("run_id", T.StringType(), False),
        # The ledger batch that appended the row: the arrival order every event-time watermark is
        # judged by (see sda.pipeline.watermarks), the same whichever run later reads it.
        T.StructField("ingest_batch", T.LongType(), False),
        # The sensor wire format's version the record was read as (1.0 when it declares none; null for TDM
        # and space weather, which carry their standards' own), and its fields that version 1.0 does not
        # have, by name (sda.transforms.versions). Added after the table's first version: a table made
        # before them gains them with its next append (Delta's schema evolution, ``mergeSchema``).
        T.StructField("format_version", T.StringType()),
        T.StructField("extra_fields", T.MapType(T.StringType(), T.StringType())),
    ]
)
