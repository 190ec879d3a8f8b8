"""How a DAG runs a stage: one configuration shared by every DAG file.

A stage runs *inside its Airflow task* as a Spark Connect client of the long-lived server
(:mod:`sda.lake.server`): :class:`sda.orchestration.operators.SdaStageOperator` opens a session on the ``spark_connect``
connection (``AIRFLOW_CONN_SPARK_CONNECT``, ``sc://host:port``) and calls ``jobs/<stage>.py``'s
``main(argv, spark=session)``. No JVM starts per task. ``SdaStageOperator(task_id=..., job=...,
application_args=..., **stage_kwargs(settings))`` builds such a task.

This module imports nothing heavy (no pyspark, no airflow): DAG files import it at parse time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sda.config.settings import Settings

SPARK_CONNECT_CONN_ID = "spark_connect"


def connection_json(settings: Settings) -> str:
    """``AIRFLOW_CONN_SPARK_CONNECT`` for the settings' server (what scripts/airflow_env.sh exports)."""
    return json.dumps({"conn_type": "spark_connect", "host": f"sc://{settings.connect_host}",
                       "port": settings.connect_port})


def stage_kwargs(settings: Settings) -> dict[str, Any]:
    """The :class:`~sda.orchestration.operators.SdaStageOperator` arguments every stage task shares (everything but
    task_id, job, application_args and doc_md)."""
    return {"conn_id": SPARK_CONNECT_CONN_ID, "dist_dir": str(dist_dir(settings))}


def landing_state_file(settings: Settings) -> Path:
    """Where the landing watcher keeps its cursor (:mod:`sda.orchestration.landing_watch`): under ``var/``, one
    file per landing zone."""
    import hashlib

    digest = hashlib.sha256(str(settings.landing).encode()).hexdigest()[:12]
    return settings.jars_dir.parent / "landing-watch" / f"{digest}.json"


def dist_dir(settings: Settings) -> Path:
    """Where the ``sda`` zip shipped to a cluster's Python workers is written: ``dist`` beside the jar
    cache (under ``var/``)."""
    return settings.jars_dir.parent / "dist"


if __name__ == "__main__":  # python -m sda.orchestration.airflow_support: the connection for the shell
    from sda.config.settings import load_settings

    print(connection_json(load_settings()))
