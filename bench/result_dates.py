"""The day a benchmark's results file was measured: its ``date`` field, else its commit's day, else its
modification day (bench/report.py's tables)."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from pathlib import Path


def _committed_day(path: Path) -> str | None:
    """The UTC day of ``path``'s last commit, if git knows it and the file has not changed since; else None."""
    def git(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *argv], cwd=path.parent, capture_output=True, text=True, check=False)

    try:
        committed = git("rev-parse", f"HEAD:./{path.name}").stdout.strip()
        if not committed or git("hash-object", path.name).stdout.strip() != committed:
            return None  # changed, not committed, or not in a repository (by content: a file's time can lie)
        stamp = git("log", "-1", "--format=%ct", "--", path.name).stdout.strip()
    except OSError:  # no git
        return None
    return dt.datetime.fromtimestamp(int(stamp), dt.timezone.utc).strftime("%Y-%m-%d") if stamp.isdigit() else None


def result_date(path: Path, result: dict) -> str:
    if isinstance(result.get("date"), str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", result["date"]):
        return result["date"]
    committed = _committed_day(path)
    if committed:
        return committed
    return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc).strftime("%Y-%m-%d")
