"""The cluster path, proven on loopback: a Spark standalone master and worker started from the pyspark
package, a Spark Connect server (``sda.lake.server``) whose master is that standalone master, the
``spark_connect`` connection pointed at it, and pipeline stages run through the DAGs' own operator
(:class:`sda.orchestration.operators.SdaStageOperator`, which adds the ``sda`` zip to the session as a Python
artifact for the cluster's workers). The tables they write must equal those of the same stages run on
the suite's ``local[2]`` server over the same landed files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests import chain, cluster_probe, injected_pair
from tests.ports import free_port

pytestmark = pytest.mark.slow

PROJECT_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STAGES = ("catalog", "ingest", "normalize", "conjunction")
RUN_ID = "manual__2026-11-21T12:00:00+00:00"
TCA_UNIX = 1795258800.0  # 2026-11-21T11:00:00Z, the simulated encounter's TCA
COMPARED = ("catalog", "observations", "quarantine", "conjunctions", "alerts", "alert_events")


def _master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return json.load(r)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """A master and one worker (2 cores, 2 GiB) on 127.0.0.1, from the venv's pyspark; stopped afterwards."""
    spark_class = BIN / "spark-class"
    if not spark_class.is_file():
        pytest.fail(f"{spark_class} not found: pyspark is not installed in this interpreter's environment")
    root = tmp_path_factory.mktemp("standalone")
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_", "SDA_"))}
    # the executors must not find sda through the test's PYTHONPATH: only the shipped zip or the install
    env.pop("PYTHONPATH", None)
    import pyspark

    env.update({"SPARK_HOME": str(Path(pyspark.__file__).parent),
                "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"})
    env.update({"SPARK_LOG_DIR": str(root / "logs"), "SPARK_WORKER_DIR": str(root / "work"),
                "SPARK_LOCAL_IP": "127.0.0.1"})
    logs = []
    procs = []
    for name, args in (
        ("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                    "--webui-port", str(ui)]),
        ("worker", ["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
                    "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui),
                    "--work-dir", str(root / "work")]),
    ):
        log = root / f"{name}.log"
        logs.append(log)
        procs.append(subprocess.Popen([str(spark_class), *args], env=env, stdout=log.open("w"),
                                      stderr=subprocess.STDOUT))
        if name == "master":
            time.sleep(2)
    deadline = time.monotonic() + 120
    state: dict = {}
    while time.monotonic() < deadline:
        try:
            state = _master_state(ui)
            if state.get("aliveworkers", 0) >= 1 and state.get("status") == "ALIVE":
                break
        except OSError:
            pass
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(2)
    else:
        state = {}
    if not state.get("aliveworkers"):
        for p in procs:
            p.terminate()
        tails = "\n".join(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:])
                          for log in logs)
        pytest.fail(f"the standalone master/worker did not come up within 120 s:\n{tails}")
    yield {"url": f"spark://127.0.0.1:{port}", "ui": ui, "root": root}
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
    """Simulated sensor files (5 minutes, with the injected near-collision) and their catalogue."""
    root = tmp_path_factory.mktemp("cluster-input")
    staging, landing = root / "staging", root / "landing"
    catalog_file = root / "catalog" / "catalog.tle"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SDA_")}
    env.update({"SDA_LANDING": str(staging), "SDA_CATALOG_FILE": str(catalog_file)})
    sim = subprocess.run(
        [sys.executable, "-m", "sda.sim.simulate", "--start", "2026-11-21T10:00:00Z", "--end", "2026-11-21T10:05:00Z",
         "--landing", str(staging), "--catalog-out", str(catalog_file), "--objects", "120",
         "--inject-conjunction", "--tca", "2026-11-21T11:00:00Z"],  # the default sky
        env=env, capture_output=True, text=True, timeout=600, cwd=PROJECT_ROOT,
    )
    assert sim.returncode == 0, sim.stderr[-3000:]
    files = [str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file() and "_truth" not in p.parts]
    chain.land(files, staging, landing)
    return {"landing": landing, "catalog_file": catalog_file, "root": root}


def _settings(landed, name: str, **extra):
    from sda.config.settings import load_settings

    base = landed["root"] / name
    return load_settings(env={}, lakehouse=base / "lakehouse", landing=landed["landing"], outbox=base / "outbox",
                         catalog_file=landed["catalog_file"], shuffle_partitions=2, **extra)


