"""The scheduler's executor: Airflow's ``LocalExecutor``, whose task processes start with the stages'
client libraries already imported.

Every pipeline task is a thin Spark Connect client (:mod:`.operators`), so what a short task pays
besides its server work is mostly Python imports: the Spark Connect client with pandas, pyarrow and
gRPC (~0.8 s on this machine) and, in the quality gates, Great Expectations (~4 s). On Linux a
``LocalExecutor`` forks its workers from the scheduler and each worker forks a task process per task,
so whatever the scheduler imported before :meth:`start` every task inherits for free.

Only third-party libraries are preloaded (:data:`PRELOAD`), never the project's own code: a task
still imports ``include/sda`` and its ``jobs/<stage>.py`` afresh, so an edit reaches the next task
without restarting the scheduler. A library that fails to import is logged and skipped (the task's
own import then reports it). Nothing is connected before the fork: the gRPC channel is opened by the
task itself.

Configure it with ``AIRFLOW__CORE__EXECUTOR=sda.orchestration.executor.PreloadingLocalExecutor``
(``scripts/airflow_env.sh`` and ``docker-compose.yaml`` do); ``airflow standalone`` accepts it as a
local executor.
"""

from __future__ import annotations

import importlib
import logging
import time

from airflow.executors.local_executor import LocalExecutor

log = logging.getLogger(__name__)

# What the jobs import from outside the project, heaviest first.
PRELOAD: tuple[str, ...] = (
    "great_expectations",
    "great_expectations.core.run_identifier",
    "pyspark.sql.connect.session",
    "pyspark.sql.connect.functions",
    "pyspark.sql.functions",
    "pyspark.sql.types",
    "pyspark.errors",
    "pandas",
    "pyarrow",
    "numpy",
    "sgp4.api",
    "airflow.providers.apache.spark.hooks.spark_connect",
)


def preload(modules: tuple[str, ...] = PRELOAD) -> dict[str, float | str]:
    """Import ``modules``; returns seconds per module, or the error of one that did not import."""
    spent: dict[str, float | str] = {}
    for name in modules:
        started = time.monotonic()
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a missing extra must not stop the scheduler
            spent[name] = f"{type(exc).__name__}: {exc}"
            log.warning("preload of %s failed (%s): tasks import it themselves", name, exc)
            continue
        spent[name] = round(time.monotonic() - started, 3)
    return spent


class PreloadingLocalExecutor(LocalExecutor):
    """``LocalExecutor`` that imports :data:`PRELOAD` before it forks its workers."""

    def start(self) -> None:
        started = time.monotonic()
        failed = [name for name, spent in preload().items() if isinstance(spent, str)]
        self.log.info("preloaded the task processes' libraries in %.1f s%s", time.monotonic() - started,
                      f" (not: {', '.join(failed)})" if failed else "")
        super().start()
