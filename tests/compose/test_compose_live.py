"""docker-compose.yaml, started for real: the project image built from the Dockerfile (on a base made
from Debian's packages, since Docker Hub cannot be reached here), the whole stack up with
tests/compose/loopback.yaml (every service on the host network, bound to 127.0.0.1), one
`sda_pipeline` run over simulated sensors triggered through the REST API with the generated password,
and `docker compose down -v` leaving nothing behind.

Runs where a Docker engine is running or can be started (as root, `dockerd --bridge=none
--iptables=false` on the overlay2 storage driver, or vfs where overlay2 does not start; stopped again
by process id); otherwise it skips and says why. Slow (the image build dominates: about four minutes
on a fresh machine, seconds when Docker's layer cache holds it), so it carries the `compose` marker
besides `slow`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests import injected_pair
from tests.compose.stack import (
    API,
    BASE_IMAGE,
    CONNECT_INTERNAL,
    CONNECT_TLS,
    DAG_ID,
    IMAGE,
    MASTER_UI,
    PAIR,
    POSTGRES_IMAGE,
    POSTGRES_PORT,
    PROJECT,
    PROMETHEUS_IMAGE,
    ROOT,
    RULES,
    SCRAPED,
    TLS_PROXY_IMAGE,
    WORK,
    compose_command,
    diagnose,
    docker_answers,
    docker_has,
    exec_in,
    grpc_code,
    mark,
    run,
    scraped_state,
    wait_for_engine,
    wait_healthy,
)

pytestmark = [pytest.mark.slow, pytest.mark.compose]


@pytest.fixture(scope="module")
def docker_engine():
    """A running Docker engine: the one already up, or one this test starts and stops by pid."""
    if shutil.which("docker") is None:
        pytest.skip("no docker command (Debian: apt-get install docker.io); the compose stack is not tested")
    if docker_answers():
        yield None
        return
    if shutil.which("dockerd") is None or os.geteuid() != 0:
        pytest.skip("no Docker engine runs and none can be started here (needs root and dockerd)")
    WORK.mkdir(parents=True, exist_ok=True)
    log = open(WORK / "dockerd.log", "ab")
    # overlay2 shares image layers between containers; vfs (which runs everywhere) copies the whole
    # image for each container and build step, which made this test several times slower
    for driver in ("overlay2", "vfs"):
        proc = subprocess.Popen(["dockerd", f"--storage-driver={driver}", "--bridge=none", "--iptables=false",
                                 "--ip6tables=false"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if wait_for_engine(proc, driver):
            break
    else:
        tail = (WORK / "dockerd.log").read_text(errors="replace")[-1500:]
        pytest.skip(f"dockerd could not be started here with overlay2 or vfs: {tail}")
    yield proc.pid
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


@pytest.fixture(scope="module")
def images(docker_engine):
    """The base from Debian's packages (docker/build-base.sh, cached under var/docker), then the
    project image and the PostgreSQL and Prometheus stages on it, with the host's network for the build."""
    if not docker_has(BASE_IMAGE) and shutil.which("debootstrap") is None:
        pytest.skip("debootstrap is not installed (apt-get install debootstrap): no base image can be made here")
    mark("base image")
    run(["bash", str(ROOT / "docker" / "build-base.sh"), BASE_IMAGE], timeout=1200)
    for target, tag in (("sda", IMAGE), ("postgres", POSTGRES_IMAGE), ("prometheus", PROMETHEUS_IMAGE),
                        ("tls-proxy", TLS_PROXY_IMAGE)):
        mark(f"build {tag}")
        run(["docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
              "--target", target, "-t", tag, str(ROOT)], timeout=2400)
    return {"sda": IMAGE, "postgres": POSTGRES_IMAGE, "prometheus": PROMETHEUS_IMAGE, "tls-proxy": TLS_PROXY_IMAGE}


