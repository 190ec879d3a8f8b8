"""Loading orbital catalogues: two- and three-line TLE files and OMM (CSV, JSON, XML).

:func:`load_catalog` reads a file (format from its content) into :class:`CatalogEntry` objects with
an ``sgp4`` ``Satrec`` each; records that do not parse are returned separately with the reason, so
one bad record never stops a load. OMM records are converted to TLE lines with ``sgp4.exporter`` so
the gold catalogue keeps one representation.

TLE text is read as it comes from CelesTrak and Space-Track: a leading byte-order mark, CRLF line
ends, trailing blanks, name lines with or without the ``0 `` prefix, and catalogue numbers (columns
3-7) zero-padded (``00005``), space-padded (Space-Track's unpadded ``    5``) or in Alpha-5
(``A0001`` = 100001 ... ``Z9999`` = 339999; the letters I and O are not used). Lines are stored with
the catalogue number in its canonical form (zero-padded, or Alpha-5): blanks and zeros weigh the
same in the TLE checksum, so the checksum of a stored line is the checksum of the line as read.

:func:`propagation_health` finds, for each object, the first of a set of times at which SGP4 fails
(its error codes 1-6) so that callers can flag and skip that object instead of failing.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sgp4 import exporter, omm
from sgp4.api import WGS72, Satrec

from sda.orbit.frames import perigee_apogee_km, propagate

CELESTRAK_GP_URL = "https://celestrak.org/NORAD/elements/gp.php?GROUP={group}&FORMAT={fmt}"
CELESTRAK_GROUP_RE = re.compile(r"^[A-Za-z0-9-]{1,64}$")

TLE_LINE_LENGTH = 69
ALPHA5_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"  # A = 10 ... Z = 33: I and O are skipped (they look like 1 and 0)
MAX_TLE_CATALOG_NUMBER = 339999  # Alpha-5 "Z9999"; larger numbers exist only in OMM

_DIGITS_FIELD = re.compile(r" *[0-9]+")  # right-justified digits: "25544", "00005", "    5"
_ALPHA5_FIELD = re.compile(r"[A-HJ-NP-Z][0-9]{4}")
_EPOCH_FIELD = re.compile(r"[0-9 ]{2}[0-9 ]{3}\.[0-9 ]+")  # YYDDD.DDDDDDDD, columns 19-32
_OBJECT_ID = re.compile(r"[0-9]{4}-[0-9]{3}[A-Z ]{0,3}")
_DOY_EPOCH = re.compile(r"(\d{4})-(\d{3})T(\d{2}):(\d{2}):(\d{2}(?:\.\d+)?)Z?")

# SGP4's error codes (Vallado's SGP4.cpp; ``sgp4.api.SGP4_ERRORS`` words them for programmers).
SGP4_ERRORS = {
    1: "mean eccentricity out of range (not 0 <= e < 1)",
    2: "mean motion below zero",
    3: "perturbed eccentricity out of range (not 0 <= e <= 1)",
    4: "semi-latus rectum below zero",
    5: "epoch elements are sub-orbital (no longer raised by modern SGP4)",
    6: "satellite has decayed (orbit radius below one Earth radius)",
}


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
    where: str  # "line 12" (1-based), "record 3" (0-based) or "file"
    reason: str
    text: str


def sat_epoch(satrec: Satrec) -> dt.datetime:
    return exporter.sat_epoch_datetime(satrec).astimezone(dt.timezone.utc)


def sgp4_error_meaning(code: int) -> str:
    return SGP4_ERRORS.get(int(code), f"unknown SGP4 error {int(code)}")


# --- catalogue numbers --------------------------------------------------------------------------------

def decode_catalog_number(field: str) -> int:
    """Columns 3-7 of a TLE line -> the catalogue (NORAD) number.

    ``"25544"``, ``"00005"`` and Space-Track's unpadded ``"    5"`` are decimal; Alpha-5 is a letter
    for the ten-thousands from 10 (``A``) to 33 (``Z``), skipping I and O, then four digits:
    ``"A0001"`` = 100001, ``"T1234"`` = 271234, ``"Z9999"`` = 339999. Anything else is a ``ValueError``
    (``sgp4`` itself would read ``"I0001"`` as 180001, the number of ``"J0001"``, and ``"a0001"`` as 400001).
    """
    if len(field) != 5:
        raise ValueError(f"catalogue number field {field!r} is not 5 characters")
    if _DIGITS_FIELD.fullmatch(field):
        return int(field)
    if _ALPHA5_FIELD.fullmatch(field):
        return (ALPHA5_LETTERS.index(field[0]) + 10) * 10000 + int(field[1:])
    if field[0] in "IO" and field[1:].isascii() and field[1:].isdigit():
        raise ValueError(f"catalogue number {field!r} is not Alpha-5: the letters I and O are not used")
    raise ValueError(
        f"catalogue number {field!r} is neither 5 digits (zero- or space-padded) "
        "nor Alpha-5 (a capital letter other than I and O, then 4 digits)"
    )


def encode_catalog_number(number: int) -> str:
    """The canonical 5-character field: zero-padded below 100000, Alpha-5 up to 339999."""
    if 0 <= number <= 99999:
        return f"{number:05d}"
    if number <= MAX_TLE_CATALOG_NUMBER:
        high, low = divmod(number, 10000)
        return f"{ALPHA5_LETTERS[high - 10]}{low:04d}"
    raise ValueError(
        f"catalogue number {number} does not fit a TLE (Alpha-5 ends at {MAX_TLE_CATALOG_NUMBER}, 'Z9999')")


# --- TLE ------------------------------------------------------------------------------------------------

def _read_element_set(l1: str, l2: str) -> tuple[int, str, str, Satrec]:
    """Validate one pair of TLE lines; -> (norad_id, canonical line 1, canonical line 2, Satrec).

    ``ValueError`` with the reason when the pair is unusable. SGP4's own reader is lenient (it reads a
    truncated line, or two lines of different objects, without complaint), hence the checks first.
    """
    for number, line in ((1, l1), (2, l2)):
        if len(line) != TLE_LINE_LENGTH:
            raise ValueError(
                f"TLE line {number} has {len(line)} characters, not {TLE_LINE_LENGTH} "
                "(columns 1-68 and the checksum in column 69)"
            )
        if not line.isascii():
            raise ValueError(f"TLE line {number} has characters outside ASCII")
    n1 = decode_catalog_number(l1[2:7])
    n2 = decode_catalog_number(l2[2:7])
    if n1 != n2:
        raise ValueError(f"line 1 is catalogue number {n1} ({l1[2:7]!r}) but line 2 is {n2} ({l2[2:7]!r})")
    epoch_field = l1[18:32]
    if not _EPOCH_FIELD.fullmatch(epoch_field) or not 1.0 <= float(epoch_field[2:].replace(" ", "0")) < 367.0:
        raise ValueError(f"epoch field (columns 19-32) {epoch_field!r} is not YYDDD.DDDDDDDD with a day of year 1-366")
    field = encode_catalog_number(n1)
    c1, c2 = l1[:2] + field + l1[7:], l2[:2] + field + l2[7:]
    try:
        sat = Satrec.twoline2rv(c1, c2, WGS72)
    except (ValueError, IndexError) as exc:
        raise ValueError(f"SGP4 cannot read this element set: {exc}") from None
    if sat.satnum != n1:
        raise ValueError(f"SGP4 reads catalogue number {sat.satnum}, not {n1}")
    return n1, c1, c2, sat


def parse_tle_text(text: str) -> tuple[list[CatalogEntry], list[Rejected]]:
    """Two-line or three-line element sets (name lines with or without the ``0 `` prefix)."""
    entries: list[CatalogEntry] = []
    rejected: list[Rejected] = []
    lines = [ln.rstrip() for ln in text.lstrip("\ufeff").splitlines()]
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
                norad_id, c1, c2, sat = _read_element_set(l1, l2)
                entries.append(CatalogEntry(norad_id, name or f"OBJECT {norad_id}", c1, c2, sat))
            except ValueError as exc:
                rejected.append(Rejected(f"line {i + 1}", str(exc), l1 + "\n" + l2))
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


# --- OMM ------------------------------------------------------------------------------------------------

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
    fields["OBJECT_ID"] = object_id if _OBJECT_ID.fullmatch(object_id) else ""
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


# --- SGP4 health at given times -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PropagationHealth:
    """How one object fares with SGP4 over the times asked: ``error`` 0 when it propagates at all of
    them, else SGP4's code at the earliest failing time ``first_failure_unix``."""

    norad_id: int
    error: int
    first_failure_unix: float | None
    meaning: str

    @property
    def ok(self) -> bool:
        return self.error == 0

    @property
    def first_failure(self) -> dt.datetime | None:
        if self.first_failure_unix is None:
            return None
        return dt.datetime.fromtimestamp(self.first_failure_unix, dt.timezone.utc)


