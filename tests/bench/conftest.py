"""The benchmarks import their shared module and each other by name (``from common import ...``), as
``python bench/<name>.py`` lets them: bench/ goes on ``sys.path`` for the tests that import them."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))  # after the installed packages: nothing of theirs is shadowed
