"""Safe path parameters: a path that comes from a setting, a command-line option or a DAG argument
must stay inside the directories it is meant for.

* :func:`check_text` refuses characters no path of ours needs and that could break out of a quoted
  context (NUL, newlines and other control characters; for paths quoted into SQL also the quotes
  and ``;``).
* :func:`refuse_system_dir` refuses ``/`` and the operating system's own directories as a place for
  pipeline data.
* :func:`confine` resolves a path (``~``, ``..`` and symlinks) and refuses it unless it lies inside
  one of the allowed roots.

Every refusal raises :class:`UnsafePathError` (a :class:`sda.config.errors.SettingsError`) whose message
names the option or variable, the value and what is allowed.

This module imports nothing heavy (no pyspark, no airflow): DAG files and the CLI import it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from sda.config.errors import SettingsError

# Directories of the operating system that never hold pipeline data: neither they nor anything
# below them may be a lakehouse, landing zone, outbox or catalogue location. ``/`` itself is refused
# too (but not what lies below it).
SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/sbin", "/sys", "/usr")

# Characters that end or escape a quoted SQL identifier or string (backtick, quotes) or a statement.
SQL_UNSAFE_CHARS = "`'\";"

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


class UnsafePathError(SettingsError):
    """A path parameter points somewhere it must not, or holds characters it must not."""


def check_text(what: str, raw: str, *, sql: bool = False) -> str:
    """``raw`` unchanged, or :class:`UnsafePathError` when it holds a NUL byte, a control character
    (newline, tab, ...) or, with ``sql``, one of :data:`SQL_UNSAFE_CHARS`."""
    if "\x00" in raw:
        raise UnsafePathError(f"{what}={raw!r}: the path contains a NUL byte")
    bad = _CONTROL_RE.search(raw)
    if bad:
        raise UnsafePathError(f"{what}={raw!r}: the path contains the control character {bad.group()!r}; "
                              "use printable characters only")
    if sql:
        found = sorted({c for c in raw if c in SQL_UNSAFE_CHARS})
        if found:
            raise UnsafePathError(
                f"{what}={raw!r}: the path contains {', '.join(repr(c) for c in found)}, "
                "which could end a quoted SQL name or string (the lakehouse path is quoted into Delta SQL); "
                f"use a path without any of {' '.join(SQL_UNSAFE_CHARS)}"
            )
    return raw


def _resolved(path: Path | str) -> Path:
    return Path(path).expanduser().resolve()


def refuse_system_dir(what: str, path: Path, raw: str | None = None, *, allow_under: Iterable[Path] = ()) -> Path:
    """``path`` (already resolved) unless it is ``/`` or lies in one of :data:`SYSTEM_DIRS`; a path
    inside one of ``allow_under`` (the project's own directory) is always accepted."""
    shown = raw if raw is not None else str(path)
    for base in map(_resolved, allow_under):
        if base != Path(base.anchor) and path.is_relative_to(base):
            return path
    if path == Path(path.anchor or "/"):
        raise UnsafePathError(f"{what}={shown!r}: resolves to the filesystem root {path}; give a directory of its own")
    for sysdir in SYSTEM_DIRS:
        if path.is_relative_to(sysdir) or path.is_relative_to(_resolved(sysdir)):
            raise UnsafePathError(
                f"{what}={shown!r}: resolves to {path}, inside the system directory {sysdir}; "
                f"pipeline data may not live in {', '.join(SYSTEM_DIRS)}"
            )
    return path


def confine(candidate: Path | str, roots: Path | str | Iterable[Path | str], what: str,
            base: Path | str | None = None) -> Path:
    """``candidate`` resolved (``~`` expanded, a relative path taken relative to ``base``, by default
    the current directory, ``..`` and symlinks resolved), or :class:`UnsafePathError` when it holds a
    NUL byte or control character or does not lie inside one of ``roots`` (a root itself counts as
    inside).

    ``what`` names the option or variable in the message, e.g. ``--file``.
    """
    raw = os.fspath(candidate)
    check_text(what, raw)
    if not raw.strip():
        raise UnsafePathError(f"{what} is empty: give a path")
    if isinstance(roots, (str, Path)):
        roots = [roots]
    allowed = list(dict.fromkeys(_resolved(r) for r in roots))
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = Path(base if base is not None else os.getcwd()) / path
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise UnsafePathError(f"{what} {raw!r}: cannot be resolved ({exc})") from None
    if not any(resolved.is_relative_to(root) for root in allowed):
        via = "" if str(resolved) == raw else f" (resolves to {resolved})"
        raise UnsafePathError(
            f"{what} {raw!r}{via}: outside the allowed roots ({', '.join(str(r) for r in allowed)}); "
            "give a path inside them"
        )
    return resolved
