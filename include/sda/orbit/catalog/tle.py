"""Two- and three-line element sets (TLE) as they come from CelesTrak and Space-Track.

A leading byte-order mark, CRLF line ends, trailing blanks, name lines with or without the ``0 `` prefix,
and catalogue numbers (columns 3-7) zero-padded (``00005``), space-padded (Space-Track's unpadded
``    5``) or in Alpha-5 (``A0001`` = 100001 ... ``Z9999`` = 339999; the letters I and O are not used).
Lines are stored with the catalogue number in its canonical form (zero-padded, or Alpha-5): blanks and
zeros weigh the same in the TLE checksum, so the checksum of a stored line is the checksum of the line
as read.
"""

from __future__ import annotations

import re

from sgp4.api import WGS72, Satrec

from sda.orbit.catalog.entries import CatalogEntry, Rejected

TLE_LINE_LENGTH = 69


ALPHA5_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"  # A = 10 ... Z = 33: I and O are skipped (they look like 1 and 0)


MAX_TLE_CATALOG_NUMBER = 339999  # Alpha-5 "Z9999"; larger numbers exist only in OMM


_DIGITS_FIELD = re.compile(r" *[0-9]+")  # right-justified digits: "25544", "00005", "    5"


_ALPHA5_FIELD = re.compile(r"[A-HJ-NP-Z][0-9]{4}")


_EPOCH_FIELD = re.compile(r"[0-9 ]{2}[0-9 ]{3}\.[0-9 ]+")  # YYDDD.DDDDDDDD, columns 19-32


OBJECT_ID_FORMAT = re.compile(r"[0-9]{4}-[0-9]{3}[A-Z ]{0,3}")


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
