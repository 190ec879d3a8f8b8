"""Loading orbital catalogues: two- and three-line TLE files and OMM (CSV, JSON, XML).

:func:`load_catalog` reads a file (format from its content) into :class:`CatalogEntry` objects with
an ``sgp4`` ``Satrec`` each; records that do not parse are returned separately with the reason, so
one bad record never stops a load. OMM records are converted to TLE lines with ``sgp4.exporter`` so
the gold catalogue keeps one representation.

The formats: :mod:`.tle`, :mod:`.omm`.
"""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from sda.orbit.catalog.entries import CatalogEntry, Rejected
from sda.orbit.catalog.omm import omm_xml_records, parse_omm_records
from sda.orbit.catalog.tle import parse_tle_text


def parse_text(text: str) -> tuple[list[CatalogEntry], list[Rejected]]:
    """Any supported format, recognised from the content."""
    text = text.lstrip("\ufeff")
    head = text.lstrip()[:200]
    first_line = head.split("\n", 1)[0]
    if head.startswith("<"):
        try:
            records = omm_xml_records(text)
        except ET.ParseError as exc:
            return [], [Rejected("file", f"not well-formed XML: {exc}", text[:500])]
        if not records:
            return [], [Rejected("file", "XML without any OMM <segment>", text[:500])]
        return parse_omm_records(records)
    if head.startswith(("[", "{")):
        try:
            data = json.loads(text)
        except ValueError as exc:
            return [], [Rejected("file", f"not valid JSON: {exc}", text[:500])]
        return parse_omm_records(data if isinstance(data, list) else [data])
    if re.match(r"CCSDS_OMM_VERS\s*=", head):
        return [], [Rejected("file", "OMM in KVN (KEY = value) form is not supported: use CSV, JSON or XML",
                             text[:500])]
    if head.startswith("OBJECT_NAME") or head.startswith("CCSDS_OMM_VERS,") or "NORAD_CAT_ID" in first_line:
        return parse_omm_records(list(csv.DictReader(io.StringIO(text))))
    entries, rejected = parse_tle_text(text)
    if not entries and not rejected and text.strip():
        rejected.append(Rejected("file", "no element sets found: neither TLE lines ('1 ...' and '2 ...') "
                                         "nor OMM as CSV, JSON or XML", text[:500]))
    return entries, rejected


def load_catalog(path: str | Path) -> tuple[list[CatalogEntry], list[Rejected]]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"catalogue file {path} does not exist")
    return parse_text(path.read_text(encoding="utf-8-sig", errors="replace"))


def latest_by_object(entries: list[CatalogEntry]) -> list[CatalogEntry]:
    """One entry per object: the newest epoch."""
    best: dict[int, CatalogEntry] = {}
    for entry in entries:
        have = best.get(entry.norad_id)
        if have is None or (entry.satrec.jdsatepoch + entry.satrec.jdsatepochF
                            > have.satrec.jdsatepoch + have.satrec.jdsatepochF):
            best[entry.norad_id] = entry
    return [best[k] for k in sorted(best)]
