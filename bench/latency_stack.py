"""The Airflow stack ``bench/latency.py`` starts and talks to, and the small helpers its modules share.

* the environment: ``scripts/airflow_env.sh`` sourced with the benchmark's own AIRFLOW_HOME, free ports
  and SDA_* locations (:func:`bench_env`);
* the local Airflow ``make run`` starts (``python -m sda.orchestration.local_stack``: what ``airflow
  standalone`` runs, listening on 127.0.0.1 only) in its own process group, and its REST API
  (:class:`Airflow`);
* the progress lines while a measurement waits (:class:`Progress`);
* ``say`` (a progress line stamped with the seconds since the start), ``iso``/``ts`` (instants to and from
  the REST API's ISO-8601, on bench/common.py's conversions) and :class:`BenchError`.

``bench/`` is not a package: ``python bench/latency.py`` puts this directory first on ``sys.path``,
so the benchmark's modules import one another, and bench/common.py, by their file names.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

from common import PROJECT_ROOT, elapsed_logger, iso_z, parse_iso

DAG_ID = "sda_pipeline"
UTC = dt.timezone.utc
STARTUP_TIMEOUT_S = 600
LOCATION_SETTINGS = ("SDA_LAKEHOUSE", "SDA_LANDING", "SDA_OUTBOX", "SDA_CATALOG_FILE", "SDA_CADENCE_MINUTES",
                     "SDA_CONNECT_PORT")

say = elapsed_logger(time.monotonic(), time.monotonic)  # seconds since the benchmark started


def iso(t: float | None) -> str | None:
    """Unix seconds -> an ISO-8601 instant in UTC, to the millisecond (``...Z``)."""
    return iso_z(t, "milliseconds")


def ts(text: str | None) -> float | None:
    """An ISO-8601 instant from the REST API (naive = UTC) -> unix seconds."""
    return parse_iso(text).timestamp() if text else None


def r2(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


class BenchError(RuntimeError):
    """The benchmark cannot go on; the message says why (and where to look)."""


# --- environment ---------------------------------------------------------------------------------

def free_port(start: int, taken: set[int] = frozenset()) -> int:
    for port in range(start, start + 200):
        if port in taken:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.2)
            if s.connect_ex(("localhost", port)) == 0:  # something listens on another interface
                continue
        return port
    raise BenchError(f"no free port in {start}..{start + 199}")


def bench_env(work: Path, cadence: int) -> dict[str, str]:
    """The environment of Airflow and of this process's simulator calls: ``scripts/airflow_env.sh``
    sourced with this benchmark's AIRFLOW_HOME, ports and SDA_* locations preset."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k not in LOCATION_SETTINGS}
    api_port = free_port(28080)
    log_port = free_port(28793, {api_port})
    trigger_log_port = free_port(log_port + 1, {api_port, log_port})
    base.update({
        "AIRFLOW_HOME": str(work / "airflow"),
        "AIRFLOW__API__PORT": str(api_port),
        # make run's Airflow (or another benchmark) may hold the default log-server ports
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(log_port),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(trigger_log_port),
        "SDA_LAKEHOUSE": str(work / "lakehouse"),
        "SDA_LANDING": str(work / "landing"),
        "SDA_OUTBOX": str(work / "outbox"),
        "SDA_CATALOG_FILE": str(work / "catalog" / "catalog.tle"),
        "SDA_CADENCE_MINUTES": str(cadence),
        "SDA_CONNECT_PORT": str(free_port(25002)),
    })
    out = subprocess.run(["bash", "-c", 'source scripts/airflow_env.sh >&2 && env -0'], cwd=PROJECT_ROOT,
                         env=base, capture_output=True, check=False)
    if out.returncode != 0:
        raise BenchError(f"scripts/airflow_env.sh failed: {out.stderr.decode(errors='replace').strip()}")
    env = dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)
    for junk in ("_", "SHLVL", "PWD", "OLDPWD"):
        env.pop(junk, None)
    return env


# --- Airflow -------------------------------------------------------------------------------------

