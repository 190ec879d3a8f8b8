"""The scheduler's executor (sda.orchestration.executor): a LocalExecutor that imports the stages'
third-party libraries before it forks its workers, and never the project's own code (an edit must
reach the next task without a scheduler restart). Under the real scheduler: tests/test_end_to_end.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from sda.config.settings import PROJECT_ROOT
from sda.orchestration import executor

PATH = "sda.orchestration.executor.PreloadingLocalExecutor"
# Both probes run in a fresh interpreter, as the scheduler does: nothing the test session imported
# hides what the module pulls in.
LOADER = """
from airflow.executors.executor_loader import ExecutorLoader
from airflow.executors.local_executor import LocalExecutor
cls, _ = ExecutorLoader.import_default_executor_cls()
print(cls.__name__, issubclass(cls, LocalExecutor), cls.is_local)
"""
PROBE = """
import json, sys
import airflow.executors.local_executor as le
seen = {}
def start(self):
    seen["gx"] = "great_expectations" in sys.modules
    seen["connect"] = "pyspark.sql.connect.session" in sys.modules
le.LocalExecutor.start = start
from sda.orchestration.executor import PreloadingLocalExecutor
seen["sda_before"] = sorted(m for m in sys.modules if m == "sda" or m.startswith("sda."))
PreloadingLocalExecutor(parallelism=1).start()
seen["sda_after"] = sorted(m for m in sys.modules if m == "sda" or m.startswith("sda."))
print(json.dumps(seen))
"""


def _env() -> dict[str, str]:
    return {"PYTHONPATH": str(PROJECT_ROOT / "include"), "PATH": "/usr/bin:/bin",
            "AIRFLOW_HOME": os.environ.get("AIRFLOW_HOME", str(PROJECT_ROOT / "var" / "airflow"))}


def test_it_is_a_local_executor_airflow_loads_from_the_setting():
    out = subprocess.run([sys.executable, "-c", LOADER], capture_output=True, text=True, timeout=300,
                         cwd=PROJECT_ROOT, env={**_env(), "AIRFLOW__CORE__EXECUTOR": PATH})
    assert out.returncode == 0, out.stderr[-2000:]
    # what `airflow standalone` checks before it keeps the configured executor
    assert out.stdout.strip().splitlines()[-1] == "PreloadingLocalExecutor True True"



def test_every_preloaded_library_imports_and_none_is_the_projects_own():
    assert all(name.split(".")[0] not in ("sda", "jobs") for name in executor.PRELOAD)
    spent = executor.preload()
    assert set(spent) == set(executor.PRELOAD)
    assert all(isinstance(v, float) for v in spent.values()), spent


def test_start_imports_the_libraries_before_the_workers_fork_and_no_project_module():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300,
                         cwd=PROJECT_ROOT, env=_env())
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["gx"] and seen["connect"]
    assert seen["sda_before"] == seen["sda_after"] == ["sda", "sda.orchestration", "sda.orchestration.executor"]
