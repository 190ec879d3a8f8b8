"""What the service keeps of the files beside its tables: landed files, the outbox, task logs.

Run by the daily ``sda_maintenance`` DAG (``jobs/maintenance.py``), so that a service left running piles
nothing up without bound:

* **landed files** -- bronze is the replayable raw log, so a landed file is no longer needed once ingest's
  ledger (``ops.ingested_files``) holds it as ``done`` with the size and modification time it still has
  (every record of it is in bronze or quarantine). Such a file goes once its modification time is older
  than ``SDA_LANDING_RETENTION_H`` (default 72 h). A file the ledger does not hold, or holds with another
  size or time, is never deleted. Names starting with ``.`` or ``_`` (the simulator's truth, the feed's
  pending files) are left to their owners.
* **the outbox** -- CDMs and their JSON twins, ``SDA_OUTBOX_RETENTION_H`` after they were written (default
  720 h: receivers have had 30 days; the alert versions stay in gold ``alerts``).
* **task logs** -- Airflow's per-try log files, ``SDA_LOG_RETENTION_H`` after their last write (default 168 h).

0 keeps every file of that kind. Directories left empty are removed (never a root). Plain Python: the ledger
rows are passed in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path


def files(root: Path, skip_private: bool) -> Iterable[tuple[Path, os.stat_result]]:
    """Regular files under ``root`` (symlinks neither followed nor listed), with their stat."""
    for dirpath, dirnames, filenames in os.walk(root):
        if skip_private:
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "_"))]
        for name in filenames:
            if skip_private and name.startswith((".", "_")):
                continue
            path = Path(dirpath) / name
            try:
                st = path.lstat()
            except OSError:
                continue
            if path.is_symlink() or not path.is_file():
                continue
            yield path, st


def _remove_empty_dirs(root: Path) -> None:
    for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
        if Path(dirpath) != root:
            try:
                os.rmdir(dirpath)
            except OSError:
                pass  # not empty (or gone)


def prune_landing(landing: Path, ingested: Mapping[str, tuple[int, int]], retention_h: float,
                  now: float | None = None) -> list[str]:
    """Delete the landed files the ledger holds as done (``ingested``: path relative to the landing zone ->
    (size, mtime in microseconds)) with that size and time, older than ``retention_h``; their paths."""
    if retention_h <= 0 or not landing.is_dir():
        return []
    horizon = (time.time() if now is None else now) - retention_h * 3600.0
    deleted = []
    for path, st in files(landing, skip_private=True):
        rel = path.relative_to(landing).as_posix()
        if st.st_mtime < horizon and ingested.get(rel) == (st.st_size, st.st_mtime_ns // 1000):
            path.unlink()
            deleted.append(rel)
    _remove_empty_dirs(landing)
    return sorted(deleted)


def prune_older(root: Path | None, retention_h: float, now: float | None = None) -> int:
    """Delete the files under ``root`` last written more than ``retention_h`` ago; how many."""
    if root is None or retention_h <= 0 or not root.is_dir():
        return 0
    horizon = (time.time() if now is None else now) - retention_h * 3600.0
    deleted = 0
    for path, st in list(files(root, skip_private=False)):
        if st.st_mtime < horizon:
            path.unlink()
            deleted += 1
    _remove_empty_dirs(root)
    return deleted


def disk_usage(root: Path | None) -> int:
    """Bytes of the regular files under ``root`` (0 when absent)."""
    if root is None or not root.is_dir():
        return 0
    return sum(st.st_size for _, st in files(root, skip_private=False))
