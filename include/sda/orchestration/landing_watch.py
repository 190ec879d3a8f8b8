"""Runs start when files land: an event trigger that watches the landing zone and deletes nothing.

``sda_pipeline`` is scheduled on ``AssetOrTimeSchedule``: its cadence stays as the safety net, and
the ``landing`` asset has an ``AssetWatcher`` on :class:`LandingTrigger`. The triggerer runs the
trigger's loop: every ``poke_interval`` seconds it lists the landing zone; when it sees files newer
than its cursor it lists them again ``settle`` seconds later and, once they have stopped growing
between two listings, fires one event (how many files, the newest) and moves its cursor past them.
A file is announced ``poke_interval / 2 + settle`` seconds after it lands, on average. The cursor
(an inode change time in nanoseconds) is kept in a small JSON file under ``var/`` so that a restarted
triggerer neither fires again for files it has announced nor forgets them; a trigger that starts
with no cursor takes "now" and leaves older files to the cadence.

Files are never moved or deleted: ingest's ledger decides what is new. While a run is under way,
Airflow queues no second asset-triggered run for a DAG at ``max_active_runs`` (it defers them), so
files landing meanwhile are taken by the one run that starts after it: never a pile of runs.

This module imports no Airflow at import time beyond the trigger base class, and no Spark.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

POKE_INTERVAL_S = 1.0
SETTLE_S = 0.5


def scan(directory: Path, after_ns: int) -> dict[str, tuple[int, int]]:
    """Files under ``directory`` (recursively; names starting with ``.`` or ``_`` are skipped, as
    ingest skips them) whose inode changed after ``after_ns``: relative path -> (ctime ns, size).

    The inode change time, not the modification time: a sensor's file copied with its original
    mtime (``cp -p``, rsync) still has a fresh ctime, which nothing can set to the past."""
    found: dict[str, tuple[int, int]] = {}
    stack = [directory]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith((".", "_")):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    if st.st_ctime_ns > after_ns:
                        found[os.path.relpath(entry.path, directory)] = (st.st_ctime_ns, st.st_size)
            except OSError:
                continue
    return found


def load_cursor(state_file: Path) -> int | None:
    try:
        return int(json.loads(state_file.read_text())["cursor_ns"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_cursor(state_file: Path, cursor_ns: int) -> None:
    state_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"cursor_ns": cursor_ns}))
    os.replace(tmp, state_file)


class LandingTrigger(BaseEventTrigger):
    """Fire when new files have landed (and stopped growing) under ``directory``.

    :param directory: the landing zone
    :param state_file: where the cursor is kept between triggerer restarts
    :param poke_interval: seconds between listings while nothing new is there
    :param settle: seconds a new file must keep its size and inode change time before it is announced
        (at most ``poke_interval``)
    """

    def __init__(self, directory: str, state_file: str, poke_interval: float = POKE_INTERVAL_S,
                 settle: float = SETTLE_S) -> None:
        super().__init__()
        self.directory = directory
        self.state_file = state_file
        self.poke_interval = float(poke_interval)
        self.settle = min(float(settle), self.poke_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("sda.orchestration.landing_watch.LandingTrigger",
                {"directory": self.directory, "state_file": self.state_file, "poke_interval": self.poke_interval,
                 "settle": self.settle})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        directory, state = Path(self.directory), Path(self.state_file)
        cursor = load_cursor(state)
        if cursor is None:
            cursor = time.time_ns()
            save_cursor(state, cursor)
        previous: dict[str, tuple[int, int]] = {}
        while True:
            new = await asyncio.to_thread(scan, directory, cursor)
            # settled: seen with the same (ctime, size) one listing ago, so not still being written
            settled = {p: v for p, v in new.items() if previous.get(p) == v}
            fired = bool(new) and settled == new
            if fired:
                newest = max(v[0] for v in new.values())
                self.log.info("landing: %d new file(s) under %s", len(new), directory)
                yield TriggerEvent({"files": len(new), "newest_ctime_ns": newest, "directory": str(directory),
                                    "examples": sorted(new)[:5]})
                cursor = newest
                save_cursor(state, cursor)
                previous = {}
            else:
                previous = new
            await asyncio.sleep(self.settle if new and not fired else self.poke_interval)
