"""``make run``'s simulated window: long enough that its first run fuses orbits the screening can use.

    python -m sda.sim.scenario [--hours 3] [--min-fit-hours 2] [--tca-hours 3]    prints START END TCA (ISO-8601 Z)

The fuse stage fits each object over fixed event-time windows of ``settings.fusion_arc_h`` (aligned to
whole multiples of it since 1970, :mod:`sda.orbit.fusion.arcs`), and the screening takes a fit only when it
spans ``settings.fusion_min_span_s`` or more. A window of simulated sensors ending now that straddles a
boundary is cut in two: when the part after the boundary is shorter than ``min_fit_hours``, the window
starts ``min_fit_hours`` before the boundary if that is earlier (so it spans from ``hours`` to under
``2 * min_fit_hours``, whichever is more), and one side of the boundary always holds at least
``min_fit_hours`` of tracking.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math

from sda.sim.common import CHUNK_MS

UTC = dt.timezone.utc


def window_start(now: dt.datetime, arc_h: float, hours: float, min_fit_hours: float) -> dt.datetime:
    """The start of a simulated window ending at ``now`` (module docstring)."""
    if min_fit_hours > arc_h:
        raise ValueError(f"min_fit_hours {min_fit_hours:g} is longer than the fit window ({arc_h:g} h)")
    start = now - dt.timedelta(hours=hours)
    arc_s = arc_h * 3600.0
    boundary = dt.datetime.fromtimestamp(math.floor(now.timestamp() / arc_s) * arc_s, UTC)
    if start < boundary and now - boundary < dt.timedelta(hours=min_fit_hours):
        start = min(start, boundary - dt.timedelta(hours=min_fit_hours))
    return start


def _iso(t: dt.datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


def main(argv: list[str] | None = None) -> int:
    from sda.config.settings import load_settings

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hours", type=float, default=3.0, help="at least this much tracking, ending now (default 3)")
    p.add_argument("--min-fit-hours", type=float, default=2.0,
                   help="tracking on one side of a fit-window boundary at least (default 2)")
    p.add_argument("--tca-hours", type=float, default=3.0, help="the injected pair's TCA, hours after now")
    args = p.parse_args(argv)
    if args.hours <= 0 or args.min_fit_hours <= 0 or args.tca_hours <= 0:
        p.error("--hours, --min-fit-hours and --tca-hours must be positive")
    # the end on a 5-minute chunk boundary: the simulator's files are per chunk, and the feed that continues
    # the simulation (sda.sim.feed) starts at the next chunk, so no file is written twice
    chunk_s = CHUNK_MS / 1000
    now = dt.datetime.fromtimestamp(math.floor(dt.datetime.now(UTC).timestamp() / chunk_s) * chunk_s, UTC)
    try:
        start = window_start(now, load_settings().fusion_arc_h, args.hours, args.min_fit_hours)
    except ValueError as exc:
        p.error(str(exc))
    print(_iso(start), _iso(now), _iso(now + dt.timedelta(hours=args.tca_hours)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
