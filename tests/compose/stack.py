"""The compose live test's machinery (tests/compose/test_compose_live.py): the Docker engine and Compose commands,
the stack's containers and their health, and the probes its tests send to Prometheus and to Spark Connect."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "var" / "compose-test"
PROJECT = "sdafusiontest"
BASE_IMAGE = "sda-fusion-base:bookworm"
IMAGE = "sda-fusion:test"
POSTGRES_IMAGE = "sda-fusion-postgres:test"
PROMETHEUS_IMAGE = "sda-fusion-prometheus:test"
TLS_PROXY_IMAGE = "sda-fusion-tls-proxy:test"
CONNECT_TLS, CONNECT_INTERNAL, POSTGRES_PORT = 25002, 25003, 25432
API = "https://127.0.0.1:28080"  # HTTPS only, with the deployment's certificate (certs-init)
PROMETHEUS = "http://127.0.0.1:29090"
MASTER_UI = "http://127.0.0.1:28081"
SERVICES = ("postgres", "spark-master", "spark-worker-1", "spark-worker-2", "spark-connect",
            "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer", "metrics-bridge",
            "prometheus", "spark-connect-tls")
PAIR = {99901, 99902}
DAG_ID = "sda_pipeline"


def mark(phase: str) -> None:
    """Append a phase and its wall-clock time to var/compose-test/timeline.txt (where the time went)."""
    WORK.mkdir(parents=True, exist_ok=True)
    with (WORK / "timeline.txt").open("a") as f:
        f.write(f"{dt.datetime.now(dt.timezone.utc):%H:%M:%S} {phase}\n")


def run(cmd: list[str], timeout: float = 600, check: bool = True, **kw) -> subprocess.CompletedProcess:
    # on the vfs storage driver a container's creation copies the whole image: Compose v1's 60 s
    # default for one API call is too short when several are created at once
    env = {**os.environ, "COMPOSE_HTTP_TIMEOUT": "900"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def docker_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def wait_for_engine(proc: subprocess.Popen, driver: str) -> bool:
    """True once the engine answers on storage driver `driver`; False (that engine stopped) if not."""
    deadline = time.monotonic() + 60
    while not docker_answers():
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


def docker_has(image: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0


def containers() -> dict[str, dict]:
    ids = run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}"]).stdout.split()
    if not ids:
        return {}
    info = json.loads(run(["docker", "inspect", *ids]).stdout)
    return {c["Config"]["Labels"]["com.docker.compose.service"]: c for c in info}


def wait_healthy(base: list[str], timeout_s: float = 900) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        cs = containers()
        init = cs.get("airflow-init", {}).get("State", {})
        if init.get("Status") == "exited" and init.get("ExitCode") != 0:
            raise AssertionError(f"airflow-init failed:\n{service_log(base, 'airflow-init')}")
        states = {s: cs.get(s, {}).get("State", {}) for s in SERVICES}
        dead = [s for s, st in states.items() if st.get("Status") in ("exited", "dead")]
        if dead:
            raise AssertionError(f"{dead} exited:\n" + "\n".join(service_log(base, s) for s in dead))
        waiting = [s for s, st in states.items() if st.get("Health", {}).get("Status") != "healthy"]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not healthy after {timeout_s:.0f} s: {waiting}\n"
                                 + "\n".join(service_log(base, s) for s in waiting))
        time.sleep(5)


def diagnose(base: list[str]) -> str:
    """Each service's state and health, with the last health probes' output and the log of every one
    that is not healthy: what a failed `up` needs to be understood from CI's output alone."""
    lines, bad = [], []
    for service, c in sorted(containers().items()):
        state, health = c.get("State", {}), c.get("State", {}).get("Health") or {}
        lines.append(f"{service}: {state.get('Status')} (exit {state.get('ExitCode')}), "
                     f"health {health.get('Status', 'none')}")
        for probe in (health.get("Log") or [])[-3:]:
            lines.append(f"    probe {probe.get('Start', '')[:19]} exit {probe.get('ExitCode')}: "
                         f"{(probe.get('Output') or '').strip()[-300:]}")
        if health.get("Status", "healthy") != "healthy" or state.get("Status") != "running":
            bad.append(service)
    return "\n".join(lines + [service_log(base, s) for s in bad if s != "airflow-init"])


def service_log(base: list[str], service: str) -> str:
    out = run([*base, "logs", "--no-color", "--tail", "60", service], timeout=60, check=False, cwd=ROOT)
    return f"--- {service}\n{out.stdout[-4000:]}{out.stderr[-1000:]}"


def exec_in(base: list[str], service: str, *cmd: str, timeout: float = 600) -> str:
    return run([*base, "exec", "-T", service, *cmd], timeout=timeout, cwd=ROOT).stdout


def prometheus(path: str, **params: str) -> dict:
    """``data`` of Prometheus's HTTP API answer to ``/api/v1/<path>``."""
    url = f"{PROMETHEUS}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=30) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return body["data"]


RULES = {"SdaStageFailing", "SdaStageNeverSucceeded", "SdaConsumerLagGrowing", "SdaWatermarkStalled", "SdaNoLanding",
         "SdaLandingToAlertSlow", "SdaQuarantineHigh", "SdaScrapeTargetDown"}
SCRAPED = {"sda-fusion", "spark-master", "spark-applications", "spark-driver", "spark-executors"}


def scraped_state() -> dict:
    query = lambda q: prometheus("query", query=q)["result"]  # noqa: E731
    return {
        "stages": {r["metric"]["stage"] for r in query('sda_stage_runs_total{outcome="ok"} > 0')},
        "latency": [float(r["value"][1]) for r in query("sda_landing_to_alert_seconds_count")],
        "components": {r["metric"]["component"] for r in query('count by (component) ({component!=""})')},
        "up": {r["metric"]["job"]: float(r["value"][1]) for r in query("up")},
        "series": {r["metric"]["job"]: float(r["value"][1]) for r in query("count by (job) ({job=~\"spark-.*\"})")},
        "rules": {r["name"]: r["health"] for g in prometheus("rules")["groups"] for r in g["rules"]},
    }


def grpc_code(port: int, tls: bool, token: str | None) -> str:
    """The status of one Spark Connect call (Config, an empty request) to 127.0.0.1:``port``: over TLS trusting the
    deployment's CA or plaintext, with the bearer token or none."""
    import grpc

    creds = None
    if tls:
        creds = grpc.ssl_channel_credentials(root_certificates=(WORK / "ca.crt").read_bytes())
        if token:
            creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
    elif token:
        creds = grpc.composite_channel_credentials(grpc.local_channel_credentials(),
                                                   grpc.access_token_call_credentials(token))
    target = f"127.0.0.1:{port}"
    channel = grpc.secure_channel(target, creds) if creds else grpc.insecure_channel(target)
    try:
        channel.unary_unary("/spark.connect.SparkConnectService/Config")(b"", timeout=20)
        return "OK"
    except grpc.RpcError as exc:
        return exc.code().name
    finally:
        channel.close()
