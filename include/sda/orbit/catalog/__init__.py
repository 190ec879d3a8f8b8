"""Element sets in: catalogue files read (:mod:`.load`; the formats :mod:`.tle` and :mod:`.omm`, the records
:mod:`.entries`), SGP4 health at given times (:mod:`.health`), a current catalogue fetched from CelesTrak
(:mod:`.celestrak`), and an offline synthetic catalogue (:mod:`.synthetic`). The names other packages use
are re-exported here."""

from sda.orbit.catalog.celestrak import (
    CELESTRAK_GP_URL,
    CELESTRAK_GROUP_RE,
    CelesTrakError,
    celestrak_url,
    check_celestrak_group,
    fetch_celestrak,
)
from sda.orbit.catalog.entries import (
    CatalogEntry,
    Rejected,
    sat_epoch,
)
from sda.orbit.catalog.health import (
    SGP4_ERRORS,
    PropagationHealth,
    propagation_health,
    sgp4_error_meaning,
)
from sda.orbit.catalog.load import (
    latest_by_object,
    load_catalog,
    parse_text,
)
from sda.orbit.catalog.omm import (
    omm_xml_records,
    parse_omm_records,
)
from sda.orbit.catalog.tle import (
    ALPHA5_LETTERS,
    MAX_TLE_CATALOG_NUMBER,
    OBJECT_ID_FORMAT,
    TLE_LINE_LENGTH,
    decode_catalog_number,
    encode_catalog_number,
    parse_tle_text,
)

__all__ = [
    "CatalogEntry",
    "Rejected",
    "sat_epoch",
    "TLE_LINE_LENGTH",
    "ALPHA5_LETTERS",
    "MAX_TLE_CATALOG_NUMBER",
    "OBJECT_ID_FORMAT",
    "decode_catalog_number",
    "encode_catalog_number",
    "parse_tle_text",
    "parse_omm_records",
    "omm_xml_records",
    "parse_text",
    "load_catalog",
    "latest_by_object",
    "SGP4_ERRORS",
    "sgp4_error_meaning",
    "PropagationHealth",
    "propagation_health",
    "CELESTRAK_GP_URL",
    "CELESTRAK_GROUP_RE",
    "CelesTrakError",
    "check_celestrak_group",
    "celestrak_url",
    "fetch_celestrak",
]
