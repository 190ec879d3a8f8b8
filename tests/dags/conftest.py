"""One DagBag of dags/ for the DAG tests, parsed under a throw-away AIRFLOW_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture(scope="session")
def dagbag(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-home")
    env = {"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        from airflow.dag_processing.dagbag import DagBag

        yield DagBag(dag_folder=str(DAGS))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
