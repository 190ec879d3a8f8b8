"""The values alert rows carry, normalised: UTC-aware datetimes, their ISO-8601 text, missing values.

The pipeline stores timestamps naive (meaning UTC) and pandas hands them back as ``Timestamp``; screening
works in unix seconds. Everything that compares, hashes or writes an alert's times goes through
:func:`aware` first, so the three forms never mix.
"""

from __future__ import annotations

import datetime as dt
import math

import pandas as pd

from sda.orbit.times import as_utc

UTC = dt.timezone.utc


def aware(t) -> dt.datetime:
    """A UTC-aware datetime from a datetime (naive = UTC, as the pipeline stores them) or unix seconds."""
    if isinstance(t, pd.Timestamp):  # a datetime subclass: make it a plain datetime first
        t = t.to_pydatetime()
    if isinstance(t, dt.datetime):
        return as_utc(t)
    return dt.datetime.fromtimestamp(float(t), tz=UTC)


def iso(t) -> str:
    """ISO-8601 UTC text with microseconds and a ``Z`` (the outbox's and the reasons' time format)."""
    t = aware(t)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond:06d}Z"


def missing(v) -> bool:
    """Whether a value is absent: None, NaN (pandas' missing float) or NaT."""
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NaT


def flag(v) -> bool:
    """A boolean column's value, missing (a row from before the column) read as false."""
    return not missing(v) and bool(v)