@pytest.fixture(scope="module")
def stack(images):
    """`up -d` with the loopback override and a generated .env; `down -v` afterwards."""
    from cryptography.fernet import Fernet

    WORK.mkdir(parents=True, exist_ok=True)
    env_file = WORK / ".env"
    env_file.write_text("\n".join([
        f"POSTGRES_PASSWORD={secrets.token_urlsafe(16)}",
        f"AIRFLOW__API_AUTH__JWT_SECRET={secrets.token_urlsafe(32)}",
        f"AIRFLOW__CORE__FERNET_KEY={Fernet.generate_key().decode()}",
        f"SDA_IMAGE={images['sda']}",
        f"SDA_POSTGRES_IMAGE={images['postgres']}",
        f"SDA_PROMETHEUS_IMAGE={images['prometheus']}",
        f"SDA_TLS_PROXY_IMAGE={images['tls-proxy']}",
        f"AIRFLOW_UID={50000}",  # every pipeline setting the deployment's default, as for the simulated sky below
    ]) + "\n")
    base = [*compose_command(), "--project-name", PROJECT, "--env-file", str(env_file),
            "-f", str(ROOT / "docker-compose.yaml"), "-f", str(ROOT / "tests" / "compose" / "loopback.yaml")]
    run([*base, "down", "-v", "--remove-orphans"], timeout=300, check=False, cwd=ROOT)  # a previous run's leftovers
    try:
        mark("compose up")
        try:
            run([*base, "up", "-d", "--no-build"], timeout=1800, cwd=ROOT)
        except AssertionError as exc:  # which service failed its health check or exited, and its log
            raise AssertionError(f"{exc}\n{diagnose(base)}") from None
        wait_healthy(base)
        mark("all services healthy")
        _trust_the_deployments_ca(base)
        yield base
    finally:
        logs = run([*base, "logs", "--no-color", "--tail", "200"], timeout=120, check=False, cwd=ROOT)
        (WORK / "compose.log").write_text(logs.stdout + logs.stderr)
        down = run([*base, "down", "-v", "--remove-orphans"], timeout=600, check=False, cwd=ROOT)
        (WORK / "down.log").write_text(down.stdout + down.stderr)


def _trust_the_deployments_ca(base: list[str]) -> None:
    """This process's HTTPS calls (the API server's) verify against the CA certs-init generated."""
    import ssl

    (WORK / "ca.crt").write_text(exec_in(base, "airflow-apiserver", "cat", "/opt/sda/certs/ca.crt"))
    context = ssl.create_default_context(cafile=str(WORK / "ca.crt"))
    urllib.request.install_opener(urllib.request.build_opener(urllib.request.HTTPSHandler(context=context)))


