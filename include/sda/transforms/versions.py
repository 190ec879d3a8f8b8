"""The sensor wire formats' versions (:mod:`sda.lake.wire_formats`): reading a record's or file's declared
version, and the fields a newer minor version adds.

A version is ``MAJOR.MINOR``. What is compatible:

* no version: version 1.0 (files written before the formats had versions);
* ``1.x``: read; the fields version 1.0 does not know are kept in bronze's ``extra_fields``, by name, and are
  not carried into silver;
* another major version: the file is quarantined whole (:class:`UnknownMajor`), with a reason naming the
  version: its records may not mean what version 1's readers would take them to mean.
"""

from __future__ import annotations

import json
import re

from sda.lake import wire_formats

VERSION_RE = re.compile(r"^(\d{1,6})\.(\d{1,6})$")
UNVERSIONED = "1.0"


class UnknownMajor(ValueError):
    """A record of a major version this reader does not read: its whole file is refused."""

    def __init__(self, kind: str, version: str, record_no: int | None = None) -> None:
        self.kind, self.version, self.record_no = kind, version, record_no
        super().__init__(f"{kind} format version {version} is not read here (this reader reads version "
                         f"{wire_formats.READ_MAJOR}.x): the whole file is quarantined")

    def at(self, record_no: int) -> "UnknownMajor":
        return UnknownMajor(self.kind, self.version, record_no)


def read_version(kind: str, value: object) -> tuple[str | None, str | None]:
    """(the version ``value`` declares, why it is refused): version 1.0 when nothing is declared; raises
    :class:`UnknownMajor` for a well-formed version of another major."""
    if value is None:
        return UNVERSIONED, None
    match = VERSION_RE.match(value) if isinstance(value, str) else None
    if match is None:
        return None, f"field {wire_formats.VERSION_FIELD} is not a MAJOR.MINOR version"
    if int(match.group(1)) != wire_formats.READ_MAJOR:
        raise UnknownMajor(kind, value)
    return value, None


def minor(version: str) -> int:
    return int(version.split(".")[1])


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def radar_extras(frame: dict) -> dict[str, str] | None:
    """A radar frame's keys, and its detections' (``dets.<i>.<key>``), that version 1.0 does not have: JSON
    text (a string as it is). None when there are none."""
    out = {k: _text(v) for k, v in frame.items() if k not in wire_formats.RADAR_FRAME_KEYS}
    for i, det in enumerate(frame.get("dets") or ()):
        out.update({f"dets.{i}.{k}": _text(v) for k, v in det.items() if k not in wire_formats.RADAR_DETECTION_KEYS})
    return out or None


def isl_extras(pairs: dict[str, str]) -> dict[str, str] | None:
    """A beacon's pairs that version 1.0 does not have (the version itself aside). None when there are none."""
    known = set(wire_formats.ISL_KEYS) | {wire_formats.VERSION_FIELD}
    return {k: v for k, v in pairs.items() if k not in known} or None


def optical_columns(version: str, header: str, v1: tuple[str, ...]) -> tuple[tuple[str, ...] | None, str | None]:
    """(the file's columns, why its header is refused): version 1.0 has exactly ``v1``; a newer minor version
    may add columns after them (named, each once)."""
    columns = tuple(header.split(","))
    if columns == v1:
        return columns, None
    if minor(version) == 0 or columns[:len(v1)] != v1:
        return None, "unexpected CSV header"
    added = columns[len(v1):]
    if any(not name.strip() for name in added) or len(set(columns)) != len(columns):
        return None, f"unexpected CSV header: the columns version {version} adds must be named, each once"
    return columns, None
