"""CelesTrak's CSSI space-weather files (the format of SW-Last5Years.txt and SW-All.txt): text -> one row per
3-hour interval, and a reason for every line that cannot be taken.

    DATATYPE CssiSpaceWeather
    VERSION 1.2
    UPDATED 2026 Nov 21 09:00:00 UTC
    # comments
    NUM_OBSERVED_POINTS 2
    BEGIN OBSERVED
    2026 11 19 2636  7 13 13 13 13 13 13 13 13 104   5   5 ...   5 0.2 1  78 110.0 0 111.0 107.6 112.9 113.7 108.2
    ...
    END OBSERVED
    (NUM_DAILY_PREDICTED_POINTS, BEGIN DAILY_PREDICTED ... END DAILY_PREDICTED, and MONTHLY_PREDICTED alike)

A daily line is FORMAT(I4,I3,I3,I5,I3,8I3,I4,8I4,I4,F4.1,I2,I4,F6.1,I2,5F6.1): year, month, day, Bartels
rotation and day in it, eight 3-hourly Kp x 10 (thirds rounded: 13 is 1+ = 4/3, 17 is 2- = 5/3), their sum,
eight 3-hourly ap, the daily Ap, Cp, C9, the sunspot number, F10.7 adjusted to 1 AU, the flux qualifier Q
(blank in predicted lines), the adjusted flux's 81-day centred and last averages, then F10.7 observed and its
two averages. No field is wider than its digits, so the fields are read as blank-separated words: 33 per
line, 32 when Q is blank. A monthly predicted line has no Kp, ap, Cp or C9 (blanks): 13 words, or 12. It is
checked and kept in bronze, and gives no interval.

**Observed or forecast.** A 3-hour value whose interval (the day + 3 h x i, for 3 h) had ended at or
before the file's ``UPDATED`` time is an observation; every other one (the later intervals of the issue
day, whose line is in DAILY_PREDICTED, and all later days) is a forecast. A storm therefore shows up only in
the files issued after its onset: an earlier file forecasts those intervals quiet.

**What is refused**, line by line (``CSSI line N: why``, N counted from 1 as an editor does; the file's
other lines are taken): a data line with the wrong number of fields, a field that is not a number, an
impossible date, a Kp outside 0-90 (0-9), an ap or Ap outside 0-400, a negative flux, a day given twice in
one file (the later line; the monthly section apart), every data line of a file without a readable
``UPDATED`` time (what is observed cannot be told), a ``DATATYPE`` other than ``CssiSpaceWeather``, a
``NUM_..._POINTS`` line its section does not agree with, a line outside a section that is no header
keyword, and a line that is not UTF-8. Blank lines, ``#`` comments (anywhere), blanks around a line, CRLF
line ends and a byte-order mark are what real files hold, and are taken.

Plain Python on the driver, no Spark session: ingest calls :func:`parse`, and :func:`interval_table` gives its rows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from sda.lake import schemas
from sda.transforms.wire import Record, split_lines

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

DATATYPE = "CssiSpaceWeather"
DAILY_SECTIONS = ("OBSERVED", "DAILY_PREDICTED")
SECTIONS = (*DAILY_SECTIONS, "MONTHLY_PREDICTED")
SLOT = dt.timedelta(hours=3)
KP_X10_MAX, AP_MAX = 90, 400

_KP = tuple(f"kp{i}" for i in range(1, 9))
_AP = tuple(f"ap{i}" for i in range(1, 9))
_FLUX = ("f107_adj", "q", "f107_adj_ctr81", "f107_adj_lst81", "f107_obs", "f107_obs_ctr81", "f107_obs_lst81")
DAILY_FIELDS = ("year", "month", "day", "bsrn", "nd", *_KP, "kp_sum", *_AP, "ap_daily", "cp", "c9", "isn", *_FLUX)
MONTHLY_FIELDS = ("year", "month", "day", "bsrn", "nd", "isn", *_FLUX)
FLOAT_FIELDS = frozenset({"cp", "f107_adj", "f107_adj_ctr81", "f107_adj_lst81", "f107_obs", "f107_obs_ctr81",
                          "f107_obs_lst81"})
FLUX_FIELDS = tuple(sorted(FLOAT_FIELDS - {"cp"}))

INTEGER_RE = re.compile(r"^[+-]?\d{1,9}$")
DECIMAL_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
UPDATED_RE = re.compile(r"^UPDATED\s+(\d{4})\s+([A-Za-z]{3})\s+(\d{1,2})\s+(\d{1,2}):(\d{2}):(\d{2})(\s+UTC)?$")
NUM_RE = re.compile(r"^NUM_([A-Z_]+)_POINTS\s+(\S+)$")
KEYWORDS = ("DATATYPE", "VERSION", "UPDATED", "NUM_", "BEGIN", "END")


@dataclasses.dataclass(frozen=True)
class Interval:
    """One 3-hour interval of a daily line: its Kp and ap, and the day's flux."""

    start: dt.datetime  # aware UTC
    kp_x10: int  # as written
    ap: int
    ap_daily: int
    flux: dict[str, float]  # FLUX_FIELDS
    observed: bool
    issued: dt.datetime
    section: str
    record_no: int  # the line's, 0-based

    @property
    def end(self) -> dt.datetime:
        return self.start + SLOT

    @property
    def kp(self) -> float:
        return kp_value(self.kp_x10)


