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
import urllib.request
from pathlib import Path

import pytest

from tests import injected_pair

pytestmark = [pytest.mark.slow, pytest.mark.compose]

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "var" / "compose-test"
PROJECT = "sdafusiontest"
BASE_IMAGE = "sda-fusion-base:bookworm"
IMAGE = "sda-fusion:test"
POSTGRES_IMAGE = "sda-fusion-postgres:test"
API = "http://127.0.0.1:28080"
MASTER_UI = "http://127.0.0.1:28081"
SERVICES = ("postgres", "spark-master", "spark-worker-1", "spark-worker-2", "spark-connect",
            "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
PAIR = {99901, 99902}
DAG_ID = "sda_pipeline"


def _mark(phase: str) -> None:
    """Append a phase and its wall-clock time to var/compose-test/timeline.txt (where the time went)."""
    WORK.mkdir(parents=True, exist_ok=True)
    with (WORK / "timeline.txt").open("a") as f:
        f.write(f"{dt.datetime.now(dt.timezone.utc):%H:%M:%S} {phase}\n")


def _run(cmd: list[str], timeout: float = 600, check: bool = True, **kw) -> subprocess.CompletedProcess:
    # on the vfs storage driver a container's creation copies the whole image: Compose v1's 60 s
    # default for one API call is too short when several are created at once
    env = {**os.environ, "COMPOSE_HTTP_TIMEOUT": "900"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def _docker_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def docker_engine():
    """A running Docker engine: the one already up, or one this test starts and stops by pid."""
    if shutil.which("docker") is None:
        pytest.skip("no docker command (Debian: apt-get install docker.io); the compose stack is not tested")
    if _docker_answers():
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
        if _wait_for_engine(proc, driver):
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


def _wait_for_engine(proc: subprocess.Popen, driver: str) -> bool:
    """True once the engine answers on storage driver `driver`; False (that engine stopped) if not."""
    deadline = time.monotonic() + 60
    while not _docker_answers():
        if proc.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(1)
    else:
        info = subprocess.run(["docker", "info", "--format", "{{.Driver}}"], capture_output=True, text=True)
        if info.stdout.strip() == driver:
            return True
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return False


def compose_command() -> list[str]:
    """`docker compose` (v2) where the plugin is installed, else Debian's `docker-compose` (v1.29)."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.skip("neither `docker compose` nor `docker-compose` is installed")


@pytest.fixture(scope="module")
def images(docker_engine):
    """The base from Debian's packages (docker/build-base.sh, cached under var/docker), then the
    project image and the PostgreSQL stage on it, with the host's network for the build."""
    if not _docker_has(BASE_IMAGE) and shutil.which("debootstrap") is None:
        pytest.skip("debootstrap is not installed (apt-get install debootstrap): no base image can be made here")
    _mark("base image")
    _run(["bash", str(ROOT / "docker" / "build-base.sh"), BASE_IMAGE], timeout=1200)
    for target, tag in (("sda", IMAGE), ("postgres", POSTGRES_IMAGE)):
        _mark(f"build {tag}")
        _run(["docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
              "--target", target, "-t", tag, str(ROOT)], timeout=2400)
    return {"sda": IMAGE, "postgres": POSTGRES_IMAGE}


def _docker_has(image: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0


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
        f"AIRFLOW_UID={50000}",  # every pipeline setting the deployment's default, as for the simulated sky below
    ]) + "\n")
    base = [*compose_command(), "--project-name", PROJECT, "--env-file", str(env_file),
            "-f", str(ROOT / "docker-compose.yaml"), "-f", str(ROOT / "tests" / "compose" / "loopback.yaml")]
    _run([*base, "down", "-v", "--remove-orphans"], timeout=300, check=False, cwd=ROOT)  # a previous run's leftovers
    try:
        _mark("compose up")
        try:
            _run([*base, "up", "-d", "--no-build"], timeout=1800, cwd=ROOT)
        except AssertionError as exc:  # which service failed its health check or exited, and its log
            raise AssertionError(f"{exc}\n{_diagnose(base)}") from None
        _wait_healthy(base)
        _mark("all services healthy")
        yield base
    finally:
        logs = _run([*base, "logs", "--no-color", "--tail", "200"], timeout=120, check=False, cwd=ROOT)
        (WORK / "compose.log").write_text(logs.stdout + logs.stderr)
        down = _run([*base, "down", "-v", "--remove-orphans"], timeout=600, check=False, cwd=ROOT)
        (WORK / "down.log").write_text(down.stdout + down.stderr)


def _containers() -> dict[str, dict]:
    ids = _run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}"]).stdout.split()
    if not ids:
        return {}
    info = json.loads(_run(["docker", "inspect", *ids]).stdout)
    return {c["Config"]["Labels"]["com.docker.compose.service"]: c for c in info}