class Airflow:
    """The local stack (``sda.orchestration.local_stack``) in its own process group, and its REST API."""

    def __init__(self, env: dict[str, str], log_path: Path):
        self.env = env
        self.base = env["AIRFLOW__API__BASE_URL"].rstrip("/")
        self.home = Path(env["AIRFLOW_HOME"])
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.token: str | None = None
        self.password: str | None = None
        import requests

        self.http = requests.Session()

    # process
    def start(self) -> None:
        import requests

        try:
            self.http.get(f"{self.base}/api/v2/monitor/health", timeout=2)
            raise BenchError(f"something already answers on {self.base}")
        except requests.RequestException:
            pass
        self.home.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        # start_new_session: its own process group (and no SIGINT from the terminal); SIGINT to the
        # stack's process is what stops its scheduler, API server, dag processor and triggerer.
        self.proc = subprocess.Popen([str(PROJECT_ROOT / ".venv" / "bin" / "python"), "-m",
                                      "sda.orchestration.local_stack"],
                                     cwd=PROJECT_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        say(f"Airflow started (pid {self.proc.pid}, log {self.log_path}, API {self.base})")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            status = self.proc.returncode if self.proc else None
            raise BenchError(f"Airflow exited (status {status}); see {self.log_path}")

    def stop(self) -> None:
        if self.proc is None:
            return
        pid = self.proc.pid
        if self.alive():
            say(f"stopping Airflow (pid {pid})")
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        # what is left of its process group (a spark-submit JVM of a task cut short): TERM, then KILL
        for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 0)):
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                break
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                try:
                    os.killpg(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.5)
        self.proc = None

    # API
    def _login(self) -> None:
        resp = self.http.post(f"{self.base}/auth/token", json={"username": "admin", "password": self.password},
                              timeout=30)
        resp.raise_for_status()
        self.token = resp.json()["access_token"]

    def api(self, method: str, path: str, body: dict | None = None, ok404: bool = False) -> Any:
        import requests

        for attempt in range(4):
            try:
                resp = self.http.request(method, f"{self.base}/api/v2{path}", json=body, timeout=60,
                                         headers={"Authorization": f"Bearer {self.token}"})
            except requests.RequestException:
                if attempt == 3:
                    raise
                time.sleep(2)
                continue
            if resp.status_code == 401 and attempt < 3:  # tokens expire: log in again
                self._login()
                continue
            if resp.status_code == 404 and ok404:
                return None
            if resp.status_code >= 500 and attempt < 3:
                time.sleep(2)
                continue
            resp.raise_for_status()
            return resp.json() if resp.content else None
        raise BenchError(f"{method} {path}: no answer")

    def wait_ready(self) -> None:
        import requests

        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            self.check_alive()
            try:
                if self.http.get(f"{self.base}/api/v2/monitor/health", timeout=5).ok:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise BenchError(f"the API server did not answer on {self.base} within {STARTUP_TIMEOUT_S} s; "
                                 f"see {self.log_path}")
            time.sleep(3)
        password_file = self.home / "simple_auth_manager_passwords.json.generated"
        while not (password_file.is_file() and password_file.stat().st_size):
            if time.monotonic() > deadline:
                raise BenchError(f"no generated password in {password_file}; see {self.log_path}")
            time.sleep(2)
        self.password = json.loads(password_file.read_text())["admin"]
        self._login()
        say(f"API server up at {self.base}")
        while self.api("GET", f"/dags/{DAG_ID}", ok404=True) is None:
            errors = self.api("GET", "/importErrors").get("import_errors", [])
            if errors:
                raise BenchError("the DAG does not import:\n"
                                 + "\n".join(f"{e['filename']}:\n{e['stack_trace']}" for e in errors))
            self.check_alive()
            if time.monotonic() > deadline:
                raise BenchError(f"{DAG_ID} did not appear within {STARTUP_TIMEOUT_S} s; see {self.log_path}")
            time.sleep(3)
        say(f"{DAG_ID} parsed")

    def set_paused(self, paused: bool) -> None:
        self.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": paused})

    def runs(self) -> list[dict]:
        out, offset = [], 0
        while True:
            page = self.api("GET", f"/dags/{DAG_ID}/dagRuns?limit=100&offset={offset}")
            out += page["dag_runs"]
            offset += len(page["dag_runs"])
            if not page["dag_runs"] or offset >= page.get("total_entries", 0):
                return out

    def run(self, run_id: str) -> dict:
        return self.api("GET", f"/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(run_id, safe='')}")

    def tasks(self, run_id: str) -> list[dict]:
        path = f"/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances"
        return self.api("GET", path)["task_instances"]

    def task_log_dir(self, run_id: str, task_id: str) -> Path:
        return self.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={task_id}"


class Progress:
    """Prints a line whenever a running/queued run or one of its tasks changes state."""

    def __init__(self, airflow: Airflow):
        self.airflow = airflow
        self.last = ""
        self.next_at = 0.0

    def tick(self) -> None:
        if time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + 10
        try:
            active = [r for r in self.airflow.runs() if r["state"] in ("queued", "running")]
            parts = []
            for r in sorted(active, key=lambda r: r.get("run_after") or ""):
                tasks = sorted(self.airflow.tasks(r["dag_run_id"]), key=lambda t: t["task_id"])
                states = " ".join(f"{t['task_id']}={t['state']}" for t in tasks)
                parts.append(f"run {r['dag_run_id']} {r['state']}: {states}")
            line = " | ".join(parts) or "no active run"
        except Exception as exc:  # progress is cosmetic: never let it stop the measurement
            line = f"(progress unavailable: {exc})"
        if line != self.last:
            say(line)
            self.last = line
