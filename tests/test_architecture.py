"""The house rules of the code (issue 18), checked on the source itself.

* import-linter's contracts in pyproject.toml (the package layers of include/sda, orbit maths without Spark or
  Airflow, nothing in sda importing jobs/, no cycles) hold: `lint-imports` also runs in `make lint`, this test
  keeps them checked whenever pytest runs.
* sda.config imports the standard library only (import-linter sees first-party and installed packages, not
  whether a module is part of the standard library).
* Outside dags/ and plugins/, nothing imports the Airflow glue (sda.orchestration) except that package itself.
* No Python file in include/, jobs/, dags/ or bench/ over 450 lines, no function over 70.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SDA = ROOT / "include" / "sda"
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 70


def _sources(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py"))


def _imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a file, at any depth (function-level imports too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                package = ".".join(path.relative_to(root / "include").with_suffix("").parts[: -node.level])
                found.append((node.lineno, f"{package}.{node.module}" if node.module else package))
            else:
                found.append((node.lineno, node.module))
    return found


def test_import_contracts_hold():
    linter = Path(sys.executable).with_name("lint-imports")
    if not linter.exists() and shutil.which("lint-imports") is None:
        pytest.skip("import-linter is not installed (pip install -r requirements.txt)")
    done = subprocess.run([str(linter) if linter.exists() else "lint-imports", "--no-logo", "--no-cache"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_configuration_imports_only_the_standard_library():
    outside = [f"{p.relative_to(ROOT)}:{line} imports {name}"
               for p in _sources("include/sda/config") for line, name in _imported_modules(p)
               if name.split(".")[0] not in sys.stdlib_module_names and not name.startswith("sda.config")]
    assert not outside, "\n".join(outside)


def test_only_dags_and_plugins_import_the_airflow_glue():
    glue = [f"{p.relative_to(ROOT)}:{line} imports {name}"
            for p in _sources("include", "jobs", "bench") if SDA / "orchestration" not in p.parents
            for line, name in _imported_modules(p) if name.split(".")[:2] == ["sda", "orchestration"]]
    assert not glue, "\n".join(glue)


def test_files_and_functions_stay_small():
    too_long = []
    for path in _sources("include", "jobs", "dags", "bench"):
        text = path.read_text()
        if (lines := len(text.splitlines())) > MAX_FILE_LINES:
            too_long.append(f"{path.relative_to(ROOT)}: {lines} lines (at most {MAX_FILE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (length := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines "
                                    f"(at most {MAX_FUNCTION_LINES})")
    assert not too_long, "\n".join(too_long)


def test_the_checks_see_what_they_check(tmp_path):
    """The checks above can fail: a hand-made module with a third-party import, a relative import and a long
    function is seen as such."""
    package = tmp_path / "include" / "sda" / "config"
    package.mkdir(parents=True)
    module = package / "bad.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    module.write_text(f"import numpy\nfrom . import settings\n\n\ndef long():\n{body}\n")
    assert _imported_modules(module, root=tmp_path) == [(1, "numpy"), (2, "sda.config")]
    function = next(n for n in ast.walk(ast.parse(module.read_text())) if isinstance(n, ast.FunctionDef))
    assert function.end_lineno - function.lineno + 1 == MAX_FUNCTION_LINES + 1
