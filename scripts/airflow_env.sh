# shellcheck shell=bash
# The environment of the local Airflow (Airflow 3 as sda.orchestration.local_stack runs it: LocalExecutor
# with the stages' libraries preloaded, sda.orchestration.executor; SQLite, simple auth manager) and of
# the Spark jobs it submits.
# Sourced by scripts/run.sh; source it yourself to use the Airflow CLI against the same installation:
#
#     source scripts/airflow_env.sh && airflow dags list
#
# (SDA_* names are reserved for settings: this file defines none.) Every SDA_* variable already set in
# your shell is kept (see docs/configuration.md).

SDAF_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SDAF_ROOT
export PATH="$SDAF_ROOT/.venv/bin:$PATH"
export PYTHONPATH="$SDAF_ROOT/include${PYTHONPATH:+:$PYTHONPATH}"

export AIRFLOW_HOME="${AIRFLOW_HOME:-$SDAF_ROOT/var/airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$SDAF_ROOT/dags"
# the run reports and Data Docs, served by the API server under /sda-reports (plugins/sda_reports.py)
export AIRFLOW__CORE__PLUGINS_FOLDER="$SDAF_ROOT/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__EXECUTOR=sda.orchestration.executor.PreloadingLocalExecutor
export AIRFLOW__CORE__AUTH_MANAGER=airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin"
# Two cores: at most two tasks at a time (catalog and ingest may overlap), all on the one Spark server.
export AIRFLOW__CORE__PARALLELISM="${AIRFLOW__CORE__PARALLELISM:-2}"
export AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="${AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL:-30}"
# The scheduler's loop sleeps this long when it found nothing to do (Airflow's default: 1 s). Every
# task of a run and the run itself wait for the next loop, so at 1 s a landed file's path to its alert
# paid ~0.5 s nine times; an idle loop is a few queries.
export AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME="${AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME:-0.25}"
# On a busy two-core machine the API server can take longer than the default to answer a task's
# first call; a timeout there kills the task before its stage even starts.
export AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT="${AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT:-60}"
# The API server listens on SDA_BIND_HOST (default 127.0.0.1: this machine only; checked by the settings
# below), as do the task-log servers that sda.orchestration.local_stack starts.
export AIRFLOW__API__HOST="${AIRFLOW__API__HOST:-${SDA_BIND_HOST:-127.0.0.1}}"
export AIRFLOW__API__PORT="${AIRFLOW__API__PORT:-8080}"
export AIRFLOW__API__BASE_URL="${AIRFLOW__API__BASE_URL:-http://localhost:$AIRFLOW__API__PORT}"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="${AIRFLOW__CORE__EXECUTION_API_SERVER_URL:-http://localhost:$AIRFLOW__API__PORT/execution/}"

# The Spark connection the DAG's tasks use: the long-lived Spark Connect server (sda.lake.server) at
# SDA_CONNECT_HOST:SDA_CONNECT_PORT (default sc://127.0.0.1:15002), as the Spark provider's
# spark_connect connection type.
if ! _sdaf_conn="$("$SDAF_ROOT/.venv/bin/python" -m sda.orchestration.airflow_support)"; then
    echo "airflow_env.sh: the SDA_* settings are not valid (message above)" >&2
    return 2 2>/dev/null || exit 2
fi
export AIRFLOW_CONN_SPARK_CONNECT="$_sdaf_conn"
unset _sdaf_conn
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$SDAF_ROOT/.venv/bin/python}"
