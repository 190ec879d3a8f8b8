"""sda.pipeline.retention: which files go, on hand-made trees with hand-set modification times."""

from __future__ import annotations

import os
from pathlib import Path

from sda.pipeline import retention

NOW = 1_800_000_000.0
HOUR = 3600.0


def _file(path: Path, age_h: float, text: str = "x\n") -> tuple[int, int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    when = NOW - age_h * HOUR
    os.utime(path, (when, when))
    st = path.stat()
    return st.st_size, st.st_mtime_ns // 1000


def test_a_landed_file_goes_only_when_ingested_as_it_is_and_old(tmp_path):
    landing = tmp_path / "landing"
    old_done = _file(landing / "radar" / "old_done.jsonl", 80)
    young_done = _file(landing / "radar" / "young_done.jsonl", 10)
    _file(landing / "radar" / "old_unknown.jsonl", 80)  # not in the ledger: never deleted
    changed = _file(landing / "optical" / "changed.csv", 80, "a longer text\n")  # ledger has another size
    _file(landing / "_truth" / "sim.jsonl", 500)  # the simulator's: left to it
    _file(landing / "_feed" / "pending" / "radar" / "p.jsonl", 500)
    only_old = _file(landing / "isl" / "only.bcn", 100)
    ingested = {"radar/old_done.jsonl": old_done, "radar/young_done.jsonl": young_done,
                "optical/changed.csv": (changed[0] - 1, changed[1]), "isl/only.bcn": only_old}
    assert retention.prune_landing(landing, ingested, 72, NOW) == ["isl/only.bcn", "radar/old_done.jsonl"]
    left = sorted(p.relative_to(landing).as_posix() for p in landing.rglob("*") if p.is_file())
    assert left == ["_feed/pending/radar/p.jsonl", "_truth/sim.jsonl", "optical/changed.csv",
                    "radar/old_unknown.jsonl", "radar/young_done.jsonl"]
    assert not (landing / "isl").exists() and landing.is_dir()  # an emptied directory goes, the root stays
    assert retention.prune_landing(landing, {"radar/young_done.jsonl": young_done}, 0, NOW) == []  # 0 keeps all


def test_outbox_and_logs_go_by_age_and_symlinks_are_not_followed(tmp_path):
    outbox, outside = tmp_path / "outbox", tmp_path / "outside"
    _file(outbox / "CDM-a-v1.cdm", 800)
    _file(outbox / "CDM-a-v1.json", 800)
    _file(outbox / "CDM-b-v1.cdm", 100)
    _file(outside / "precious.txt", 900)
    (outbox / "link").symlink_to(outside, target_is_directory=True)
    (outbox / "flink.cdm").symlink_to(outside / "precious.txt")
    assert retention.prune_older(outbox, 720, NOW) == 2
    assert sorted(p.name for p in outbox.iterdir()) == ["CDM-b-v1.cdm", "flink.cdm", "link"]
    assert (outside / "precious.txt").is_file()
    assert retention.disk_usage(outbox) == 2 and retention.disk_usage(tmp_path / "none") == 0
    assert retention.prune_older(None, 1, NOW) == 0 and retention.prune_older(outbox, 0, NOW) == 0
