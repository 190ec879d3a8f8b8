"""Time conversions the orbit code shares: pipeline timestamps (naive = UTC, or aware) <-> unix seconds.

The lakehouse stores UTC timestamps without a zone; the maths works in float unix seconds (SGP4 and the
frames take Julian dates from them: :func:`sda.orbit.frames.unix_to_jd`).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd


def unix_seconds(times) -> np.ndarray:
    """Timestamps (naive = UTC, or aware) -> float unix seconds."""
    if not pd.api.types.is_datetime64_any_dtype(times):  # strings, Timestamps or datetimes in an object column
        times = pd.to_datetime(times, utc=True)
    # already timestamps (a pandas UDF's batch): read as is, without pandas' per-element parse;
    # an aware one converts to UTC, a naive one is UTC already; NaT -> NaN
    if hasattr(times, "to_numpy"):
        instants = times.to_numpy(dtype="datetime64[ns]")
    else:
        instants = np.asarray(times, dtype="datetime64[ns]")
    return (instants - np.datetime64(0, "ns")) / np.timedelta64(1, "s")


def unix(t) -> float:
    """One instant (a datetime, naive = UTC, or already unix seconds) -> float unix seconds."""
    if isinstance(t, dt.datetime):
        if t.tzinfo is None:  # the pipeline's naive timestamps are UTC
            t = t.replace(tzinfo=dt.timezone.utc)
        return t.timestamp()
    return float(t)


def utc(unix_s: float) -> dt.datetime:
    """Unix seconds -> an aware UTC datetime, to the microsecond (a timestamp column's resolution)."""
    return dt.datetime.fromtimestamp(round(float(unix_s) * 1e6) / 1e6, dt.timezone.utc)


def parse_utc(text: str) -> dt.datetime:
    """ISO-8601 text (``Z`` or ``z`` accepted, surrounding blanks ignored) -> an aware UTC datetime; naive
    means UTC. A ``ValueError`` where the text is no ISO-8601 time: each caller words its own refusal."""
    return as_utc(dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00").replace("z", "+00:00")))


def as_utc(value: dt.datetime) -> dt.datetime:
    """A datetime as an aware UTC one (naive = UTC)."""
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)


# Time scales a clock reading may be written in (CCSDS TIME_SYSTEM), as offsets from TAI: GPS time is
# TAI - 19 s (fixed since 1980), TT is TAI + 32.184 s.
SCALE_MINUS_TAI_NS = {"TAI": 0, "GPS": -19 * 10**9, "TT": 32_184 * 10**6}


def tai_minus_utc_s(unix_ns: int) -> float:
    """TAI - UTC (s) at the UTC instant ``unix_ns`` (unix nanoseconds): ERFA's leap-second table
    (``erfa.dat``, the table the precession-nutation of :mod:`sda.orbit.inertial` uses); its own
    warning for a date more than about five years past its last update is let through (the last
    value is kept). A ``ValueError`` before 1960, where UTC has no TAI offset."""
    import warnings

    import erfa

    days, rest = divmod(int(unix_ns), 86_400 * 10**9)
    date = dt.date(1970, 1, 1) + dt.timedelta(days=days)
    if date.year < 1960:
        raise ValueError(f"{date.year}: UTC has no TAI - UTC before 1960")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", erfa.ErfaWarning)
        return float(erfa.dat(date.year, date.month, date.day, rest / (86_400 * 10**9)))


def utc_ns_from_scale(unix_ns: int, scale: str) -> int:
    """A clock reading in time scale ``scale`` (one of :data:`SCALE_MINUS_TAI_NS`), written as a calendar
    date and time and counted as unix nanoseconds as if it were UTC -> the UTC instant (unix ns).
    e.g. 2026-11-21T06:00:37 TAI -> 06:00:00 UTC (TAI - UTC = 37 s since 2017)."""
    tai = int(unix_ns) - SCALE_MINUS_TAI_NS[scale]
    # TAI - UTC of the UTC date: the TAI instant's date first, then that of the UTC guess (across midnight)
    guess = tai - round(tai_minus_utc_s(tai) * 1e9)
    return tai - round(tai_minus_utc_s(guess) * 1e9)
