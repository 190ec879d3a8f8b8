"""A real Airflow for tests: PostgreSQL on loopback, then the API server, scheduler, DAG processor,
triggerer and task-log server as separate processes (the shape of docker-compose.yaml), started with
the commands ``make run`` uses (:func:`sda.orchestration.local_stack.component_commands`, listening on
127.0.0.1 only), with the simple auth manager's generated password. Used by tests/test_end_to_end.py.

PostgreSQL comes from Debian's ``postgresql`` package (``.ci/run`` installs it when missing); where
it is absent :func:`find_postgres` says so and the tests run Airflow on SQLite instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from sda.orchestration.local_stack import COMPONENTS, component_commands, component_env
from tests.ports import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def find_postgres() -> tuple[Path | None, str]:
    """The directory of PostgreSQL's server programs (initdb, pg_ctl), or None and why not."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    for bindir in reversed(candidates):
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir, ""
    which = shutil.which("initdb")
    if which and shutil.which("pg_ctl"):
        return Path(which).parent, ""
    return None, ("PostgreSQL server programs (initdb, pg_ctl) not found: install Debian's package with "
                  "`apt-get install -y postgresql` (.ci/run does this), then rerun")


def _as_postgres_user() -> list[str]:
    """PostgreSQL refuses to run as root: as root, run its programs as the ``postgres`` user."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        raise RuntimeError("running as root without runuser: cannot start PostgreSQL as an unprivileged user")
    return [runuser, "-u", "postgres", "--"]


class Postgres:
    """A throw-away cluster in ``root`` listening on 127.0.0.1:<port> only, with a database ``airflow``
    owned by user ``airflow`` whose password is generated here (never stored in the repository)."""

    def __init__(self, bindir: Path, root: Path):
        self.bindir, self.root = bindir, root
        self.data, self.sock, self.log = root / "data", root / "sock", root / "postgres.log"
        self.port = free_port()
        self.password = secrets.token_urlsafe(24)

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://airflow:{self.password}@127.0.0.1:{self.port}/airflow"

    def _run(self, *cmd: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([*_as_postgres_user(), *cmd], check=True, capture_output=True, text=True, timeout=120,
                              **kw)

    def start(self) -> "Postgres":
        self.root.mkdir(parents=True, exist_ok=True)
        self.sock.mkdir(exist_ok=True)
        self.log.touch()
        pwfile = self.root / "superuser.pw"
        pwfile.write_text(secrets.token_urlsafe(24) + "\n")
        if os.geteuid() == 0:
            for path in (self.root, self.sock, self.log, pwfile):
                shutil.chown(path, "postgres", "postgres")
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--pwfile", str(pwfile),
                  "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start",
                  "-o", f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1")
        psql = [str(self.bindir / "psql"), "-h", str(self.sock), "-p", str(self.port), "-U", "postgres",
                "-v", "ON_ERROR_STOP=1", "-c"]
        self._run(*psql, f"CREATE USER airflow WITH PASSWORD '{self.password}'")
        self._run(*psql, "CREATE DATABASE airflow OWNER airflow")
        return self

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def query(self, sql: str, *params) -> list[tuple]:
        import psycopg2

        with contextlib.closing(psycopg2.connect(host="127.0.0.1", port=self.port, dbname="airflow",
                                                 user="airflow", password=self.password)) as conn:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()


class Airflow:
    """The local stack's components (``airflow api-server``, ``scheduler``, ``dag-processor``,
    ``triggerer`` and the log server) with one environment; ``api()`` calls the REST API as admin."""

    COMPONENTS = COMPONENTS

    def __init__(self, home: Path, env: dict[str, str]):
        self.home = home
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = dict(env)
        self.env.update({
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "sda.orchestration.executor.PreloadingLocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "2",
            "AIRFLOW__CORE__AUTH_MANAGER":
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json.generated"),
            "AIRFLOW__API__PORT": str(self.port),
            # make run's Airflow may hold the default log-server ports
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__API__BASE_URL": self.base,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base}/execution/",
            # the API server signs the tokens tasks present to the execution API: one secret for all
            # components, generated per run (docker-compose.yaml takes it from .env)
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.25",  # as scripts/airflow_env.sh
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', os.environ.get('PATH', ''))}",
            "PYTHONPATH": str(PROJECT_ROOT / "include"),
            "PYSPARK_PYTHON": sys.executable,
        })
        self.env.pop("SDA_BIND_HOST", None)  # the default: 127.0.0.1
        self.env = component_env(self.env)
        self.procs: list[subprocess.Popen] = []
        self.log = home / "components.log"
        self._token: str | None = None

    def run(self, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "airflow"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=PROJECT_ROOT)

    def start(self) -> "Airflow":
        self.home.mkdir(parents=True, exist_ok=True)
        migrate = self.run("db", "migrate", timeout=900)
        if migrate.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{migrate.stdout[-3000:]}\n{migrate.stderr[-3000:]}")
        out = self.log.open("a")
        for cmd in component_commands("127.0.0.1", self.port).values():
            self.procs.append(subprocess.Popen(cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                               cwd=PROJECT_ROOT, start_new_session=True))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.status(f"{self.base}/api/v2/monitor/health") == 200 and self.password_file.is_file():
                return self
            dead = [c for c, p in zip(self.COMPONENTS, self.procs) if p.poll() is not None]
            if dead:
                raise RuntimeError(f"airflow {', '.join(dead)} exited during start-up:\n{self.tail()}")
            time.sleep(3)
        raise RuntimeError(f"the API server did not answer within 300 s:\n{self.tail()}")

    def stop(self) -> None:
        import signal

        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    @property
    def password_file(self) -> Path:
        return self.home / "passwords.json.generated"

    @property
    def password(self) -> str:
        return json.loads(self.password_file.read_text())["admin"]

    @staticmethod
    def status(url: str, method: str = "GET", body: dict | None = None, headers: dict | None = None) -> int:
        req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return 0

    def token(self, username: str = "admin", password: str | None = None) -> str:
        body = {"username": username, "password": self.password if password is None else password}
        req = urllib.request.Request(f"{self.base}/auth/token", method="POST", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)["access_token"]

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        for attempt in (0, 1):
            if self._token is None or attempt:
                self._token = self.token()
            req = urllib.request.Request(f"{self.base}/api/v2{path}", method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {self._token}"})
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    text = r.read()
                    return json.loads(text) if text else {}
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and not attempt:
                    continue  # the token expired: log in again once
                raise RuntimeError(f"{method} {path}: HTTP {exc.code} {exc.read()[:2000]!r}") from None
        raise AssertionError("unreachable")

    def get_text(self, path: str) -> str:
        """``GET <base><path>`` (outside the REST API, e.g. a plugin's app) with a login: the body as text."""
        req = urllib.request.Request(f"{self.base}{path}", headers={"Authorization": f"Bearer {self.token()}"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.read().decode()

    def wait_for_dag(self, dag_id: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.api("GET", f"/dags/{dag_id}")
                return
            except RuntimeError:
                errors = self.api("GET", "/importErrors").get("import_errors", [])
                if errors:
                    raise RuntimeError(f"DAG import errors: {errors}") from None
                time.sleep(3)
        raise RuntimeError(f"{dag_id} did not appear within {timeout} s:\n{self.tail()}")

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 1800,
                     drop_others: bool = False) -> tuple[str, dict[str, str]]:
        """Poll until the run ends; with ``drop_others``, delete any other queued run of the DAG."""
        deadline = time.monotonic() + timeout
        state, tasks = "queued", {}
        while time.monotonic() < deadline:
            if drop_others:
                for other in self.api("GET", f"/dags/{dag_id}/dagRuns?state=queued")["dag_runs"]:
                    if other["dag_run_id"] != run_id:
                        self.api("DELETE", f"/dags/{dag_id}/dagRuns/{other['dag_run_id']}")
            state = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"]
            instances = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
            tasks = {t["task_id"]: t["state"] for t in instances}
            if state in ("success", "failed"):
                break
            time.sleep(10)
        return state, tasks
