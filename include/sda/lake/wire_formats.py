"""The three sensor wire formats, declared once: what one record of a landed file looks like (the
files' suffixes per kind are :data:`sda.lake.schemas.LANDING_SUFFIX`; parsing them is
:mod:`sda.transforms.wire`).

radar, ``*.jsonl`` -- one JSON *frame* per line, several detections per frame::

    {"sensor": "EGLIN", "frame": 17, "sent": "2026-11-21T06:00:05.000Z",
     "dets": [{"t": "2026-11-21T06:00:01.250Z", "range_km": 1234.567, "az_deg": 181.2,
               "el_deg": 35.1, "rr_km_s": -2.345, "snr_db": 18.0}, ...]}

optical, ``*.csv`` -- an archive file with a header; right ascension in *hours*::

    station,timestamp_utc,ra_hours,dec_deg,vmag,exposure_s
    SOCORRO,2026-11-21T06:00:01.250000Z,13.2345678,-12.345678,11.2,2.0

ISL, ``*.bcn`` -- beacon messages, one per line, ``|``-separated ``key=value`` pairs; time in unix
milliseconds, TEME state vector of the *reporting* spacecraft's target in metres and m/s::

    BCN|src=ISL-03|seq=42|t_ms=1763704801250|x_m=...|y_m=...|z_m=...|vx_ms=...|vy_ms=...|vz_ms=...

Versions (``MAJOR.MINOR``, :data:`FORMAT_VERSION`): a radar frame's ``"version"`` field, a beacon's ``version=``
pair, an optical file's first line ``#version=1.0`` before its header. A record or file without one is
version 1.0. A newer minor version of the major version this reader knows (:data:`READ_MAJOR`) may add
optional fields (radar frame or detection keys, beacon pairs, optical columns after the version-1 columns),
which are read and kept in bronze (``extra_fields``); a file with a record of another major version is
quarantined whole.
"""

from __future__ import annotations

from pyspark.sql import types as T

OPTICAL_HEADER = "station,timestamp_utc,ra_hours,dec_deg,vmag,exposure_s"

# The version the simulator writes and the major version this reader reads (any minor of it).
FORMAT_VERSION = "1.0"
READ_MAJOR = 1
VERSION_FIELD = "version"  # radar frames' key and beacons' pair
OPTICAL_VERSION_PREFIX = "#version="  # an optical file's first line, before the header

RADAR_DETECTION = T.StructType(
    [
        T.StructField("t", T.StringType()),
        T.StructField("range_km", T.DoubleType()),
        T.StructField("az_deg", T.DoubleType()),
        T.StructField("el_deg", T.DoubleType()),
        T.StructField("rr_km_s", T.DoubleType()),
        T.StructField("snr_db", T.DoubleType()),
    ]
)
RADAR_FRAME = T.StructType(
    [
        T.StructField("sensor", T.StringType()),
        T.StructField("frame", T.LongType()),
        T.StructField("sent", T.StringType()),
        T.StructField("dets", T.ArrayType(RADAR_DETECTION)),
    ]
)
OPTICAL_ROW = T.StructType(
    [
        T.StructField("station", T.StringType()),
        T.StructField("timestamp_utc", T.StringType()),
        T.StructField("ra_hours", T.DoubleType()),
        T.StructField("dec_deg", T.DoubleType()),
        T.StructField("vmag", T.DoubleType()),
        T.StructField("exposure_s", T.DoubleType()),
    ]
)
RADAR_FRAME_KEYS = frozenset(f.name for f in RADAR_FRAME.fields) | {VERSION_FIELD}
RADAR_DETECTION_KEYS = frozenset(f.name for f in RADAR_DETECTION.fields)
ISL_KEYS = ("src", "seq", "t_ms", "x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms")
