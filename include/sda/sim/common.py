"""Constants and small helpers shared by the simulator modules."""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib

from sda.orbit.catalog import synthetic
from sda.orbit.times import parse_utc

CHUNK_MS = 300_000
MAX_SPAN = dt.timedelta(days=7)
DISORDERS = ("none", "redelivery", "reprocessed", "malformed", "impossible", "unknown_sensor", "late")
RATE_NAMES = ("dup_rate", "reprocess_rate", "late_rate", "malformed_rate", "impossible_rate", "unknown_sensor_rate")
MU = synthetic.MU_WGS72


def stream_seed(cfg, purpose: int) -> list[int]:
    """The seed of one of a simulation's random streams; a continuation block (``cfg.stream``) has its own."""
    return [cfg.seed, purpose] + ([] if getattr(cfg, "stream", None) is None else [int(cfg.stream)])


def iso_utc(value: dt.datetime) -> str:
    return value.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")


def iso_ms(t_ms: int) -> str:
    """Unix ms -> ``2026-11-21T06:00:01.250Z``."""
    sec, ms = divmod(int(t_ms), 1000)
    return dt.datetime.fromtimestamp(sec, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms:03d}Z"


def iso_us(t_ms: int) -> str:
    """Unix ms -> ``2026-11-21T06:00:01.250000Z`` (the optical archive's timestamp form)."""
    sec, ms = divmod(int(t_ms), 1000)
    return dt.datetime.fromtimestamp(sec, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms:03d}000Z"


def chunk_label(chunk_ms: int) -> str:
    return dt.datetime.fromtimestamp(chunk_ms // 1000, dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def hash_int(*parts) -> int:
    return int(hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()[:12], 16)


def parse_time(text: str) -> dt.datetime:
    """ISO-8601 -> aware UTC datetime (``Z`` accepted; naive means UTC)."""
    try:
        return parse_utc(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO-8601 time such as 2026-11-21T06:00:00Z") from None