def _args(stage: str) -> list[str]:
    args = ["--start", chain.iso(chain.START), "--end", chain.iso(chain.FAR_END), "--run-id", RUN_ID]
    if stage == "conjunction":  # screen the two hours around the injected TCA
        args += ["--screen-start", "2026-11-21T10:00:00Z", "--horizon-h", "2"]
    return args


@pytest.fixture(scope="module")
def cluster_run(standalone, landed):
    """A Connect server on the standalone master; each stage run by the DAGs' operator through it, as
    an Airflow worker would."""
    from sda.lake import server
    from sda.lake.spark import connect
    from sda.orchestration.airflow_support import stage_kwargs
    from sda.orchestration.operators import SdaStageOperator

    settings = _settings(landed, "cluster", spark_master=standalone["url"], connect_port=free_port())
    worker_env = {**settings.as_env(), "AIRFLOW_CONN_SPARK_CONNECT": json.dumps(
        {"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": settings.connect_port})}
    saved = {k: os.environ.get(k) for k in [*worker_env, "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"]}
    server.start(settings, warm=False)
    # an Airflow worker's environment: the SDA_* settings (the operator loads them; the master decides
    # whether the package is shipped) and the connection, as docker-compose.yaml and
    # scripts/airflow_env.sh set them
    os.environ.update(worker_env)
    try:
        kwargs = stage_kwargs(settings)
        for stage in STAGES:
            op = SdaStageOperator(task_id=stage, job=f"jobs/{stage}.py", application_args=_args(stage), **kwargs)
            op.execute(context={})
        session = connect(settings)
        from sda.lake import dist

        shipped = dist.package_zip(Path(kwargs["dist_dir"]))
        session.addArtifacts(str(shipped), pyfile=True)
        probe = cluster_probe.probe(session)
        session.stop()
    finally:
        server.stop(settings)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"settings": settings, "probe": probe, "shipped": str(shipped)}


@pytest.fixture(scope="module")
def local_run(spark, landed):
    """The same stages in-process on the tests' local[2] session."""
    settings = _settings(landed, "local")
    for stage in STAGES:
        chain.job(stage).main(_args(stage), settings=settings, spark=spark)
    return {"settings": settings}


def test_stages_ran_on_the_cluster(standalone, cluster_run):
    """The Connect server was the standalone master's application, and its executors ran there."""
    assert cluster_run["probe"]["master"] == standalone["url"]
    apps = _master_state(standalone["ui"])
    names = [a["name"] for a in apps.get("completedapps", []) + apps.get("activeapps", [])]
    assert "sda-spark-connect" in names, f"the Connect server never reached the master; it saw {names}"


def test_executors_import_the_shipped_package(cluster_run):
    shipped = cluster_run["shipped"].split(",")[0]
    assert Path(shipped).name.startswith("sda-") and shipped.endswith(".zip")
    files = cluster_run["probe"]["executor_sda"]
    assert files, "no executor task ran"
    # the executors fetch the session's Python artifacts into a directory of their own: same file
    # name, inside the zip
    assert all(f"{Path(shipped).name}/sda/__init__.py" in f for f in files), files


def test_cluster_tables_equal_local(spark, cluster_run, local_run, landed):
    local = chain.snapshot(spark, local_run["settings"], COMPARED)
    cluster = chain.snapshot(spark, cluster_run["settings"], COMPARED)
    assert local["catalog"] and local["observations"] and local["conjunctions"], \
        {k: len(v) for k, v in local.items()}
    assert chain.differences(local, cluster) == []
    # the injected pair is found on both
    from pyspark.sql import functions as F

    from sda.lake.tables import TABLES

    injected = TABLES["conjunctions"].read(spark, cluster_run["settings"]).where(
        (F.col("primary_id") == 99901) & (F.col("secondary_id") == 99902)
        & (F.abs(F.unix_seconds("tca") - F.unix_seconds(F.lit("2026-11-21 11:00:00").cast("timestamp"))) <= 2))
    misses = [r["miss_m"] for r in injected.collect()]
    assert len(misses) == 1 and injected_pair.explained(misses[0], landed["catalog_file"], TCA_UNIX), misses
