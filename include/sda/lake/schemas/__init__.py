"""Schemas, declared once: every table's columns, one module per layer of the lakehouse, as the table registry
(:mod:`sda.lake.tables`) places the tables -- :mod:`.bronze` (the records as landed, the landing kinds),
:mod:`.silver` (the observation envelope, the space weather), :mod:`.gold` (what the stages derive per object
and pair) and :mod:`.ops` (the pipeline's bookkeeping).

Units inside the pipeline are SI (metres, m/s, radians) from silver onwards. The names are re-exported here:
``from sda.lake import schemas`` then ``schemas.OBSERVATION``.
"""

from sda.lake.schemas.bronze import BRONZE, LANDING_KINDS, LANDING_SUFFIX, SENSOR_KINDS
from sda.lake.schemas.gold import (
    ALERT,
    ALERT_EVENTS,
    CATALOG,
    CONJUNCTION,
    CORRELATED,
    FUSED_ORBITS,
    MANOEUVRES,
    MEASUREMENT_RESIDUALS,
    OBJECT_STATE,
    PASSES,
    PROVISIONAL_OBJECTS,
    REASSOCIATIONS,
    SENSOR_CALIBRATIONS,
    UDF_FIELDS,
    UNCORRELATED,
)
from sda.lake.schemas.ops import (
    DATA_QUALITY,
    INGESTED_FILES,
    LATE_DATA,
    PROGRESS,
    PROPAGATION_ERRORS,
    QUARANTINE,
    RUN_METRICS,
    SCREENING_EVENTS,
    SCREENING_STATE,
    WATERMARKS,
)
from sda.lake.schemas.silver import DEDUPED, OBSERVATION, SPACE_WEATHER

__all__ = [
    "SENSOR_KINDS", "LANDING_KINDS", "LANDING_SUFFIX", "BRONZE",
    "OBSERVATION", "DEDUPED", "SPACE_WEATHER",
    "CATALOG", "MEASUREMENT_RESIDUALS", "CORRELATED", "UNCORRELATED", "OBJECT_STATE", "PASSES", "FUSED_ORBITS",
    "SENSOR_CALIBRATIONS", "UDF_FIELDS", "MANOEUVRES", "PROVISIONAL_OBJECTS", "REASSOCIATIONS", "CONJUNCTION", "ALERT",
    "ALERT_EVENTS",
    "PROGRESS", "INGESTED_FILES", "QUARANTINE", "WATERMARKS", "LATE_DATA", "PROPAGATION_ERRORS", "SCREENING_STATE",
    "SCREENING_EVENTS", "RUN_METRICS", "DATA_QUALITY",
]
