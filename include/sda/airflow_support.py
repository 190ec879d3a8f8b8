"""How a DAG submits a job: one spark-submit configuration shared by every DAG file.

A job runs as ``spark-submit jobs/<name>.py`` on the ``spark_default`` connection, with the Delta jars
cached by ``make setup`` (or the Delta package when there are none), the ``sda`` package zip for the
executors (``--py-files``, built when the task starts: :mod:`sda.operators`), the session
configuration of :func:`sda.spark.session_conf`, and the same ``SDA_*`` settings and Python
interpreter as the scheduler. ``SdaSparkSubmitOperator(task_id=..., application=...,
application_args=..., **submit_kwargs(settings))`` builds such a task.

This module imports nothing heavy (no pyspark, no airflow): DAG files import it at parse time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from sda.settings import PROJECT_ROOT, Settings
from sda.spark import DELTA_PACKAGE, session_conf

SPARK_CONN_ID = "spark_default"


def spark_submit_binary() -> str | None:
    """The spark-submit next to this interpreter (the venv's pyspark), else None: the hook's default
    (``spark-submit`` on PATH, or the connection's ``spark-binary`` extra)."""
    candidate = Path(sys.executable).parent / "spark-submit"
    return str(candidate) if candidate.is_file() else None


def job_env(settings: Settings) -> dict[str, str]:
    """What the job process must see: the same SDA_* settings and the same Python on both sides."""
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    env = settings.as_env()
    # the driver may import sda from the shipped zip (spark-submit puts --py-files first on its
    # PYTHONPATH), where the package cannot find the project directory from its own location
    env["SDA_HOME"] = str(PROJECT_ROOT)
    env.update({"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", python)})
    return env


def submit_kwargs(settings: Settings) -> dict[str, Any]:
    """The :class:`~sda.operators.SdaSparkSubmitOperator` arguments every job task shares (everything
    but task_id, application, application_args, name and doc_md)."""
    jars = settings.spark_jars()
    return {
        "conn_id": SPARK_CONN_ID,
        "conf": session_conf(settings),
        "jars": ",".join(jars) or None,
        "packages": None if jars else DELTA_PACKAGE,
        "driver_memory": settings.driver_memory,
        "env_vars": job_env(settings),
        "spark_binary": spark_submit_binary(),
        "verbose": False,
        "dist_dir": dist_dir(settings),
    }


def dist_dir(settings: Settings) -> Path:
    """Where the ``sda`` zip for ``--py-files`` is written: ``dist`` beside the jar cache (under ``var/``)."""
    return settings.jars_dir.parent / "dist"
