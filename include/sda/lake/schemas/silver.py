"""Silver schemas: the common observation envelope every well-formed measurement is brought into
(``observations``: SI units -- metres, m/s, radians -- and event time) and its deduplicated form
(``observations_dedup``)."""

from __future__ import annotations

from pyspark.sql import types as T

# The common observation envelope (silver). Measurement columns not used by a kind are null.
OBSERVATION = T.StructType(
    [
        T.StructField("obs_id", T.StringType(), False),  # deterministic, see sda.transforms.envelope
        T.StructField("sensor_id", T.StringType(), False),
        T.StructField("sensor_kind", T.StringType(), False),
        T.StructField("event_time", T.TimestampType(), False),
        T.StructField("event_date", T.DateType(), False),
        T.StructField("ingest_time", T.TimestampType(), False),
        T.StructField("ingest_batch", T.LongType(), False),  # arrival order (bronze ``ingest_batch``)
        # radar (site-relative, SI)
        T.StructField("range_m", T.DoubleType()),
        T.StructField("az_rad", T.DoubleType()),
        T.StructField("el_rad", T.DoubleType()),
        T.StructField("range_rate_ms", T.DoubleType()),
        # optical (topocentric, radians)
        T.StructField("ra_rad", T.DoubleType()),
        T.StructField("dec_rad", T.DoubleType()),
        # ISL (TEME state vector, SI)
        T.StructField("x_m", T.DoubleType()),
        T.StructField("y_m", T.DoubleType()),
        T.StructField("z_m", T.DoubleType()),
        T.StructField("vx_ms", T.DoubleType()),
        T.StructField("vy_ms", T.DoubleType()),
        T.StructField("vz_ms", T.DoubleType()),
        # sensor site (geodetic, WGS-84) for ground sensors
        T.StructField("site_lat_deg", T.DoubleType()),
        T.StructField("site_lon_deg", T.DoubleType()),
        T.StructField("site_alt_m", T.DoubleType()),
        # lineage
        T.StructField("bronze_id", T.StringType(), False),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("run_id", T.StringType(), False),
    ]
)

# Dedup output: the envelope plus how many copies were folded into this observation.
DEDUPED = T.StructType(OBSERVATION.fields + [T.StructField("copies", T.LongType(), False)])
