"""CCSDS OMM records (CSV, JSON, XML) as element sets: converted to TLE lines with ``sgp4.exporter``,
so the gold catalogue keeps one representation."""

from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from sgp4 import exporter, omm
from sgp4.api import WGS72, Satrec

from sda.orbit.catalog.entries import CatalogEntry, Rejected
from sda.orbit.catalog.tle import OBJECT_ID_FORMAT, encode_catalog_number

_DOY_EPOCH = re.compile(r"(\d{4})-(\d{3})T(\d{2}):(\d{2}):(\d{2}(?:\.\d+)?)Z?")


_OMM_DEFAULTS = {"CLASSIFICATION_TYPE": "U", "EPHEMERIS_TYPE": "0", "ELEMENT_SET_NO": "999", "REV_AT_EPOCH": "0"}


def _omm_epoch(text: str) -> str:
    """An OMM EPOCH (ISO calendar or day-of-year form, optional Z) -> sgp4's ``%Y-%m-%dT%H:%M:%S.%f``."""
    text = text.strip()
    doy = _DOY_EPOCH.fullmatch(text)
    if doy:
        year, day, hh, mm, ss = doy.groups()
        when = dt.datetime(int(year), 1, 1) + dt.timedelta(days=int(day) - 1, hours=int(hh), minutes=int(mm),
                                                          seconds=float(ss))
    else:
        try:
            when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"EPOCH {text!r} is not an ISO-8601 time") from None
        if when.tzinfo is not None:
            when = when.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")


def _from_omm_fields(fields: dict[str, str]) -> CatalogEntry:
    theory = fields.get("MEAN_ELEMENT_THEORY", "SGP4").strip().upper()
    if theory not in ("SGP4", ""):
        raise ValueError(f"MEAN_ELEMENT_THEORY is {theory!r}: only SGP4 mean elements can be used")
    fields = {**_OMM_DEFAULTS, **{k: v for k, v in fields.items() if v != ""}}
    norad_id = int(fields["NORAD_CAT_ID"])
    encode_catalog_number(norad_id)  # refuses numbers a TLE cannot hold
    fields["EPOCH"] = _omm_epoch(fields["EPOCH"])
    object_id = fields.get("OBJECT_ID", "").strip()
    fields["OBJECT_ID"] = object_id if OBJECT_ID_FORMAT.fullmatch(object_id) else ""
    sat = Satrec()
    omm.initialize(sat, fields)
    line1, line2 = exporter.export_tle(sat)
    sat2 = Satrec.twoline2rv(line1, line2, WGS72)
    if sat2.satnum != norad_id:
        raise ValueError(f"the TLE made from this record reads back as catalogue number {sat2.satnum}, not {norad_id}")
    return CatalogEntry(norad_id, fields.get("OBJECT_NAME", "").strip() or f"OBJECT {norad_id}", line1, line2, sat2)


def parse_omm_records(records: Sequence[object]) -> tuple[list[CatalogEntry], list[Rejected]]:
    entries, rejected = [], []
    for n, record in enumerate(records):
        if not isinstance(record, dict):
            rejected.append(Rejected(f"record {n}", "OMM record is not an object of fields", str(record)[:500]))
            continue
        fields = {str(k).strip(): str(v).strip() for k, v in record.items() if k is not None and v is not None}
        if not any(fields.values()):
            continue  # a blank CSV row
        try:
            entries.append(_from_omm_fields(fields))
        except KeyError as exc:
            rejected.append(Rejected(f"record {n}", f"OMM record lacks the field {exc.args[0]}",
                                     json.dumps(fields)[:500]))
        except ValueError as exc:
            rejected.append(Rejected(f"record {n}", f"OMM record not usable: {exc}", json.dumps(fields)[:500]))
    return entries, rejected


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def omm_xml_records(text: str) -> list[dict[str, str]]:
    """The fields of each ``<segment>`` of a CCSDS NDM/OMM XML document (``<ndm><omm>...`` as CelesTrak
    and Space-Track serve it, or a bare ``<omm>``; namespaced or not): metadata, mean elements and TLE
    parameters, by element name. ``ET.ParseError`` when the text is not well-formed XML."""
    root = ET.fromstring(text)
    records = []
    for segment in root.iter():
        if _local(segment.tag) != "segment":
            continue
        fields: dict[str, str] = {}
        for node in segment.iter():
            name = _local(node.tag)
            if len(node) == 0 and name not in ("COMMENT", "USER_DEFINED") and node.text is not None:
                fields.setdefault(name, node.text.strip())
        records.append(fields)
    return records
