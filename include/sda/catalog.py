"""Loading orbital catalogues: two- and three-line TLE files and OMM (CSV, JSON, XML).

:func:`load_catalog` reads a file (format from its content) into :class:`CatalogEntry` objects with
an ``sgp4`` ``Satrec`` each; records that do not parse are returned separately with the reason, so
one bad record never stops a load. OMM records are converted to TLE lines with ``sgp4.exporter`` so
the gold catalogue keeps one representation.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
from pathlib import Path

from sgp4 import exporter, omm
from sgp4.api import WGS72, Satrec

from sda.frames import perigee_apogee_km

CELESTRAK_GP_URL = "https://celestrak.org/NORAD/elements/gp.php?GROUP={group}&FORMAT={fmt}"


@dataclasses.dataclass
class CatalogEntry:
    norad_id: int
    name: str
    line1: str
    line2: str
    satrec: Satrec

    @property
    def epoch(self) -> dt.datetime:
        return sat_epoch(self.satrec)

    @property
    def perigee_apogee_km(self) -> tuple[float, float]:
        return perigee_apogee_km(self.satrec)


@dataclasses.dataclass
class Rejected:
    where: str  # "line 12" or "record 3"
    reason: str
    text: str


def sat_epoch(satrec: Satrec) -> dt.datetime:
    return exporter.sat_epoch_datetime(satrec).astimezone(dt.timezone.utc)


def parse_tle_text(text: str) -> tuple[list[CatalogEntry], list[Rejected]]:
    """Two-line or three-line element sets (name lines with or without the ``0 `` prefix)."""
    entries: list[CatalogEntry] = []
    rejected: list[Rejected] = []
    lines = [ln.rstrip() for ln in text.splitlines()]
    name = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith("1 ") and i + 1 < len(lines) and lines[i + 1].startswith("2 "):
            l1, l2 = line, lines[i + 1]
            try:
                sat = Satrec.twoline2rv(l1, l2, WGS72)
                entries.append(CatalogEntry(sat.satnum, name or f"OBJECT {sat.satnum}", l1, l2, sat))
            except (ValueError, IndexError) as exc:
                rejected.append(Rejected(f"line {i + 1}", f"SGP4 cannot read this element set: {exc}", l1 + "\n" + l2))
            name = ""
            i += 2
            continue
        if line.startswith(("1 ", "2 ")):
            rejected.append(Rejected(f"line {i + 1}", "TLE line without its partner line", line))
            name = ""
            i += 1
            continue
        name = line[2:].strip() if line.startswith("0 ") else line.strip()
        i += 1
    return entries, rejected


def _from_omm_fields(fields: dict[str, str], where: str) -> CatalogEntry:
    sat = Satrec()
    omm.initialize(sat, fields)
    line1, line2 = exporter.export_tle(sat)
    sat2 = Satrec.twoline2rv(line1, line2, WGS72)
    return CatalogEntry(sat2.satnum, fields.get("OBJECT_NAME", "").strip() or f"OBJECT {sat2.satnum}", line1, line2, sat2)


def parse_omm_records(records: list[dict[str, str]]) -> tuple[list[CatalogEntry], list[Rejected]]:
    entries, rejected = [], []
    for n, fields in enumerate(records):
        fields = {k: str(v) for k, v in fields.items() if v is not None}
        try:
            entries.append(_from_omm_fields(fields, f"record {n}"))
        except (KeyError, ValueError) as exc:
            rejected.append(Rejected(f"record {n}", f"OMM record not usable: {exc!r}", json.dumps(fields)[:500]))
    return entries, rejected


def parse_text(text: str) -> tuple[list[CatalogEntry], list[Rejected]]:
    """Any supported format, recognised from the content."""
    head = text.lstrip()[:200]
    if head.startswith("<"):
        return parse_omm_records(list(omm.parse_xml(io.StringIO(text))))
    if head.startswith("[") or head.startswith("{"):
        data = json.loads(text)
        return parse_omm_records(data if isinstance(data, list) else [data])
    if head.startswith("OBJECT_NAME") or head.startswith("CCSDS_OMM_VERS,") or "NORAD_CAT_ID" in head.split("\n")[0]:
        return parse_omm_records(list(csv.DictReader(io.StringIO(text))))
    return parse_tle_text(text)


def load_catalog(path: str | Path) -> tuple[list[CatalogEntry], list[Rejected]]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"catalogue file {path} does not exist")
    return parse_text(path.read_text(encoding="utf-8", errors="replace"))


def latest_by_object(entries: list[CatalogEntry]) -> list[CatalogEntry]:
    """One entry per object: the newest epoch."""
    best: dict[int, CatalogEntry] = {}
    for entry in entries:
        have = best.get(entry.norad_id)
        if have is None or entry.satrec.jdsatepoch + entry.satrec.jdsatepochF > have.satrec.jdsatepoch + have.satrec.jdsatepochF:
            best[entry.norad_id] = entry
    return [best[k] for k in sorted(best)]


def fetch_celestrak(group: str = "active", fmt: str = "tle", timeout_s: float = 30.0) -> str:
    """Download a CelesTrak GP group (needs network; raises ``OSError`` offline)."""
    import urllib.request

    if not group.replace("-", "").isalnum() or fmt not in ("tle", "csv", "json", "xml"):
        raise ValueError(f"CelesTrak group {group!r} / format {fmt!r} not accepted")
    with urllib.request.urlopen(CELESTRAK_GP_URL.format(group=group, fmt=fmt), timeout=timeout_s) as resp:
        return resp.read().decode("utf-8")
