"""Airflow on PostgreSQL, behind a login, running the pipeline through the scheduler.

PostgreSQL (Debian's package) is started on 127.0.0.1 by the fixture, Airflow's metadata database is
migrated into it, and the API server, scheduler and DAG processor run as separate processes, as in
docker-compose.yaml. The REST API refuses unauthenticated calls (401); with the simple auth manager's
generated password a run of ``sda_pipeline`` is triggered over simulated sensors and must succeed
under the scheduler. Afterwards the metadata database holds the run and the tables hold what the
simulator's truth file says was landed, including the injected near-collision.

Skips, saying how to install it, where PostgreSQL's server programs are absent.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.airflow_server import Airflow, Postgres, find_postgres

pytestmark = pytest.mark.slow

PROJECT_ROOT = Path(__file__).resolve().parents[1]
UTC = dt.timezone.utc
DAG_ID = "sda_pipeline"
STAGES = ("catalog", "ingest", "normalize", "dedup", "correlate", "conjunction")
NOW = dt.datetime.now(UTC).replace(microsecond=0)
SIM_START = NOW - dt.timedelta(hours=2)
SIM_END = SIM_START + dt.timedelta(minutes=5)
TCA = NOW + dt.timedelta(hours=1)
RUN_ID = f"manual__pg_test__{NOW:%Y%m%dT%H%M%SZ}"


def _iso(t: dt.datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    bindir, why = find_postgres()
    if bindir is None:
        pytest.skip(why)
    # not under pytest's tmp root: that is private to the test user, and PostgreSQL runs as `postgres`
    root = Path(tempfile.mkdtemp(prefix="sda-pg-"))
    pg = Postgres(bindir, root)
    try:
        pg.start()
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"PostgreSQL did not start: {exc.cmd}\n{exc.stdout}\n{exc.stderr}\n"
                    f"{pg.log.read_text(errors='replace')[-2000:] if pg.log.exists() else ''}")
    yield pg
    pg.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("pg-pipeline")
    dirs = {name: root / name for name in ("lakehouse", "landing", "outbox")}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SDA_", "AIRFLOW"))}
    env.update({
        "SDA_LAKEHOUSE": str(dirs["lakehouse"]),
        "SDA_LANDING": str(dirs["landing"]),
        "SDA_OUTBOX": str(dirs["outbox"]),
        "SDA_CATALOG_FILE": str(root / "catalog" / "catalog.tle"),
        "SDA_SHUFFLE_PARTITIONS": "2",
        "SDA_SCREENING_HORIZON_H": "3",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    })
    sim = subprocess.run(
        [sys.executable, "-m", "sda.simulate", "--start", _iso(SIM_START), "--end", _iso(SIM_END),
         "--landing", str(dirs["landing"]), "--catalog-out", env["SDA_CATALOG_FILE"], "--objects", "120",
         "--inject-conjunction", "--tca", _iso(TCA), "--miss-m", "150"],
        env=env, capture_output=True, text=True, timeout=600, cwd=PROJECT_ROOT,
    )
    assert sim.returncode == 0, sim.stderr[-3000:]
    return {"root": root, "env": env, **dirs}


@pytest.fixture(scope="module")
def airflow(postgres, data):
    env = dict(data["env"])
    env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = postgres.url
    af = Airflow(data["root"] / "airflow", env)
    try:
        af.start()
    except RuntimeError as exc:
        af.stop()
        pytest.fail(str(exc))
    yield af
    af.stop()


@pytest.fixture(scope="module")
def pipeline_run(airflow):
    airflow.wait_for_dag(DAG_ID)
    airflow.api("POST", f"/dags/{DAG_ID}/dagRuns", {
        "dag_run_id": RUN_ID, "logical_date": _iso(NOW), "run_after": _iso(SIM_START),
        "data_interval_start": _iso(SIM_START - dt.timedelta(minutes=1)), "data_interval_end": _iso(NOW),
        "note": "tests/test_postgres.py",
    })
    airflow.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
    # unpausing also queues the latest scheduled interval behind this run: drop it, so nothing
    # writes to the tables while the tests read them
    state, tasks = airflow.wait_for_run(DAG_ID, RUN_ID, timeout=1800, drop_others=True)
    airflow.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": True})
    return {"state": state, "tasks": tasks}


# --- authentication ----------------------------------------------------------------------------

def test_rest_api_refuses_calls_without_a_login(airflow):
    assert airflow.status(f"{airflow.base}/api/v2/dags") == 401
    # a forged token is refused too (Airflow answers 403 "Invalid JWT token" for one it cannot verify)
    assert airflow.status(f"{airflow.base}/api/v2/dags", headers={"Authorization": "Bearer not-a-token"}) in (401, 403)
    assert airflow.status(f"{airflow.base}/api/v2/dags/{DAG_ID}/dagRuns", method="POST", body={"logical_date": None}) == 401


def test_wrong_password_gets_no_token_and_the_generated_one_does(airflow):
    assert airflow.status(f"{airflow.base}/auth/token", method="POST", body={"username": "admin", "password": "admin"}) == 401
    # the password is generated at start-up into AIRFLOW_HOME (outside the repository), never "admin"
    assert airflow.password and airflow.password != "admin"
    assert not airflow.password_file.resolve().is_relative_to(PROJECT_ROOT / "dags")
    token = airflow.token()
    assert airflow.status(f"{airflow.base}/api/v2/dags", headers={"Authorization": f"Bearer {token}"}) == 200


# --- the pipeline on PostgreSQL -----------------------------------------------------------------

def test_pipeline_run_succeeds_under_the_scheduler(pipeline_run, airflow):
    assert pipeline_run["state"] == "success", f"{pipeline_run}\n{airflow.tail()}"
    assert pipeline_run["tasks"] == {stage: "success" for stage in STAGES}


def test_metadata_database_is_postgres(postgres, pipeline_run):
    rows = postgres.query("SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s", DAG_ID, RUN_ID)
    assert rows == [("success",)]
    tasks = dict(postgres.query("SELECT task_id, state FROM task_instance WHERE dag_id = %s AND run_id = %s", DAG_ID, RUN_ID))
    assert tasks == {stage: "success" for stage in STAGES}
    assert postgres.query("SELECT version_num FROM alembic_version")  # migrated by `airflow db migrate`


def test_tables_hold_the_landed_data(spark, data, pipeline_run):
    from pyspark.sql import functions as F

    assert pipeline_run["state"] == "success"

    def read(layer, name):
        return spark.read.format("delta").load(str(data["lakehouse"] / layer / name))

    truth_dir = data["landing"] / "_truth"
    landed = {(t["file"], t["record_no"]) for p in truth_dir.glob("*.jsonl") for line in p.read_text().splitlines()
              if line for t in [json.loads(line)]}
    bronze = sum(read("bronze", n).count() for n in ("radar_frames", "optical_tracks", "isl_beacons"))
    refused = read("ops", "quarantine").where(F.col("stage") == "ingest").count()
    assert bronze + refused == len(landed)
    metrics = {r["stage"] for r in read("ops", "run_metrics").where(F.col("run_id") == RUN_ID).collect()}
    assert metrics >= set(STAGES)
    # the designed encounter (the pair meets again on later orbits, farther apart)
    injected = read("gold", "conjunctions").where(
        (F.col("primary_id") == 99901) & (F.col("secondary_id") == 99902)
        & (F.abs(F.unix_seconds("tca") - F.lit(int(TCA.timestamp()))) <= 2)).collect()
    assert len(injected) == 1
    assert abs(injected[0]["miss_m"] - 150.0) < 5.0