@dataclasses.dataclass(frozen=True)
class CssiFile:
    records: list[Record]  # every line, accepted (``text``) or with its reason, in file order
    intervals: list[Interval]  # the accepted daily lines' intervals, in file order
    issued: dt.datetime | None  # the UPDATED time (None: missing or unreadable)


def kp_value(kp_x10: int) -> float:
    """Kp from the file's tenths, rounded to thirds: 13 -> 4/3 (1+), 17 -> 5/3 (2-), 20 -> 2."""
    return math.floor(kp_x10 * 3 / 10 + 0.5) / 3


def parse_updated(text: str) -> dt.datetime | None:
    """The issue time of an ``UPDATED 2026 Nov 21 09:00:00 UTC`` line (aware UTC), None when unreadable."""
    m = UPDATED_RE.match(text)
    if not m or m.group(2).upper() not in MONTHS:
        return None
    year, day, hour, minute, second = (int(m.group(i)) for i in (1, 3, 4, 5, 6))
    try:
        return dt.datetime(year, MONTHS.index(m.group(2).upper()) + 1, day, hour, minute, second,
                           tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def read_fields(text: str, section: str) -> tuple[dict[str, int | float | None] | None, str | None]:
    """A data line's fields by name (``q`` None when blank), or the reason it cannot be read."""
    names = MONTHLY_FIELDS if section == "MONTHLY_PREDICTED" else DAILY_FIELDS
    words = text.split()
    if len(words) == len(names) - 1:  # the Q flag is blank (as in predicted lines)
        q = names.index("q")
        words = words[:q] + [None] + words[q:]
    elif len(words) != len(names):
        return None, (f"{len(words)} fields: a line of section {section} has {len(names)} "
                      f"({len(names) - 1} with the Q flag blank)")
    fields: dict[str, int | float | None] = {}
    for name, word in zip(names, words):
        if word is None:
            fields[name] = None
        elif name in FLOAT_FIELDS:
            if not DECIMAL_RE.match(word):
                return None, f"field {name} is not a number: {word!r}"
            fields[name] = float(word)
        elif not INTEGER_RE.match(word):
            return None, f"field {name} is not an integer: {word!r}"
        else:
            fields[name] = int(word)
    return fields, None


def check_fields(fields: dict[str, int | float | None], section: str) -> tuple[dt.date | None, str | None]:
    """The line's date, or why its values are impossible."""
    try:
        day = dt.date(int(fields["year"]), int(fields["month"]), int(fields["day"]))
    except ValueError:
        return None, f"impossible date {fields['year']}-{fields['month']:02d}-{fields['day']:02d}"
    if section != "MONTHLY_PREDICTED":
        for name in _KP:
            if not 0 <= fields[name] <= KP_X10_MAX:
                return None, f"{name} = {fields[name]}: Kp x 10 outside 0-{KP_X10_MAX} (Kp 0-9)"
        for name in (*_AP, "ap_daily"):
            if not 0 <= fields[name] <= AP_MAX:
                return None, f"{name} = {fields[name]}: outside 0-{AP_MAX}"
    for name in FLUX_FIELDS:
        if fields[name] < 0:
            return None, f"{name} = {fields[name]}: a flux is not negative"
    return day, None


def _intervals(day: dt.date, fields: dict, issued: dt.datetime, section: str, record_no: int) -> list[Interval]:
    midnight = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
    flux = {name: float(fields[name]) for name in FLUX_FIELDS}
    out = []
    for i in range(8):
        start = midnight + i * SLOT
        out.append(Interval(start, int(fields[_KP[i]]), int(fields[_AP[i]]), int(fields["ap_daily"]), flux,
                            start + SLOT <= issued, issued, section, record_no))
    return out


@dataclasses.dataclass
class _Reader:
    """The walk through a file's lines: the header's values, the open section, each line's fate."""

    reasons: dict[int, str] = dataclasses.field(default_factory=dict)  # record_no -> why refused
    updated: list[tuple[int, dt.datetime | None]] = dataclasses.field(default_factory=list)
    declared: dict[str, tuple[int, str]] = dataclasses.field(default_factory=dict)  # section -> (line, NUM value)
    data: list[tuple[int, str, str]] = dataclasses.field(default_factory=list)  # (line, section, text)
    section: str | None = None

    def header(self, no: int, text: str) -> None:
        word = text.split()[0]
        if word == "DATATYPE":
            if text.split()[1:] != [DATATYPE]:
                self.reasons[no] = f"{text!r}: not a CSSI space-weather file (DATATYPE {DATATYPE})"
        elif word == "UPDATED":
            issued = parse_updated(text)
            if self.updated:
                self.reasons[no] = f"a second UPDATED line (the first is line {self.updated[0][0] + 1})"
            else:
                self.updated.append((no, issued))
                if issued is None:
                    self.reasons[no] = "UPDATED time not readable (as in 'UPDATED 2026 Nov 21 09:00:00 UTC')"
        elif word.startswith("NUM_"):
            m = NUM_RE.match(text)
            if m and m.group(1) in SECTIONS:
                self.declared[m.group(1)] = (no, m.group(2))
            else:
                self.reasons[no] = f"{word}: no such section ({', '.join(SECTIONS)})"
        elif word == "BEGIN":
            if text.split()[1:] in ([s] for s in SECTIONS):
                self.section = text.split()[1]
            else:
                self.reasons[no] = f"{text!r}: no such section ({', '.join(SECTIONS)})"
        elif word != "VERSION":
            self.reasons[no] = "not a header keyword, comment or blank, outside a BEGIN/END section"

    def inside(self, no: int, text: str) -> None:
        words = text.split()
        if words[0] == "END":
            if words[1:] == [self.section]:
                self.section = None
            else:
                self.reasons[no] = f"{text!r} inside section {self.section}"
        elif words[0] == "BEGIN" or words[0].startswith("NUM_"):
            self.reasons[no] = f"{words[0]} inside section {self.section} (no END {self.section} before it)"
        else:
            self.data.append((no, self.section, text))


def parse(data: bytes) -> CssiFile:
    """Every line of a CSSI file with its fate, and the 3-hour intervals of its accepted daily lines."""
    lines = split_lines(data)
    reader = _Reader()
    texts: dict[int, str] = {}
    for no, raw in lines:
        try:
            texts[no] = raw.decode("utf-8")
        except UnicodeDecodeError:
            reader.reasons[no] = "not valid UTF-8"
            continue
        stripped = texts[no].removeprefix("\ufeff").strip()  # a byte-order mark is an encoding artefact
        if not stripped or stripped.startswith("#"):
            continue
        (reader.header if reader.section is None else reader.inside)(no, stripped)
    issued = reader.updated[0][1] if reader.updated else None
    intervals = _read_data(reader, issued)
    _check_counts(reader)
    records = [Record(no, raw, None if no in reader.reasons else texts[no],
                      f"CSSI line {no + 1}: {reader.reasons[no]}" if no in reader.reasons else None)
               for no, raw in lines]
    return CssiFile(records, intervals, issued)


def _read_data(reader: _Reader, issued: dt.datetime | None) -> list[Interval]:
    """The data lines read and checked (each refusal in ``reader.reasons``); the daily lines' intervals."""
    seen: dict[tuple[bool, dt.date], int] = {}
    intervals: list[Interval] = []
    for no, section, text in reader.data:
        fields, reason = read_fields(text, section)
        day = None
        if reason is None:
            day, reason = check_fields(fields, section)
        monthly = section == "MONTHLY_PREDICTED"
        if reason is None and (monthly, day) in seen:
            reason = f"{day} is given twice (first on line {seen[(monthly, day)] + 1})"
        if reason is None and issued is None:
            reason = ("no readable UPDATED line: the file's issue time, which tells observed values from "
                      "forecast ones, is unknown")
        if reason is not None:
            reader.reasons[no] = reason
            continue
        seen[(monthly, day)] = no
        if not monthly:
            intervals += _intervals(day, fields, issued, section, no)
    return intervals


def _check_counts(reader: _Reader) -> None:
    """A ``NUM_<section>_POINTS`` line that its section's data lines do not agree with is refused."""
    for section, (no, value) in reader.declared.items():
        count = sum(1 for _, s, _ in reader.data if s == section)
        if not INTEGER_RE.match(value) or int(value) != count:
            reader.reasons[no] = f"NUM_{section}_POINTS {value}, but section {section} has {count} data line(s)"


def interval_table(parsed: CssiFile, source_file: str, source_sha256: str,
                   bronze_id: Callable[[int], str]) -> "pa.Table":
    """The file's intervals as ``silver.space_weather`` rows (Arrow), without the batch's columns
    (``ingest_time``, ``ingest_batch``, ``run_id``: :func:`sda.pipeline.space_weather.merge_intervals` adds them)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(schemas.SPACE_WEATHER)
    ivs = parsed.intervals
    columns = {
        "interval_start": [iv.start for iv in ivs], "interval_end": [iv.end for iv in ivs],
        "kp": [iv.kp for iv in ivs], "kp_x10": [iv.kp_x10 for iv in ivs], "ap": [iv.ap for iv in ivs],
        "ap_daily": [iv.ap_daily for iv in ivs],
        **{name: [iv.flux[name] for iv in ivs] for name in FLUX_FIELDS},
        "observed": [iv.observed for iv in ivs], "issued": [iv.issued for iv in ivs],
        "section": [iv.section for iv in ivs], "source_file": [source_file] * len(ivs),
        "source_sha256": [source_sha256] * len(ivs), "record_no": [iv.record_no for iv in ivs],
        "bronze_id": [bronze_id(iv.record_no) for iv in ivs],
    }
    return pa.table({name: pa.array(values, schema.field(name).type) for name, values in columns.items()})
