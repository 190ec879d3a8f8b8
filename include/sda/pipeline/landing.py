"""The landing zone as ingest lists it: which files are landed files, and which are refused whole.

``<landing>/<kind>/**/<name><suffix>`` (kinds in ``schemas.LANDING_KINDS``: the sensor kinds and
``space_weather``; suffixes in ``schemas.LANDING_SUFFIX``); other top-level
directories (``_truth/``) and temporary files (``.name``, ``*.tmp``) are not candidates.

A candidate is *refused before it is read* when reading it could leave the landing zone or block the
task: a symlink that resolves outside the landing zone (its target is never opened) and anything that
is not a regular file (a FIFO, a socket, a device). Ingest gives such a file one quarantine row and a
ledger row like any other file (:func:`refusal` says why), so an operator sees it in the run report;
it is never read.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import stat as stat_mode
from pathlib import Path

from sda.lake import schemas

log = logging.getLogger("sda.ingest")

FILE_TYPES = {stat_mode.S_IFIFO: "a FIFO", stat_mode.S_IFSOCK: "a socket", stat_mode.S_IFCHR: "a character device",
              stat_mode.S_IFBLK: "a block device", stat_mode.S_IFDIR: "a directory"}


def is_candidate(rel: Path, kind: str) -> bool:
    """Whether a file under ``<landing>/<kind>/`` is a landed sensor file (not a temp file)."""
    return all(not part.startswith((".", "_")) for part in rel.parent.parts) and candidate_name(rel.name, kind)


def candidate_name(name: str, kind: str) -> bool:
    return not name.startswith((".", "_")) and name.endswith(schemas.LANDING_SUFFIX[kind]) and not name.endswith(".tmp")


def inside(landing: Path, path: Path) -> bool:
    """Whether ``path``, symlinks resolved, lies inside the landing zone."""
    return path.resolve().is_relative_to(landing.resolve())


def refusal(landing: Path, path: Path) -> str | None:
    """Why the candidate ``path`` is refused before it is read, or None when it may be read (or is gone)."""
    if not inside(landing, path):
        return f"refused before reading: a symlink to {path.resolve()}, outside the landing zone"
    try:
        return type_refusal(os.stat(path))
    except OSError:
        return None


def type_refusal(st: os.stat_result) -> str | None:
    """Why a file of ``st``'s type (symlinks followed) is not read, or None for a regular file."""
    kind = stat_mode.S_IFMT(st.st_mode)
    if kind == stat_mode.S_IFREG:
        return None
    return f"refused before reading: {FILE_TYPES.get(kind, 'a special file')}, not a regular file"


def discover(landing: Path, end: dt.datetime) -> list[tuple[str, str, Path]]:
    """(relative path, kind, absolute path) of the files landed by ``end``, sorted by path."""
    return [(rel, kind, Path(path)) for rel, kind, path, _ in discover_stat(landing, end)]


def discover_stat(landing: Path, end: dt.datetime,
                  refused: list[tuple[str, str, str, os.stat_result, str]] | None = None,
                  ) -> list[tuple[str, str, str, os.stat_result]]:
    """:func:`discover` with each file's ``stat`` (size and mtime: the ledger's fast check), the
    absolute path as a string; ``refused``, when given, receives the candidates refused before reading
    (:func:`refusal`) with their ``lstat`` and the reason.

    One ``os.walk`` (scandir) per kind, one ``stat`` per file, and a symlink resolved only where there
    is one -- the listing is the one part of a run that grows with the landing zone, so it is kept to
    what the kernel must do (10,000 files: about 0.1 s). Symlinked directories are not descended into
    (as ``Path.rglob``); a file that is a symlink, or a kind directory that is one, is taken only if it
    resolves inside the landing zone."""
    found = []
    landing_real = Path(os.path.realpath(landing))
    for kind in schemas.LANDING_KINDS:
        root = landing / kind
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "_"))]  # never candidates
            prefix = Path(dirpath).relative_to(landing).as_posix() + "/"
            dir_inside = Path(os.path.realpath(dirpath)).is_relative_to(landing_real)
            for name in filenames:
                if not candidate_name(name, kind):  # its directories were checked on the way down
                    continue
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                    linked = stat_mode.S_ISLNK(st.st_mode) or not dir_inside
                    reason = refusal(landing, Path(path)) if linked else type_refusal(st)
                    if linked and reason is None:
                        st = os.stat(path)  # a link inside the landing zone: its target's size and mtime
                except OSError:  # removed since listed, or a dangling symlink: nothing has landed (yet)
                    continue
                # a file still being written has a fresh mtime: it waits for the interval that covers it
                if st.st_mtime > end.timestamp():
                    continue
                if reason is not None:  # never opened: its own lstat is what the ledger keeps
                    log.warning("landing file %s (in %s): %s", prefix + name, landing, reason)
                    if refused is not None:
                        refused.append((prefix + name, kind, path, st, reason))
                    continue
                found.append((prefix + name, kind, path, st))
    return sorted(found, key=lambda f: f[0])