def _wait_healthy(base: list[str], timeout_s: float = 900) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        cs = _containers()
        init = cs.get("airflow-init", {}).get("State", {})
        if init.get("Status") == "exited" and init.get("ExitCode") != 0:
            raise AssertionError(f"airflow-init failed:\n{_logs(base, 'airflow-init')}")
        states = {s: cs.get(s, {}).get("State", {}) for s in SERVICES}
        dead = [s for s, st in states.items() if st.get("Status") in ("exited", "dead")]
        if dead:
            raise AssertionError(f"{dead} exited:\n" + "\n".join(_logs(base, s) for s in dead))
        waiting = [s for s, st in states.items() if st.get("Health", {}).get("Status") != "healthy"]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not healthy after {timeout_s:.0f} s: {waiting}\n"
                                 + "\n".join(_logs(base, s) for s in waiting))
        time.sleep(5)


def _diagnose(base: list[str]) -> str:
    """Each service's state and health, with the last health probes' output and the log of every one
    that is not healthy: what a failed `up` needs to be understood from CI's output alone."""
    lines, bad = [], []
    for service, c in sorted(_containers().items()):
        state, health = c.get("State", {}), c.get("State", {}).get("Health") or {}
        lines.append(f"{service}: {state.get('Status')} (exit {state.get('ExitCode')}), "
                     f"health {health.get('Status', 'none')}")
        for probe in (health.get("Log") or [])[-3:]:
            lines.append(f"    probe {probe.get('Start', '')[:19]} exit {probe.get('ExitCode')}: "
                         f"{(probe.get('Output') or '').strip()[-300:]}")
        if health.get("Status", "healthy") != "healthy" or state.get("Status") != "running":
            bad.append(service)
    return "\n".join(lines + [_logs(base, s) for s in bad if s != "airflow-init"])


def _logs(base: list[str], service: str) -> str:
    out = _run([*base, "logs", "--no-color", "--tail", "60", service], timeout=60, check=False, cwd=ROOT)
    return f"--- {service}\n{out.stdout[-4000:]}{out.stderr[-1000:]}"


def _exec(base: list[str], service: str, *cmd: str, timeout: float = 600) -> str:
    return _run([*base, "exec", "-T", service, *cmd], timeout=timeout, cwd=ROOT).stdout


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
    _exec(stack, "airflow-scheduler", "python", "-m", "sda.sim.simulate", "--start", iso(start), "--end", iso(now),
          "--landing", "/opt/sda/var/landing", "--catalog-out", "/opt/sda/var/catalog/catalog.tle",
          "--objects", "120", "--inject-conjunction", "--tca", iso(tca), "--miss-m", "150")
    password = json.loads(_exec(stack, "airflow-apiserver", "cat",
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
    _mark("sensors simulated, DAG parsed: run triggered")
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
    _mark(f"run {state}: " + ", ".join(f"{t} {i.get('duration') or 0:.0f} s" for t, i in tasks.items()))
    return {"state": state, "run_id": run_id, "tasks": tasks, "api": api, "tca": tca}


def test_the_run_succeeds(pipeline_run, stack):
    failed = {k: t["state"] for k, t in pipeline_run["tasks"].items() if t["state"] != "success"}
    detail = ""
    for task_id in failed:
        detail += _exec(stack, "airflow-scheduler", "bash", "-c",
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


def test_the_injected_conjunctions_cdm_is_in_the_outbox(pipeline_run, stack):
    """The designed encounter (99901/99902, truly 150 m at the TCA given to the simulator) as a CCSDS CDM,
    with the miss the catalogue predicts; the pair also meets on later orbits, farther apart, and those
    CDMs are there too."""
    summary = _exec(stack, "airflow-scheduler", "bash", "-c",
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
    catalogue = _exec(stack, "airflow-scheduler", "cat", "/opt/sda/var/catalog/catalog.tle")
    expected = injected_pair.catalogue_miss_m(catalogue, pipeline_run["tca"].timestamp())
    assert injected_pair.explained(designed[0]["miss_m"], catalogue, pipeline_run["tca"].timestamp()), \
        f"MISS_DISTANCE {designed[0]['miss_m']} m, the catalogue's element sets {expected:.1f} m, the truth 150 m"


def test_down_leaves_no_container_network_or_volume(stack, pipeline_run):
    _run([*stack, "down", "-v", "--remove-orphans"], timeout=600, cwd=ROOT)
    label = f"label=com.docker.compose.project={PROJECT}"
    assert _run(["docker", "ps", "-aq", "--filter", label]).stdout.split() == []
    assert _run(["docker", "volume", "ls", "-q", "--filter", label]).stdout.split() == []
    assert _run(["docker", "network", "ls", "-q", "--filter", label]).stdout.split() == []


