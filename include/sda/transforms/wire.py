"""The three sensor wire formats (see :mod:`sda.lake.wire_formats`): checking records and parsing them.

Two halves that must agree, kept side by side so they do:

* :func:`file_records` / :func:`check_record` -- plain Python, used by ingest on the driver: split a
  landed file into records and say, per record, why it cannot be accepted (a specific reason) or
  that it can. Only records passing here reach bronze.
* :func:`parse_bronze` -- Spark built-ins, used by normalize: turn bronze payloads into one row per
  measurement with the wire values (still in wire units) and a ``parse_error`` column. For a record
  that passed :func:`check_record` the error is always null; it stays as a guard for bronze rows
  written by anything else.

Numbers are checked with a strict decimal pattern rather than Python's ``float()``, which would also
accept ``nan``, ``inf``, ``1_000`` and surrounding blanks -- text Spark's casts treat differently.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
from typing import TYPE_CHECKING

from sda.lake import wire_formats
from sda.transforms import versions

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

NUMBER_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
INTEGER_RE = re.compile(r"^[+-]?\d{1,18}$")
# ISO-8601 instants as the sensors send them; a missing zone means UTC (the session time zone).
INSTANT_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})?$")

RADAR_REQUIRED = ("t", "range_km", "az_deg", "el_deg", "rr_km_s")
OPTICAL_COLUMNS = tuple(wire_formats.OPTICAL_HEADER.split(","))
OPTICAL_REQUIRED = ("station", "timestamp_utc", "ra_hours", "dec_deg")
ISL_INTEGERS = ("seq", "t_ms")
ISL_FLOATS = ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms")
ISL_PREFIX = "BCN|"

# The wire values every parsed measurement carries (wire units; null where the kind has none).
MEASUREMENT_COLUMNS = (
    "range_km", "az_deg", "el_deg", "rr_km_s",
    "ra_hours", "dec_deg",
    "x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms",
)


# --- ingest: records of a landed file -------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Record:
    record_no: int  # 0-based line number in the file
    raw: bytes  # the line as landed, without its line ending
    text: str | None  # decoded payload when accepted
    reason: str | None  # why it is quarantined, None when accepted
    ident: str | None = None  # what identifies the record in its file when the line alone does not (TDM XML)
    lenient: str | None = None  # what of its file was read leniently, not as the standard writes it (TDM)
    version: str | None = None  # the sensor wire format's version it was read as (sda.transforms.versions)
    extras: dict[str, str] | None = None  # its fields that version 1.0 does not have, by name (kept in bronze)


def split_lines(data: bytes) -> list[tuple[int, bytes]]:
    """(line number, bytes) for each line, without line endings; blank trailing lines are dropped
    (a final newline, or an editor's extra empty lines, are not records)."""
    lines = data.split(b"\n")
    lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    while lines and not lines[-1].strip():
        lines.pop()
    return list(enumerate(lines))


def file_records(kind: str, data: bytes) -> list[Record]:
    """Every record of a landed file, accepted or with the reason it is not.

    Optical archives start with a header line that is not a record (after a ``#version=`` line, also not a
    record, when the file declares its version); when the header is not one of its version's
    (:func:`versions.optical_columns`) the columns cannot be trusted, so every line (the first included: it
    may be data from a header-less file) is refused. A file with a record of a major version this reader
    does not read is refused whole: one record, all its bytes, at that record's line
    (:class:`versions.UnknownMajor`).
    """
    if kind == "tdm":
        return _tdm_records(data)
    lines = split_lines(data)
    try:
        return _optical_records(lines) if kind == "optical" else [_line_record(kind, no, raw) for no, raw in lines]
    except versions.UnknownMajor as exc:
        return [Record(exc.record_no or 0, data, None, str(exc))]


def _line_record(kind: str, no: int, raw: bytes, columns: tuple[str, ...] = OPTICAL_COLUMNS,
                 version: str = versions.UNVERSIONED) -> Record:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Record(no, raw, None, "not valid UTF-8")
    try:
        reason, version, extras = read_record(kind, text, columns, version)
    except versions.UnknownMajor as exc:
        raise exc.at(no) from None
    return Record(no, raw, text if reason is None else None, reason, version=version if reason is None else None,
                  extras=extras if reason is None else None)


def _optical_records(lines: list[tuple[int, bytes]]) -> list[Record]:
    """An optical file's rows: its version line (optional) and header first, neither of them a record."""
    head = [raw.removeprefix(b"\xef\xbb\xbf") for _, raw in lines[:2]]  # a BOM is an encoding artefact
    version, body, reason = versions.UNVERSIONED, lines, None
    if head and head[0].startswith(wire_formats.OPTICAL_VERSION_PREFIX.encode()):
        declared = head[0][len(wire_formats.OPTICAL_VERSION_PREFIX):].decode("utf-8", "replace").strip()
        try:
            version, reason = versions.read_version("optical", declared)
        except versions.UnknownMajor as exc:
            raise exc.at(0) from None
        body, head = lines[1:], head[1:]
    columns: tuple[str, ...] | None = OPTICAL_COLUMNS
    if reason is None and body:
        columns, reason = versions.optical_columns(version, head[0].decode("utf-8", "replace"), OPTICAL_COLUMNS)
    if reason is not None:
        return [Record(no, raw, None, reason) for no, raw in lines]
    return [_line_record("optical", no, raw, columns, version) for no, raw in body[1:]]


def _tdm_records(data: bytes) -> list[Record]:
    """A TDM file's measurements (:mod:`sda.transforms.tdm_read`), each saying what of the file was read
    leniently; a refused file is one record: all its bytes, at the line the reason names."""
    from sda.transforms import tdm_read

    records, refused, lenient = tdm_read.read(data)
    if refused:
        return [Record(refused[1], data, None, refused[0])]
    return [Record(no, b"", payload, None, ident, lenient) for no, ident, payload in records]


def check_record(kind: str, text: str) -> str | None:
    """Why ``text`` is not an acceptable ``kind`` record (an optical row of version 1.0's columns), or None
    when it is."""
    return read_record(kind, text)[0]


def read_record(kind: str, text: str, columns: tuple[str, ...] = OPTICAL_COLUMNS,
                version: str = versions.UNVERSIONED) -> tuple[str | None, str | None, dict[str, str] | None]:
    """(why ``text`` is not an acceptable ``kind`` record or None, the version it is read as, its fields that
    version 1.0 does not have). An optical row has its file's ``columns`` and ``version``; radar frames and
    beacons declare their own. Raises :class:`versions.UnknownMajor` for a record of another major version."""
    if not text.strip():
        return "blank line", None, None
    if kind == "radar":
        return _read_radar(text)
    if kind == "isl":
        return _read_isl(text)
    return _check_optical(text, columns), version, _optical_extras(text, columns)


def _optical_extras(text: str, columns: tuple[str, ...]) -> dict[str, str] | None:
    if len(columns) == len(OPTICAL_COLUMNS):
        return None
    return dict(zip(columns[len(OPTICAL_COLUMNS):], text.split(",")[len(OPTICAL_COLUMNS):]))


def _check_instant(name: str, value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return f"missing field {name}" if value in (None, "") else f"field {name} is not a time"
    if not INSTANT_RE.match(value):
        return f"field {name} is not an ISO-8601 time"
    # the pattern allows e.g. month 13; fromisoformat knows the calendar (microseconds at most)
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", value).replace("Z", "+00:00")
    try:
        dt.datetime.fromisoformat(trimmed)
    except ValueError:
        return f"field {name} is not an ISO-8601 time"
    return None


def _check_json_number(name: str, value: object, where: str = "") -> str | None:
    if value is None:
        return f"missing field {name}{where}"
    # bool is an int subclass in Python but not a number on the wire
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"field {name} is not a number{where}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"field {name} is not a finite number{where}"
    return None


def _read_radar(text: str) -> tuple[str | None, str | None, dict[str, str] | None]:
    try:
        frame = json.loads(text, parse_constant=lambda c: float(c))
    except ValueError:
        return "invalid JSON", None, None
    if not isinstance(frame, dict):
        return "JSON record is not an object", None, None
    version, reason = versions.read_version("radar", frame.get(wire_formats.VERSION_FIELD))
    reason = reason or _check_radar(frame)
    return reason, version, versions.radar_extras(frame) if reason is None else None


def _check_radar(frame: dict) -> str | None:
    sensor = frame.get("sensor")
    if sensor is None or sensor == "":
        return "missing field sensor"
    if not isinstance(sensor, str):
        return "field sensor is not a string"
    number = frame.get("frame")
    if number is None:
        return "missing field frame"
    if isinstance(number, bool) or not isinstance(number, int) or not -(2**63) <= number < 2**63:
        return "field frame is not an integer"
    dets = frame.get("dets")
    if dets is None:
        return "missing field dets"
    if not isinstance(dets, list):
        return "field dets is not a list"
    # A frame is one bronze record: a malformed detection refuses the whole line here. Detections
    # that are well-formed but physically impossible are refused one by one in normalize.
    for i, det in enumerate(dets):
        where = f" (detection {i})"
        if not isinstance(det, dict):
            return f"detection {i} is not an object"
        reason = _check_instant("t", det.get("t"))
        if reason:
            return reason + where
        for name in RADAR_REQUIRED[1:]:
            reason = _check_json_number(name, det.get(name), where)
            if reason:
                return reason
        if det.get("snr_db") is not None:
            reason = _check_json_number("snr_db", det.get("snr_db"), where)
            if reason:
                return reason
    return None


def _check_optical(text: str, columns: tuple[str, ...] = OPTICAL_COLUMNS) -> str | None:
    # No quoting in this format (station ids have no commas), and Spark splits it the same way.
    fields = text.split(",")
    if len(fields) != len(columns):
        return f"expected {len(columns)} CSV columns, found {len(fields)}"
    row = dict(zip(OPTICAL_COLUMNS, fields))
    if not row["station"]:
        return "missing field station"
    reason = _check_instant("timestamp_utc", row["timestamp_utc"])
    if reason:
        return reason
    for name in OPTICAL_COLUMNS[2:]:
        value = row[name]
        if not value:
            if name in OPTICAL_REQUIRED:
                return f"missing field {name}"
            continue
        if not NUMBER_RE.match(value):
            return f"field {name} is not a number"
    return None


def _read_isl(text: str) -> tuple[str | None, str | None, dict[str, str] | None]:
    if not text.startswith(ISL_PREFIX):
        return "not a BCN message", None, None
    pairs: dict[str, str] = {}
    for part in text[len(ISL_PREFIX):].split("|"):
        key, sep, value = part.partition("=")
        if not sep or not key:
            return f"malformed key=value pair {part[:40]!r}", None, None
        if key in pairs:
            return f"duplicate key {key}", None, None
        pairs[key] = value
    version, reason = versions.read_version("isl", pairs.get(wire_formats.VERSION_FIELD))
    reason = reason or _check_isl(pairs)
    return reason, version, versions.isl_extras(pairs) if reason is None else None


def _check_isl(pairs: dict[str, str]) -> str | None:
    for key in wire_formats.ISL_KEYS:
        if not pairs.get(key):
            return f"missing field {key}"
    if "=" in "".join(pairs.values()):
        return "malformed key=value pair"
    for key in ISL_INTEGERS:
        if not INTEGER_RE.match(pairs[key]):
            return f"field {key} is not an integer"
    for key in ISL_FLOATS:
        if not NUMBER_RE.match(pairs[key]):
            return f"field {key} is not a number"
    return None


# --- normalize: bronze payloads -> one row per measurement (Spark) ---------------------------------

def _first_error(checks: list[tuple["Column", str]]) -> "Column":
    """The message of the first failing check, null when all pass."""
    from pyspark.sql import functions as F

    out = F.lit(None).cast("string")
    for failed, message in reversed(checks):
        out = F.when(failed, F.lit(message)).otherwise(out)
    return out


def _num(text: "Column") -> "Column":
    # try_cast: a bad value becomes null (reported by parse_error) instead of failing the job (ANSI)
    return text.try_cast("double")


def _lineage(df: "DataFrame") -> list["Column"]:
    from pyspark.sql import functions as F

    return [F.col(c) for c in ("bronze_id", "sensor_kind", "source_file", "record_no", "payload", "ingest_time",
                               "ingest_batch")]


def _contract(df: "DataFrame") -> "DataFrame":
    """The parsed-record contract shared by the three kinds."""
    from pyspark.sql import functions as F

    for name in MEASUREMENT_COLUMNS:
        if name not in df.columns:
            df = df.withColumn(name, F.lit(None).cast("double"))
    return df.select(
        "bronze_id", "sensor_kind", "source_file", "record_no", F.col("item_no").cast("long").alias("item_no"),
        "payload", "ingest_time", "ingest_batch", "sensor_id", "event_time", *MEASUREMENT_COLUMNS, "parse_error",
    )


def parse_radar(bronze: "DataFrame") -> "DataFrame":
    """One row per detection; a frame that does not parse at all gives one row with item_no null.

    The JSON is parsed once: a broken frame's ``dets`` is made null, so ``posexplode_outer`` gives it
    its one row (item_no null), while a frame with no detections (``[]``, not broken) gives none."""
    from pyspark.sql import functions as F

    frames = bronze.select(*_lineage(bronze), F.from_json("payload", wire_formats.RADAR_FRAME).alias("f"))
    broken = F.col("f").isNull() | F.col("f.sensor").isNull() | F.col("f.dets").isNull()
    dets = frames.select(
        *_lineage(frames), broken.alias("broken"), F.col("f.sensor").alias("sensor_id"),
        F.posexplode_outer(F.when(~broken, F.col("f.dets"))).alias("item_no", "d"),
    ).where(F.col("broken") | F.col("item_no").isNotNull())
    dets = dets.select(
        *_lineage(dets), "item_no", "sensor_id", "broken",
        F.col("d.t").try_cast("timestamp").alias("event_time"),
        *[F.col(f"d.{c}").alias(c) for c in ("range_km", "az_deg", "el_deg", "rr_km_s")],
    )
    checks = [(F.col("broken"), "unparseable radar frame"),
              (F.col("event_time").isNull(), "missing or unparseable detection time")]
    checks += [(F.col(c).isNull(), f"missing or non-numeric field {c}") for c in RADAR_REQUIRED[1:]]
    return _contract(dets.withColumn("parse_error", _first_error(checks)))


def parse_optical(bronze: "DataFrame") -> "DataFrame":
    from pyspark.sql import functions as F

    cols = F.split(F.col("payload"), ",", -1)
    # a newer minor version's added columns follow version 1.0's (ingest checked them against the header)
    added = F.when(F.col("extra_fields").isNull(), 0).otherwise(F.size("extra_fields"))
    rows = bronze.select(
        *_lineage(bronze),
        (F.size(cols) - added).alias("n_cols"),
        F.lit(None).cast("long").alias("item_no"),
        F.nullif(F.get(cols, 0), F.lit("")).alias("sensor_id"),
        F.get(cols, 1).try_cast("timestamp").alias("event_time"),
        _num(F.get(cols, 2)).alias("ra_hours"),
        _num(F.get(cols, 3)).alias("dec_deg"),
    )
    checks = [
        (F.col("n_cols") != len(OPTICAL_COLUMNS), "unparseable optical row"),
        (F.col("sensor_id").isNull(), "missing field station"),
        (F.col("event_time").isNull(), "missing or unparseable timestamp_utc"),
        (F.col("ra_hours").isNull(), "missing or non-numeric field ra_hours"),
        (F.col("dec_deg").isNull(), "missing or non-numeric field dec_deg"),
    ]
    return _contract(rows.withColumn("parse_error", _first_error(checks)))


def parse_isl(bronze: "DataFrame") -> "DataFrame":
    from pyspark.sql import functions as F

    well_formed = F.col("payload").rlike(r"^BCN(\|[^|=]+=[^|=]*)+$")
    # str_to_map only sees well-formed payloads: a duplicate key would fail the job (ANSI), and the
    # ingest check already refused those
    pairs = F.when(well_formed, F.expr(r"str_to_map(substr(payload, 5), '[|]', '=')"))
    rows = bronze.select(*_lineage(bronze), pairs.alias("m"))
    rows = rows.select(
        *_lineage(rows),
        F.lit(None).cast("long").alias("item_no"),
        F.nullif(F.col("m")["src"], F.lit("")).alias("sensor_id"),
        F.timestamp_millis(F.col("m")["t_ms"].try_cast("long")).alias("event_time"),
        *[_num(F.col("m")[c]).alias(c) for c in ISL_FLOATS],
        F.col("m").isNull().alias("malformed"),
    )
    checks = [
        (F.col("malformed"), "unparseable BCN message"),
        (F.col("sensor_id").isNull(), "missing field src"),
        (F.col("event_time").isNull(), "missing or non-integer field t_ms"),
    ]
    checks += [(F.col(c).isNull(), f"missing or non-numeric field {c}") for c in ISL_FLOATS]
    return _contract(rows.withColumn("parse_error", _first_error(checks)))


def parse_tdm(bronze: "DataFrame", objects: dict[str, int | None] | None = None,
              light_time: bool = False) -> "DataFrame":
    from sda.transforms import tdm

    return _contract(tdm.parse(bronze, objects, light_time))


PARSERS = {"radar": parse_radar, "optical": parse_optical, "isl": parse_isl, "tdm": parse_tdm}


def parse_bronze(bronze: "DataFrame", kind: str, objects: dict[str, int | None] | None = None,
                 light_time: bool = False) -> "DataFrame":
    """Bronze rows of one kind -> one row per measurement: lineage, ``item_no`` (detection index in a
    radar frame, else null), ``sensor_id``, ``event_time``, the wire values, ``parse_error``.
    ``objects``: the catalogue names a TDM may give its tracked object by
    (:func:`sda.transforms.tdm.object_aliases`); ``light_time``: the TDM event times as the models take them
    (:mod:`sda.transforms.tdm`)."""
    return parse_tdm(bronze, objects, light_time) if kind == "tdm" else PARSERS[kind](bronze)
