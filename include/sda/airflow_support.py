"""How a DAG submits a job: one spark-submit configuration shared by every DAG file.

A job runs as ``spark-submit jobs/<name>.py`` on the ``spark_default`` connection, with the Delta jars
cached by ``make setup`` (or the Delta package when there are none), the session configuration of
:func:`sda.spark.session_conf`, and the same ``SDA_*`` settings and Python interpreter as the
scheduler. ``SparkSubmitOperator(task_id=..., application=..., application_args=...,
**submit_kwargs(settings))`` builds such a task.

This module imports nothing heavy (no pyspark, no airflow): DAG files import it at parse time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from sda.settings import Settings
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
    env.update({"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", python)})
    return env


def submit_kwargs(settings: Settings) -> dict[str, Any]:
    """The SparkSubmitOperator arguments every job task shares (everything but task_id, application,
    application_args, name and doc_md)."""
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
    }