class Api:
    """The Airflow REST API with the password the API server generated (simple auth manager)."""

    def __init__(self, password: str):
        self.password = password
        self.token = self._login()

    def _login(self) -> str:
        body = json.dumps({"username": "admin", "password": self.password}).encode()
        req = urllib.request.Request(f"{API}/auth/token", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)["access_token"]

    def __call__(self, method: str, path: str, payload: dict | None = None) -> dict:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(f"{API}/api/v2{path}", data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.load(resp)


@pytest.fixture(scope="module")
def pipeline_run(stack):
    """Simulated sensors with an injected near-collision into the landing volume, then one triggered
    `sda_pipeline` run over them, followed to its end."""
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    start, tca = now - dt.timedelta(minutes=10), now + dt.timedelta(hours=2)
    iso = lambda t: t.isoformat().replace("+00:00", "Z")  # noqa: E731
    exec_in(stack, "airflow-scheduler", "python", "-m", "sda.sim.simulate", "--start", iso(start), "--end", iso(now),
          "--landing", "/opt/sda/var/landing", "--catalog-out", "/opt/sda/var/catalog/catalog.tle",
          "--objects", "120", "--inject-conjunction", "--tca", iso(tca), "--miss-m", "150")
    password = json.loads(exec_in(stack, "airflow-apiserver", "cat",
                                "/opt/sda/var/airflow/simple_auth_manager_passwords.json.generated"))["admin"]
    api = Api(password)
    deadline = time.monotonic() + 300
    while True:  # the dag processor parses the DAG files after start-up
        try:
            api("GET", f"/dags/{DAG_ID}")
            break
        except urllib.error.HTTPError:
            assert time.monotonic() < deadline, f"{DAG_ID} did not appear: {api('GET', '/importErrors')}"
            time.sleep(5)
    mark("sensors simulated, DAG parsed: run triggered")
    run_id = f"manual__compose_test__{now:%Y%m%dT%H%M%SZ}"
    api("POST", f"/dags/{DAG_ID}/dagRuns", {"dag_run_id": run_id, "logical_date": iso(now), "run_after": iso(start),
                                            "data_interval_start": iso(start), "data_interval_end": iso(now)})
    api("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
    deadline = time.monotonic() + 1800
    state = None
    while time.monotonic() < deadline:
        state = api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}")["state"]
        if state in ("success", "failed"):
            break
        time.sleep(10)
    api("PATCH", f"/dags/{DAG_ID}", {"is_paused": True})
    tasks = {t["task_id"]: t for t in api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")["task_instances"]}
    mark(f"run {state}: " + ", ".join(f"{t} {i.get('duration') or 0:.0f} s" for t, i in tasks.items()))
    return {"state": state, "run_id": run_id, "tasks": tasks, "api": api, "tca": tca}


def test_the_run_succeeds(pipeline_run, stack):
    failed = {k: t["state"] for k, t in pipeline_run["tasks"].items() if t["state"] != "success"}
    detail = ""
    for task_id in failed:
        detail += exec_in(stack, "airflow-scheduler", "bash", "-c",
                        f"tail -n 40 /opt/sda/var/airflow/logs/dag_id={DAG_ID}/run_id={pipeline_run['run_id']}"
                        f"/task_id={task_id}/*.log 2>&1 || true")
    assert pipeline_run["state"] == "success", f"run ended {pipeline_run['state']}; tasks {failed}\n{detail}"
    assert {"ingest", "normalize", "dedup", "correlate", "conjunction"} <= set(pipeline_run["tasks"])


def test_the_stages_ran_on_the_compose_spark_services(pipeline_run):
    """The Connect server is an application of the standalone master, with executors on both workers."""
    with urllib.request.urlopen(f"{MASTER_UI}/json/", timeout=30) as resp:
        master = json.load(resp)
    assert [w["state"] for w in master["workers"]] == ["ALIVE", "ALIVE"]
    apps = [a for a in master["activeapps"] if a["name"] == "sda-spark-connect"]
    assert len(apps) == 1, f"active applications: {[a['name'] for a in master['activeapps']]}"
    assert apps[0]["cores"] >= 2 and all(w["coresused"] >= 1 for w in master["workers"])
    # the tasks reached it through the spark_connect connection (AIRFLOW_CONN_SPARK_CONNECT)
    assert pipeline_run["state"] == "success"


def test_the_api_server_exposes_the_runs_stage_metrics_to_a_logged_in_scrape(pipeline_run):
    """``/sda-metrics/metrics`` (sda.pipeline.exposition): a sample per stage that ran, refused without the token."""
    api = pipeline_run["api"]
    req = urllib.request.Request(f"{API}/sda-metrics/metrics", headers={"Authorization": f"Bearer {api.token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read().decode()
    ran = {line.split('stage="')[1].split('"')[0] for line in text.splitlines()
           if line.startswith('sda_stage_runs_total{') and 'outcome="ok"' in line and not line.endswith(" 0")}
    assert {"ingest", "normalize", "dedup", "correlate", "conjunction"} <= ran, text[:2000]
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{API}/sda-metrics/metrics", timeout=30)
    assert refused.value.code in (401, 403)


def test_prometheus_scrapes_the_pipeline_airflow_and_spark_and_evaluates_the_rules(pipeline_run):
    """Debian's Prometheus (docker/prometheus/) has, after the run: the stages' series and the landing-to-alert
    histogram from the metrics bridge, Airflow's components' own metrics (pushed to the bridge over OTLP), series
    of Spark's master, applications, driver and executors, every target up, and the alerting rules evaluated."""
    deadline = time.monotonic() + 120  # a few scrape and export intervals
    while True:
        got = scraped_state()
        done = ({"ingest", "normalize", "dedup", "correlate", "conjunction"} <= got["stages"] and got["latency"]
                and {"scheduler", "apiserver"} <= got["components"] and got["up"] == dict.fromkeys(SCRAPED, 1.0)
                and set(got["rules"].values()) == {"ok"})
        if done or time.monotonic() > deadline:
            break
        time.sleep(5)
    mark("prometheus queried")
    assert {"ingest", "normalize", "dedup", "correlate", "conjunction"} <= got["stages"], got
    assert got["latency"] and got["latency"][0] > 0, got  # the run's landed files, timed to their alerts
    assert {"scheduler", "apiserver"} <= got["components"], got  # Airflow's metrics, by component
    assert got["up"] == dict.fromkeys(SCRAPED, 1.0), got
    assert set(got["series"]) == SCRAPED - {"sda-fusion"} and min(got["series"].values()) > 0, got
    assert got["rules"] == dict.fromkeys(RULES, "ok"), got


def test_spark_connect_wants_tls_and_the_token(pipeline_run, stack):
    """The stages reached Spark Connect over TLS with the token (the run succeeded); a client without the token is
    refused, over TLS and on the server's own port behind the proxy, and a plaintext client gets no answer."""
    token = exec_in(stack, "airflow-scheduler", "cat", "/opt/sda/certs/connect.token").strip()
    assert pipeline_run["state"] == "success"
    assert grpc_code(CONNECT_TLS, tls=True, token=None) == "UNAUTHENTICATED"
    assert grpc_code(CONNECT_INTERNAL, tls=False, token=None) == "UNAUTHENTICATED"
    assert grpc_code(CONNECT_TLS, tls=False, token=None) == "UNAVAILABLE"  # plaintext to the TLS port
    # with the token the call is let through (and then refused for its empty request, not for who sent it)
    assert grpc_code(CONNECT_TLS, tls=True, token=token) not in ("UNAUTHENTICATED", "UNAVAILABLE", "OK")


def test_postgresql_wants_tls_verified_for_its_name(pipeline_run, stack):
    """PostgreSQL rejects a plaintext connection before any password; over TLS its certificate verifies against the
    deployment's CA for the address Airflow uses (verify-full), as Airflow's own connection string asks."""
    import psycopg2

    conn = exec_in(stack, "airflow-scheduler", "printenv", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN").strip()
    assert conn.endswith("sslmode=verify-full&sslrootcert=/opt/sda/certs/ca.crt")
    password = conn.split("airflow:", 1)[1].split("@", 1)[0]
    common = {"host": "127.0.0.1", "port": POSTGRES_PORT, "user": "airflow", "password": password, "dbname": "airflow"}
    with pytest.raises(psycopg2.OperationalError, match="no encryption"):
        psycopg2.connect(sslmode="disable", connect_timeout=20, **common)
    with psycopg2.connect(sslmode="verify-full", sslrootcert=str(WORK / "ca.crt"), connect_timeout=20, **common) as db:
        with db.cursor() as cur:
            cur.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            assert cur.fetchone() == (True,)


def test_the_api_server_refuses_plain_http(pipeline_run):
    """HTTPS is on: the same port answers no plaintext request (the run's calls went over HTTPS)."""
    import http.client

    with pytest.raises((OSError, http.client.HTTPException)):
        urllib.request.urlopen(API.replace("https://", "http://") + "/api/v2/version", timeout=20).read()
    with urllib.request.urlopen(f"{API}/api/v2/version", timeout=20) as resp:
        assert resp.status == 200


def test_the_injected_conjunctions_cdm_is_in_the_outbox(pipeline_run, stack):
    """The designed encounter (99901/99902, truly 150 m at the TCA given to the simulator) as a CCSDS CDM,
    with the miss the catalogue predicts; the pair also meets on later orbits, farther apart, and those
    CDMs are there too."""
    summary = exec_in(stack, "airflow-scheduler", "bash", "-c",
                    "for f in $(grep -l 'OBJECT_DESIGNATOR *= *9990[12]' /opt/sda/var/outbox/*.cdm); do "
                    "grep -h '^TCA\\|^MISS_DISTANCE\\|^OBJECT_DESIGNATOR' \"$f\" | tr -s ' ' | tr '\\n' ' '; "
                    "echo; done")
    cdms = []
    for line in summary.splitlines():
        fields = [f.strip() for f in line.replace("[m]", "").split(" = ")]
        # "TCA", "<t> MISS_DISTANCE", "<m> OBJECT_DESIGNATOR", "<id> OBJECT_DESIGNATOR", "<id>"
        tca = dt.datetime.fromisoformat(fields[1].split()[0]).replace(tzinfo=dt.timezone.utc)
        cdms.append({"tca": tca, "miss_m": float(fields[2].split()[0]),
                     "ids": {int(fields[3].split()[0]), int(fields[4])}})
    assert cdms, "no CDM of the injected pair 99901/99902 in the outbox"
    designed = [c for c in cdms if c["ids"] == PAIR and abs((c["tca"] - pipeline_run["tca"]).total_seconds()) <= 2]
    assert len(designed) == 1, f"CDMs of the pair: {cdms}"
    # the truth's miss is the designed 150 m; the CDM carries the catalogue's prediction of it
    catalogue = exec_in(stack, "airflow-scheduler", "cat", "/opt/sda/var/catalog/catalog.tle")
    expected = injected_pair.catalogue_miss_m(catalogue, pipeline_run["tca"].timestamp())
    assert injected_pair.explained(designed[0]["miss_m"], catalogue, pipeline_run["tca"].timestamp()), \
        f"MISS_DISTANCE {designed[0]['miss_m']} m, the catalogue's element sets {expected:.1f} m, the truth 150 m"


def test_down_leaves_no_container_network_or_volume(stack, pipeline_run):
    run([*stack, "down", "-v", "--remove-orphans"], timeout=600, cwd=ROOT)
    label = f"label=com.docker.compose.project={PROJECT}"
    assert run(["docker", "ps", "-aq", "--filter", label]).stdout.split() == []
    assert run(["docker", "volume", "ls", "-q", "--filter", label]).stdout.split() == []
    assert run(["docker", "network", "ls", "-q", "--filter", label]).stdout.split() == []