def propagation_health(objects: Sequence[CatalogEntry | Satrec], times_unix,
                       chunk_cells: int = 1_000_000) -> list[PropagationHealth]:
    """Per object (in the order given): the first of ``times_unix`` at which SGP4 fails, its error
    code and what the code means; ``error == 0`` (``ok``) when it never fails.

    ``objects`` are :class:`CatalogEntry` or ``Satrec``; ``times_unix`` (UTC unix seconds) is 1-D,
    shared by all objects, or 2-D with one row per object, as in :func:`sda.orbit.frames.propagate`.
    "First" is the earliest failing time, whatever the order of the times. SGP4 judges each time on
    its own and its failures are not monotonic (Vallado's 28872 is lost 50-55 min after its epoch yet
    propagates "fine" at 100 min), so treat an object as unusable from its first failure on, and use
    a grid fine enough for the question. Objects are propagated in chunks of about ``chunk_cells``
    (object x time) so that a whole catalogue fits in memory.
    """
    sats = [o.satrec if isinstance(o, CatalogEntry) else o for o in objects]
    ids = [int(o.norad_id) if isinstance(o, CatalogEntry) else int(o.satnum) for o in objects]
    times = np.asarray(times_unix, dtype=float)
    if times.ndim not in (1, 2) or (times.ndim == 2 and times.shape[0] != len(sats)):
        raise ValueError("times_unix must be 1-D, or 2-D with one row per object")
    n_times = times.shape[-1]
    out: list[PropagationHealth] = []
    if n_times == 0:
        return [PropagationHealth(i, 0, None, "ok") for i in ids]
    step = max(1, chunk_cells // n_times)
    for lo in range(0, len(sats), step):
        chunk = slice(lo, lo + step)
        chunk_times = times if times.ndim == 1 else times[chunk]
        err, _, _ = propagate(sats[chunk], chunk_times)
        for k, row in enumerate(err):
            row_times = chunk_times if chunk_times.ndim == 1 else chunk_times[k]
            failing = np.flatnonzero(row != 0)
            if failing.size == 0:
                out.append(PropagationHealth(ids[lo + k], 0, None, "ok"))
                continue
            first = failing[np.argmin(row_times[failing])]
            code = int(row[first])
            out.append(PropagationHealth(ids[lo + k], code, float(row_times[first]), sgp4_error_meaning(code)))
    return out


# --- CelesTrak ------------------------------------------------------------------------------------------

class CelesTrakError(OSError):
    """CelesTrak could not be reached or did not answer; the message names the URL."""


def check_celestrak_group(group: str) -> str:
    """A CelesTrak GP group name (``active``, ``cosmos-2251-debris``, ...): ASCII letters, digits and ``-``."""
    if not isinstance(group, str) or not CELESTRAK_GROUP_RE.fullmatch(group):
        raise ValueError(f"CelesTrak group {group!r}: use 1-64 characters from letters, digits and '-'")
    return group


def celestrak_url(group: str, fmt: str = "tle") -> str:
    check_celestrak_group(group)
    if fmt not in ("tle", "3le", "csv", "json", "xml"):
        raise ValueError(f"CelesTrak format {fmt!r} not accepted (tle, 3le, csv, json, xml)")
    return CELESTRAK_GP_URL.format(group=group, fmt=fmt)


def fetch_celestrak(group: str = "active", fmt: str = "tle", timeout_s: float = 30.0) -> str:
    """Download a CelesTrak GP group (needs network). Offline, or on an HTTP error, raises
    :class:`CelesTrakError` (an ``OSError``) naming the URL and the underlying error."""
    import urllib.request

    url = celestrak_url(group, fmt)
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.read().decode("utf-8", errors="replace")
    except OSError as exc:
        raise CelesTrakError(f"cannot fetch {url}: {exc}") from exc
