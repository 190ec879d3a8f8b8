"""Replay: recompute chosen stages for an event-time range from the tables upstream of them.

    sda replay --start 2026-11-20T06:00Z --end 2026-11-20T12:00Z [--stages normalize,dedup] [--dry-run]

and the ``sda_replay`` DAG (same checks, same plan) do the same: each chosen stage runs as
``jobs/<stage>.py --start S --end E --replay``, in topology order. What a stage does in a replay:

=============  ==================================================================================
normalize      parses the bronze records that can hold an event time in the range (ingested from
               ``start - clock_skew_s`` on) and MERGEs the range's observations into silver
dedup          re-clusters every (sensor, window) with an observation in the range
correlate      re-associates the range's deduplicated observations; their state windows and passes
               are recomputed; finality is judged by the newest batch already processed
fuse           refits each object's arc windows the range touches, and its later ones (a window's prior is
               the window before it)
acquire        searches the held observations of the lookback before the range's newest one for new
               objects (the same observations give the same provisional numbers)
conjunction    redoes the screening of every cadence boundary in ``(start, end]`` into
               ``gold.conjunctions`` (the alert lifecycle and the outbox are not replayed: alerts
               already left, and a past screening must not move the present alert state backwards)
=============  ==================================================================================

The replayable stages are those another stage feeds (:func:`sda.pipeline.topology.source_stages` are
not): ``ingest`` and ``catalog`` are not replayable, since bronze is the log a replay reads, and the
catalogue is used as it stands. Every write is a MERGE on the table's key that inserts what is missing (and the
windowed state an upsert), so with unchanged inputs a replay changes nothing but lineage columns, and
after a loss (rows deleted, a bug fixed) it puts back what the range should hold. No progress is
committed: the incremental position of each stage stays where it was, and the next scheduled run
passes on whatever the replay changed through the change feed as usual.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from sda.pipeline.topology import source_stages, stage_names

# every stage another stage feeds; the source stages read files, not tables (why, per stage: NOT_REPLAYABLE)
REPLAYABLE = tuple(name for name in stage_names() if name not in source_stages())
NOT_REPLAYABLE = {"ingest": "bronze is the replayable log: a replay reads it, it does not re-read landing files",
                  "catalog": "the catalogue is used as it stands; load a catalogue file with `sda catalog` or the DAG"}


class ReplayError(ValueError):
    """A replay request that cannot be run as given (the message says what is wrong)."""


@dataclasses.dataclass(frozen=True)
class ReplayPlan:
    start: dt.datetime
    end: dt.datetime
    stages: tuple[str, ...]
    dry_run: bool

    def job_args(self, stage: str, run_id: str) -> list[str]:
        return ["--start", self.start.isoformat(), "--end", self.end.isoformat(), "--run-id", run_id, "--replay"]

    def describe(self, cadence_minutes: float) -> dict[str, Any]:
        from_hours = (self.end - self.start).total_seconds() / 3600.0
        screenings = len(screening_starts(self.start, self.end, cadence_minutes)) if "conjunction" in self.stages else 0
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "hours": round(from_hours, 3),
                "stages": list(self.stages), "dry_run": self.dry_run, "conjunction_screenings": screenings,
                "jobs": [f"jobs/{s}.py --start {self.start.isoformat()} --end {self.end.isoformat()} --replay"
                         for s in self.stages]}


def screening_starts(start: dt.datetime, end: dt.datetime, cadence_minutes: float) -> list[dt.datetime]:
    """The screenings scheduled runs made for the data intervals in ``[start, end)``: one at each
    interval end, i.e. every cadence boundary (counted from the Unix epoch, as the DAG's timetable
    aligns them) in ``(start, end]``."""
    step = dt.timedelta(minutes=cadence_minutes)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    t = epoch + ((start - epoch) // step + 1) * step
    out = []
    while t <= end:
        out.append(t)
        t += step
    return out


def _instant(name: str, value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        t = value
    else:
        text = str(value or "").strip()
        if not text:
            raise ReplayError(f"{name} is required: an ISO-8601 time such as 2026-11-20T06:00:00Z")
        try:
            t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ReplayError(f"{name} {text!r} is not an ISO-8601 time (e.g. 2026-11-20T06:00:00Z)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.astimezone(dt.timezone.utc)


def parse_stages(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """``None``/empty -> every replayable stage; else the named ones, put in topology order."""
    if value is None:
        names: list[str] = []
    elif isinstance(value, str):
        names = [v.strip() for v in value.split(",") if v.strip()]
    else:
        names = [str(v).strip() for v in value if str(v).strip()]
    if not names:
        return REPLAYABLE
    for name in names:
        if name in NOT_REPLAYABLE:
            raise ReplayError(f"stage {name!r} cannot be replayed: {NOT_REPLAYABLE[name]}. "
                              f"Replayable stages: {', '.join(REPLAYABLE)}")
        if name not in REPLAYABLE:
            raise ReplayError(f"unknown stage {name!r}: replayable stages are {', '.join(REPLAYABLE)}")
    order = stage_names()
    return tuple(sorted(dict.fromkeys(names), key=order.index))


def plan(start: Any, end: Any, stages: str | Sequence[str] | None = None, dry_run: bool = False, *,
         max_hours: float, now: dt.datetime | None = None) -> ReplayPlan:
    """Check a replay request and put it in order, or raise :class:`ReplayError` saying what is wrong."""
    s, e = _instant("start", start), _instant("end", end)
    if e <= s:
        raise ReplayError(f"end {e.isoformat()} is not after start {s.isoformat()}: a replay range must be non-empty")
    hours = (e - s).total_seconds() / 3600.0
    if hours > max_hours:
        raise ReplayError(f"the range {s.isoformat()} .. {e.isoformat()} is {hours:g} h, over the maximum of "
                          f"{max_hours:g} h (SDA_REPLAY_MAX_HOURS): split it into several replays")
    now = now or dt.datetime.now(dt.timezone.utc)
    if s > now:
        raise ReplayError(f"start {s.isoformat()} is in the future: nothing has been observed there yet")
    if not isinstance(dry_run, bool):
        raise ReplayError(f"dry_run must be true or false, not {dry_run!r}")
    return ReplayPlan(s, e, parse_stages(stages), dry_run)
