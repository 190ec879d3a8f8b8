"""The landing watcher (sda.orchestration.landing_watch): one event per batch of settled new files, nothing for
files it announced before (across restarts), nothing deleted. Under the real scheduler it starts a
run: tests/test_end_to_end.py."""

from __future__ import annotations

import asyncio
import os
import time

from sda.orchestration.landing_watch import LandingTrigger, load_cursor, scan


def _write(path, text="x\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def _next_event(trigger, timeout_s=10.0):
    gen = trigger.run()
    try:
        return await asyncio.wait_for(gen.__anext__(), timeout_s)
    finally:
        await gen.aclose()


def test_scan_sees_new_files_only_and_skips_hidden_and_truth(tmp_path):
    _write(tmp_path / "radar" / "a.jsonl")
    cursor = time.time_ns()
    time.sleep(0.01)
    _write(tmp_path / "radar" / "b.jsonl")
    _write(tmp_path / "_truth" / "t.jsonl")
    _write(tmp_path / "isl" / ".partial.tmp")
    assert sorted(scan(tmp_path, cursor)) == ["radar/b.jsonl"]


def test_an_old_modification_time_does_not_hide_a_new_file(tmp_path):
    """A file copied with its original mtime (cp -p, rsync) still counts: its inode changed now."""
    cursor = time.time_ns()
    time.sleep(0.01)
    _write(tmp_path / "optical" / "old.csv")
    os.utime(tmp_path / "optical" / "old.csv", (1_600_000_000, 1_600_000_000))
    assert list(scan(tmp_path, cursor)) == ["optical/old.csv"]


def test_trigger_fires_once_per_batch_and_remembers_across_restarts(tmp_path):
    landing, state = tmp_path / "landing", tmp_path / "state" / "cursor.json"
    landing.mkdir()
    _write(landing / "radar" / "before.jsonl")  # there before the first start: left to the cadence
    trigger = LandingTrigger(str(landing), str(state), poke_interval=0.05)

    async def scenario():
        gen = trigger.run()
        first = asyncio.ensure_future(gen.__anext__())
        await asyncio.sleep(0.2)
        assert not first.done()  # nothing new yet
        _write(landing / "radar" / "r1.jsonl")
        _write(landing / "isl" / "i1.jsonl")
        event = await asyncio.wait_for(first, 10)
        # the triggerer asks for the next event at once; the cursor moves then (a crash before it
        # fires again: a second run that finds the files already ingested, never a lost file)
        following = asyncio.ensure_future(gen.__anext__())
        await asyncio.sleep(0.2)
        following.cancel()
        return event

    event = asyncio.run(scenario())
    assert event.payload["files"] == 2 and event.payload["examples"] == ["isl/i1.jsonl", "radar/r1.jsonl"]
    assert load_cursor(state) == event.payload["newest_ctime_ns"]
    # it deletes nothing
    assert sorted(p.name for p in landing.rglob("*.jsonl")) == ["before.jsonl", "i1.jsonl", "r1.jsonl"]

    # a restarted trigger (same state file) does not fire again for them, but does for a new one
    restarted = LandingTrigger(str(landing), str(state), poke_interval=0.05)

    async def after_restart():
        gen = restarted.run()
        pending = asyncio.ensure_future(gen.__anext__())
        await asyncio.sleep(0.3)
        assert not pending.done()
        _write(landing / "optical" / "o1.csv")
        event = await asyncio.wait_for(pending, 10)
        await gen.aclose()
        return event

    assert asyncio.run(after_restart()).payload["examples"] == ["optical/o1.csv"]


def test_a_file_still_growing_waits_until_it_settles(tmp_path):
    landing, state = tmp_path / "landing", tmp_path / "cursor.json"
    landing.mkdir()
    trigger = LandingTrigger(str(landing), str(state), poke_interval=0.2)

    async def scenario():
        gen = trigger.run()
        pending = asyncio.ensure_future(gen.__anext__())
        await asyncio.sleep(0.1)
        path = landing / "radar" / "growing.jsonl"
        path.parent.mkdir(parents=True)
        with path.open("w") as out:
            for _ in range(6):  # keeps growing for ~0.6 s, longer than a poll
                out.write("x" * 100 + "\n")
                out.flush()
                await asyncio.sleep(0.1)
                assert not pending.done()
        event = await asyncio.wait_for(pending, 10)
        await gen.aclose()
        return event, path.stat().st_size

    event, size = asyncio.run(scenario())
    assert event.payload["files"] == 1 and size == 6 * 101


def test_new_files_are_listed_again_after_the_settle_time_not_the_next_poll(tmp_path):
    """Seen once, a new file is looked at again ``settle`` seconds later: with a one-minute poll it is
    still announced at once (without the second look it would wait for the next poll)."""
    from sda.orchestration.landing_watch import save_cursor

    landing, state = tmp_path / "landing", tmp_path / "cursor.json"
    save_cursor(state, time.time_ns())
    time.sleep(0.01)
    _write(landing / "isl" / "i1.jsonl")
    trigger = LandingTrigger(str(landing), str(state), poke_interval=60.0, settle=0.05)
    event = asyncio.run(_next_event(trigger, timeout_s=10.0))
    assert event.payload["files"] == 1 and event.payload["examples"] == ["isl/i1.jsonl"]


def test_serialises_to_its_import_path():
    path, kwargs = LandingTrigger("/l", "/s.json", 3.0).serialize()
    assert path == "sda.orchestration.landing_watch.LandingTrigger"
    assert kwargs == {"directory": "/l", "state_file": "/s.json", "poke_interval": 3.0, "settle": 0.5}
