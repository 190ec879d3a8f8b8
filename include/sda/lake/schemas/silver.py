"""Silver schemas: the common observation envelope every well-formed measurement is brought into
(``observations``: SI units -- metres, m/s, radians -- and event time), its deduplicated form
(``observations_dedup``), and the geomagnetic and solar indices per 3-hour interval (``space_weather``)."""

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

# One row per 3-hour interval of the CSSI space-weather files (sda.transforms.cssi): the value of the newest
# issue (ties: the larger source_file, then source_sha256), so the table does not depend on the files' order.
SPACE_WEATHER = T.StructType(
    [
        T.StructField("interval_start", T.TimestampType(), False),  # 00, 03, ... 21 UTC
        T.StructField("interval_end", T.TimestampType(), False),  # interval_start + 3 h
        T.StructField("kp", T.DoubleType(), False),  # 0-9 in thirds (1.333... for "1+")
        T.StructField("kp_x10", T.IntegerType(), False),  # the file's Kp field as written (13 for "1+")
        T.StructField("ap", T.IntegerType(), False),  # the interval's ap
        T.StructField("ap_daily", T.IntegerType(), False),  # the day's Ap
        # the day's solar flux (sfu): observed and adjusted to 1 AU, and their 81-day centred and last averages
        T.StructField("f107_obs", T.DoubleType(), False),
        T.StructField("f107_adj", T.DoubleType(), False),
        T.StructField("f107_obs_ctr81", T.DoubleType(), False),
        T.StructField("f107_adj_ctr81", T.DoubleType(), False),
        T.StructField("f107_obs_lst81", T.DoubleType(), False),
        T.StructField("f107_adj_lst81", T.DoubleType(), False),
        T.StructField("observed", T.BooleanType(), False),  # the interval had ended by the issue time
        T.StructField("issued", T.TimestampType(), False),  # the file's UPDATED time
        T.StructField("section", T.StringType(), False),  # OBSERVED | DAILY_PREDICTED
        # lineage: the landed file and line the value comes from, its bronze record, the run that wrote it
        T.StructField("source_file", T.StringType(), False),
        T.StructField("source_sha256", T.StringType(), False),
        T.StructField("record_no", T.LongType(), False),  # 0-based line of the file
        T.StructField("bronze_id", T.StringType(), False),
        T.StructField("ingest_time", T.TimestampType(), False),
        T.StructField("ingest_batch", T.LongType(), False),
        T.StructField("run_id", T.StringType(), False),
    ]
)
