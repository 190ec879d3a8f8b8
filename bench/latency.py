"""End-to-end latency under the real Airflow scheduler + LocalExecutor: a sensor file lands and a new
conjunction pair enters the catalogue -> how long until the file's observations are in silver and
the pair's alert is in gold, and where that time goes.

    .venv/bin/python bench/latency.py [--files 10] [--gap-s 30] [--cadence-minutes 15] [--timeout-s 1500] [--out FILE]

Everything lives under ``--work`` (default ``var/bench/latency``, wiped at the start): its own
AIRFLOW_HOME (SQLite, logs), lakehouse, landing, outbox and catalogue file, all passed as environment
variables (``scripts/airflow_env.sh`` is sourced with them preset), on a free API port (from 28080),
so nothing of ``make run``'s ``var/`` state is touched. The pipeline's Spark is a Spark Connect server
of the benchmark's own (``sda.lake.server``, on a free port from 25002), started before Airflow and stopped
at the end; every task is a client of it. Runs start from the landing watcher (``sda.orchestration.landing_watch``)
within seconds of a file landing; the cadence (default 15 minutes) is only the safety net.

1. *warm-up*: a generated catalogue and 5 simulated minutes of sensors in the landing zone;
   ``airflow standalone`` starts (own process group, stopped at the end even on error) with
   ``SDA_CADENCE_MINUTES=--cadence-minutes``; ``sda_pipeline`` is unpaused and the scheduler's first
   run processes the warm-up files. Measuring starts once that run has succeeded.
   ``--timeout-s`` bounds that warm-up, and then each file's wait for silver and gold.
2. *per file* i (after a random pause of 0..``--gap-s``, so landings fall at different moments of the
   run before theirs): 3 simulated minutes of sensors ending now are written to a staging directory and
   a conjunction pair is designed (:func:`sda.sim.conjunction.design_conjunction`, TCA now + 2 h, miss
   150 m, renumbered to NORAD 99801+2i / 99802+2i with correct TLE checksums); then, at ``t0``, the
   files get mtime ``t0`` and are moved into ``<landing>/<kind>/bench-<i>/`` with ``os.replace`` (a
   directory of their own: simulator file names repeat within a 5-minute chunk), and the catalogue
   file is replaced by itself + the pair (``os.replace`` too, so ``catalog`` never reads half a TLE).
3. the Delta logs of ``silver.observations``, ``gold.alerts``, ``ops.ingested_files`` and
   ``ops.run_metrics`` are tailed (new ``_delta_log/*.json`` commits; the parquet files they add are
   read with pyarrow, no JVM in this process): ``landing_to_silver_s`` = commit time of the first
   silver rows whose ``source_file`` is a landed file - t0; ``landing_to_alert_s`` = commit time of
   the first alert row for the pair - t0.
4. *breakdown*, from the REST API (``/api/v2``, bearer token from ``/auth/token``) for the run that
   ingested the files (``ops.ingested_files.run_id``), once it has ended:

   * ``scheduler_delay_s`` = run start - t0 = ``sched_behind_active_run_s`` (the part of it during
     which another run of the DAG was running: ``max_active_runs=1``, and the run under way at t0 has a
     data interval ending before t0, so its ingest cannot take the file) + ``sched_cadence_wait_s`` (the part of t0 ->
     run_after during which no run was active: waiting for the next cadence tick) + ``sched_queue_s``
     (the rest: run creation and queued -> running);
   * per task: ``task_duration_s`` (Airflow start -> end), ``spark_work_s`` = ``ops.run_metrics.seconds``
     (the job's own time: Spark session creation, table checks and the stage's work),
     ``client_s`` = duration - work (Airflow task start-up, the client's Python imports and Spark
     Connect session, the run_metrics / progress commits after the work); ``task_gap_s`` = time between a
     task's start and the end of the task before it (the scheduler between tasks).

The alert may come from an earlier run than the file: a run already under way at t0 whose
``catalog`` task had not started yet reads the new catalogue (``alert_run`` in the sample).

Prints progress lines and, last, one JSON line (medians over the files, plus every sample); the same
JSON goes to ``--out`` (default ``bench/results/latency.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT / "include"))

DAG_ID = "sda_pipeline"
UTC = dt.timezone.utc
FIRST_PAIR_ID = 99801  # pair i: 99801 + 2i / 99802 + 2i; 99901/99902 belong to the simulator
MAX_FILES = (99899 - FIRST_PAIR_ID) // 2  # the last pair stays below the simulator's 99901
WARMUP_MINUTES = 5.0
SAMPLE_MINUTES = 3.0
MISS_M = 150.0
TCA_AHEAD = dt.timedelta(hours=2)
POLL_S = 2.0
STARTUP_TIMEOUT_S = 600
MARKER = ".sda-bench-latency"  # marks --work as this benchmark's scratch directory (safe to wipe)
LOCATION_SETTINGS = ("SDA_LAKEHOUSE", "SDA_LANDING", "SDA_OUTBOX", "SDA_CATALOG_FILE", "SDA_CADENCE_MINUTES", "SDA_CONNECT_PORT")

_T_START = time.monotonic()


def say(msg: str) -> None:
    print(f"[{time.monotonic() - _T_START:6.0f}s] {msg}", flush=True)


def iso(t: float | None) -> str | None:
    return None if t is None else dt.datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ts(text: str | None) -> float | None:
    """An ISO-8601 instant from the REST API -> unix seconds."""
    if not text:
        return None
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


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
    out = subprocess.run(["bash", "-c", 'source scripts/airflow_env.sh >&2 && env -0'], cwd=PROJECT_ROOT, env=base,
                         capture_output=True, check=False)
    if out.returncode != 0:
        raise BenchError(f"scripts/airflow_env.sh failed: {out.stderr.decode(errors='replace').strip()}")
    env = dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)
    for junk in ("_", "SHLVL", "PWD", "OLDPWD"):
        env.pop(junk, None)
    return env


# --- Airflow -------------------------------------------------------------------------------------

class Airflow:
    """``airflow standalone`` in its own process group, and its REST API."""

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
        # standalone process is what stops its scheduler, API server, dag processor and triggerer.
        self.proc = subprocess.Popen([str(PROJECT_ROOT / ".venv" / "bin" / "airflow"), "standalone"], cwd=PROJECT_ROOT,
                                     env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        log.close()
        say(f"airflow standalone started (pid {self.proc.pid}, log {self.log_path}, API {self.base})")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            raise BenchError(f"Airflow exited (status {self.proc.returncode if self.proc else None}); see {self.log_path}")

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
        resp = self.http.post(f"{self.base}/auth/token", json={"username": "admin", "password": self.password}, timeout=30)
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
                raise BenchError(f"the API server did not answer on {self.base} within {STARTUP_TIMEOUT_S} s; see {self.log_path}")
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
                raise BenchError("the DAG does not import:\n" + "\n".join(f"{e['filename']}:\n{e['stack_trace']}" for e in errors))
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
        return self.api("GET", f"/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances")["task_instances"]

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
                parts.append(f"run {r['dag_run_id']} {r['state']}: " + " ".join(f"{t['task_id']}={t['state']}" for t in tasks))
            line = " | ".join(parts) or "no active run"
        except Exception as exc:  # progress is cosmetic: never let it stop the measurement
            line = f"(progress unavailable: {exc})"
        if line != self.last:
            say(line)
            self.last = line


# --- Delta logs, read without a JVM ---------------------------------------------------------------

class DeltaTail:
    """New commits of a Delta table: for each ``_delta_log/<version>.json`` after the last one seen,
    the commit time and the rows of the data files it adds (``columns`` only; partition columns are
    not in the files and must not be asked for). Commits are written atomically (temp file + rename)
    after their data files, so a visible commit's files are complete."""

    def __init__(self, table_path: Path, columns: list[str]):
        self.root = table_path
        self.log = table_path / "_delta_log"
        self.columns = columns
        self.next_version = 0

    def skip_existing(self) -> None:
        if self.log.is_dir():
            versions = [int(p.stem) for p in self.log.glob("*.json") if p.stem.isdigit()]
            self.next_version = max(versions, default=-1) + 1

    def poll(self) -> list[tuple[int, float, list[dict]]]:
        import pyarrow.parquet as pq

        out = []
        while True:
            commit = self.log / f"{self.next_version:020d}.json"
            if not commit.is_file():
                return out
            commit_ts, rows = None, []
            for line in commit.read_text().splitlines():
                if not line.strip():
                    continue
                action = json.loads(line)
                if "commitInfo" in action:
                    commit_ts = action["commitInfo"].get("inCommitTimestamp") or action["commitInfo"].get("timestamp")
                elif "add" in action and action["add"].get("dataChange", True):
                    path = self.root / urllib.parse.unquote(action["add"]["path"])
                    rows += pq.read_table(path, columns=self.columns).to_pylist()
            if commit_ts is None:
                commit_ts = commit.stat().st_mtime * 1000.0
            out.append((self.next_version, commit_ts / 1000.0, rows))
            self.next_version += 1


# --- data ----------------------------------------------------------------------------------------

def tle_checksum(line68: str) -> int:
    return sum(int(c) if c.isdigit() else (1 if c == "-" else 0) for c in line68[:68]) % 10


def renumber(line: str, norad_id: int) -> str:
    """A TLE line with another catalogue number (columns 3-7) and its checksum (column 69) redone."""
    if not 10000 <= norad_id <= 99999:
        raise ValueError(f"NORAD id {norad_id} does not fit a 5-digit TLE field")
    body = (line[:2] + f"{norad_id:05d}" + line[7:68]).ljust(68)
    return body + str(tle_checksum(body))


def design_pair(index: int, tca: dt.datetime) -> dict:
    """A conjunction pair for sample ``index``: the simulator's designer, renumbered, checked."""
    from sgp4.api import WGS72, Satrec

    from sda.sim.conjunction import closest_approach, design_conjunction

    primary, secondary = FIRST_PAIR_ID + 2 * index, FIRST_PAIR_ID + 2 * index + 1
    designed = design_conjunction(tca, MISS_M, seed=1000 + index)
    lines, sats = [], []
    for (_, l1, l2), norad_id, role in zip(designed["tle"], (primary, secondary), ("PRIMARY", "SECONDARY")):
        n1, n2 = renumber(l1, norad_id), renumber(l2, norad_id)
        sat = Satrec.twoline2rv(n1, n2, WGS72)
        if sat.satnum != norad_id or sat.error:
            raise BenchError(f"renumbered TLE for {norad_id} does not read back (satnum {sat.satnum}, error {sat.error})")
        lines += [f"BENCH-{index:02d}-{role}", n1, n2]
        sats.append(sat)
    t_ca, miss_m = closest_approach(sats[0], sats[1], tca.timestamp())
    return {"primary_id": primary, "secondary_id": secondary, "designed_tca": iso(tca.timestamp()),
            "achieved_tca": iso(t_ca), "achieved_miss_m": round(miss_m, 1), "text": "\n".join(lines) + "\n"}


def simulate_into(directory: Path, start: dt.datetime, end: dt.datetime, seed: int, catalog: Path | None,
                  catalog_out: Path | None = None):
    from sda.sim.simulate import SimConfig, simulate

    return simulate(SimConfig(start=start, end=end, landing=directory, catalog=catalog, catalog_out=catalog_out, seed=seed))


def land(staging: Path, files: list[str], landing: Path, subdir: str, t0: float) -> list[str]:
    """Move the staged sensor files into ``<landing>/<kind>/<subdir>/`` with mtime ``t0``: one
    ``os.replace`` each, so ingest sees a whole file or none."""
    landed = []
    for rel in files:
        kind, name = rel.split("/", 1)
        src, dst = staging / rel, landing / kind / subdir / name
        os.utime(src, (t0, t0))
        os.replace(src, dst)
        landed.append(f"{kind}/{subdir}/{name}")
    return landed


def replace_catalog(catalog: Path, extra: str) -> None:
    text = catalog.read_text()
    if text and not text.endswith("\n"):
        text += "\n"
    tmp = catalog.with_name(f".{catalog.name}.bench.tmp")
    tmp.write_text(text + extra)
    os.replace(tmp, catalog)


# --- the measurement -----------------------------------------------------------------------------

class Lake:
    """The tails the benchmark needs, and what they have shown so far."""

    def __init__(self, lakehouse: Path):
        self.silver = DeltaTail(lakehouse / "silver" / "observations", ["source_file", "run_id"])
        self.alerts = DeltaTail(lakehouse / "gold" / "alerts", ["primary_id", "secondary_id", "tca", "miss_m", "run_id", "level"])
        self.ledger = DeltaTail(lakehouse / "ops" / "ingested_files", ["file_path", "run_id", "status", "batch_id"])
        self.metrics = DeltaTail(lakehouse / "ops" / "run_metrics", ["stage", "run_id", "seconds"])
        self.file_run: dict[str, str] = {}  # landing path -> ingest run id
        self.seconds: dict[tuple[str, str], float] = {}  # (stage, run_id) -> job seconds (a retry overwrites)

    def poll_bookkeeping(self) -> None:
        for _, _, rows in self.ledger.poll():
            for r in rows:
                self.file_run.setdefault(r["file_path"], r["run_id"])
        for _, _, rows in self.metrics.poll():
            for r in rows:
                self.seconds[(r["stage"], r["run_id"])] = float(r["seconds"])


def wait_run_end(airflow: Airflow, run_id: str, deadline: float, progress: Progress) -> dict:
    while True:
        run = airflow.run(run_id)
        if run["state"] in ("success", "failed"):
            return run
        airflow.check_alive()
        progress.tick()
        if time.monotonic() > deadline:
            raise BenchError(f"run {run_id} still {run['state']} at the timeout")
        time.sleep(POLL_S)


def failed_tasks_message(airflow: Airflow, run_id: str) -> str:
    bad = [t["task_id"] for t in airflow.tasks(run_id) if t["state"] not in ("success", "skipped")]
    where = f"; task log: {airflow.task_log_dir(run_id, bad[0])}" if bad else ""
    return f"run {run_id} failed (tasks not successful: {', '.join(bad) or 'none'}){where}; Airflow log: {airflow.log_path}"


def warm_up(airflow: Airflow, lake: Lake, warm_files: list[str], timeout_s: float, progress: Progress) -> str:
    """Wait until every warm-up file is ingested and the run that took them has succeeded."""
    deadline, next_check = time.monotonic() + timeout_s, 0.0
    # The files were written before the triggerer watched the landing zone, and the scheduled run of
    # the latest cadence interval may end before they were: touch them (mtime and inode change time
    # now), so that the landing watcher starts a run that takes them.
    time.sleep(10)  # the triggerer picks the new watcher up
    landing = Path(os.environ["SDA_LANDING"])
    for rel in warm_files:
        os.utime(landing / rel)
    say(f"warm-up: waiting for a run to take the {len(warm_files)} warm-up files (touched for the landing watcher)")
    while True:
        lake.poll_bookkeeping()
        runs = {lake.file_run.get(f) for f in warm_files}
        if None not in runs:
            break
        if time.monotonic() >= next_check:
            next_check = time.monotonic() + 10
            for r in airflow.runs():
                if r["state"] == "failed":
                    raise BenchError("warm-up: " + failed_tasks_message(airflow, r["dag_run_id"]))
        airflow.check_alive()
        progress.tick()
        if time.monotonic() > deadline:
            raise BenchError(f"warm-up: files not ingested within {timeout_s:.0f} s; see {airflow.log_path}")
        time.sleep(POLL_S)
    for run_id in sorted(runs):
        run = wait_run_end(airflow, run_id, deadline, progress)
        if run["state"] != "success":
            raise BenchError("warm-up: " + failed_tasks_message(airflow, run_id))
    say(f"warm-up done: run(s) {', '.join(sorted(runs))} succeeded")
    return sorted(runs)[-1]


def behind_active_runs(runs: list[dict], own_run_id: str, t0: float, until: float) -> float:
    """Seconds of [t0, until] during which another run of the DAG was running (union of intervals)."""
    spans = []
    for r in runs:
        if r["dag_run_id"] == own_run_id or ts(r.get("start_date")) is None:
            continue
        start, end = ts(r["start_date"]), ts(r.get("end_date")) or until
        lo, hi = max(start, t0), min(end, until)
        if hi > lo:
            spans.append((lo, hi))
    total, cur_lo, cur_hi = 0.0, None, None
    for lo, hi in sorted(spans):
        if cur_hi is None or lo > cur_hi:
            total += (cur_hi - cur_lo) if cur_hi is not None else 0.0
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total


def breakdown(airflow: Airflow, lake: Lake, run: dict, t0: float) -> dict:
    """Where the time of one pickup run went (see the module docstring)."""
    run_id = run["dag_run_id"]
    start, run_after = ts(run["start_date"]), ts(run.get("run_after"))
    runs = airflow.runs()
    # t0 -> run start = behind another run (max_active_runs=1) + waiting for a tick while nothing ran
    # + the rest (run creation, queued -> running)
    behind = behind_active_runs(runs, run_id, t0, start) if start > t0 else 0.0
    tick_wait = max(0.0, run_after - t0 - behind_active_runs(runs, run_id, t0, run_after)) if run_after else 0.0
    tasks = sorted((t for t in airflow.tasks(run_id) if t.get("start_date")), key=lambda t: ts(t["start_date"]))
    per_task, ended = {}, []
    for t in tasks:
        t_start, t_end = ts(t["start_date"]), ts(t.get("end_date"))
        before = [e for e in ended if e <= t_start]
        gap = t_start - (max(before) if before else start)
        duration = (t_end - t_start) if t_end else None
        work = lake.seconds.get((t["task_id"], run_id))
        per_task[t["task_id"]] = {
            "state": t["state"], "try_number": t.get("try_number"), "start": t["start_date"], "end": t.get("end_date"),
            "task_gap_s": r2(gap), "task_duration_s": r2(duration), "spark_work_s": r2(work),
            "client_s": r2(duration - work) if duration is not None and work is not None else None,
        }
        if t_end:
            ended.append(t_end)
    def total(key: str) -> float | None:
        values = [v[key] for v in per_task.values()]
        return r2(sum(values)) if values and None not in values else None

    return {
        "run_id": run_id, "state": run["state"], "run_after": run.get("run_after"), "queued_at": run.get("queued_at"),
        "start_date": run.get("start_date"), "end_date": run.get("end_date"),
        "data_interval_start": run.get("data_interval_start"), "data_interval_end": run.get("data_interval_end"),
        "scheduler_delay_s": r2(start - t0),
        "sched_behind_active_run_s": r2(behind),
        "sched_cadence_wait_s": r2(tick_wait),
        "sched_queue_s": r2(start - t0 - behind - tick_wait) if start > t0 else None,
        "run_duration_s": r2(ts(run["end_date"]) - start) if run.get("end_date") else None,
        "tasks": per_task,
        "task_gap_s_total": total("task_gap_s"),
        "client_s_total": total("client_s"),
        "spark_work_s_total": total("spark_work_s"),
        "task_duration_s_total": total("task_duration_s"),
    }


def measure_one(index: int, airflow: Airflow, lake: Lake, args, dirs: dict[str, Path], rng: random.Random,
                progress: Progress) -> dict:
    pause = rng.uniform(0, args.gap_s)
    say(f"file {index + 1}/{args.files}: pausing {pause:.0f} s (random phase against the run before)")
    pause_end = time.monotonic() + pause
    while time.monotonic() < pause_end:
        progress.tick()
        time.sleep(min(POLL_S, max(0.0, pause_end - time.monotonic())))

    # prepare (not timed): sensor files in staging, the pair designed
    now = dt.datetime.now(UTC).replace(microsecond=0)
    staging = dirs["staging"] / f"bench-{index:02d}"
    shutil.rmtree(staging, ignore_errors=True)
    sim = simulate_into(staging, now - dt.timedelta(minutes=SAMPLE_MINUTES), now, seed=100 + index, catalog=dirs["base_catalog"])
    pair = design_pair(index, now + TCA_AHEAD)
    subdir = f"bench-{index:02d}"
    for kind in {rel.split("/", 1)[0] for rel in sim.files}:
        (dirs["landing"] / kind / subdir).mkdir(parents=True, exist_ok=True)
    for tail in (lake.silver, lake.alerts):
        tail.skip_existing()  # earlier commits cannot hold this sample's rows
    lake.poll_bookkeeping()

    # t0: land the files and the pair at the same moment
    t0 = time.time()
    landed = land(staging, sim.files, dirs["landing"], subdir, t0)
    replace_catalog(dirs["catalog"], pair["text"])
    say(f"file {index + 1}: landed {len(landed)} sensor files ({sum(sum(c.values()) for c in sim.counts.values())} records, "
        f"events {iso(now.timestamp() - SAMPLE_MINUTES * 60)} .. {iso(now.timestamp())}) under */{subdir}/ and pair "
        f"{pair['primary_id']}/{pair['secondary_id']} (TCA {pair['achieved_tca']}, miss {pair['achieved_miss_m']} m) at t0 {iso(t0)}")

    wanted, silver, alert, next_check = set(landed), None, None, 0.0
    deadline = time.monotonic() + args.timeout_s
    while silver is None or alert is None:
        if silver is None:
            for version, commit_ts, rows in lake.silver.poll():
                hits = [r for r in rows if r["source_file"] in wanted]
                if hits:
                    silver = {"version": version, "commit": iso(commit_ts), "landing_to_silver_s": r2(commit_ts - t0),
                              "detected_s": r2(time.time() - t0), "rows": len(hits),
                              "files_with_rows": len({r["source_file"] for r in hits}), "normalize_run_id": hits[0]["run_id"]}
                    say(f"file {index + 1}: silver has {len(hits)} rows of it (commit v{version}): {silver['landing_to_silver_s']} s after t0")
                    break
        if alert is None:
            for version, commit_ts, rows in lake.alerts.poll():
                hits = [r for r in rows if (r["primary_id"], r["secondary_id"]) == (pair["primary_id"], pair["secondary_id"])]
                if hits:
                    h = hits[0]
                    alert = {"version": version, "commit": iso(commit_ts), "landing_to_alert_s": r2(commit_ts - t0),
                             "detected_s": r2(time.time() - t0), "level": h["level"], "miss_m": r2(h["miss_m"]),
                             "tca": str(h["tca"]), "conjunction_run_id": h["run_id"]}
                    say(f"file {index + 1}: gold alert for {pair['primary_id']}/{pair['secondary_id']} (commit v{version}, "
                        f"{h['level']}, miss {h['miss_m']:.0f} m): {alert['landing_to_alert_s']} s after t0")
                    break
        if silver is None or alert is None:
            if time.monotonic() >= next_check:  # a failed run would hold the file back for good
                next_check = time.monotonic() + 10
                for r in airflow.runs():
                    if r["state"] == "failed" and (ts(r.get("end_date")) or 0) > t0:
                        raise BenchError(f"file {index + 1}: " + failed_tasks_message(airflow, r["dag_run_id"]))
            airflow.check_alive()
            progress.tick()
            if time.monotonic() > deadline:
                raise BenchError(f"file {index + 1}: not through within --timeout-s {args.timeout_s:.0f} "
                                 f"(silver {'seen' if silver else 'not seen'}, alert {'seen' if alert else 'not seen'}); "
                                 f"see {airflow.log_path}")
            time.sleep(POLL_S)

    # the run that picked the files up: the ledger says which; wait for it (and the alert's run) to end
    lake.poll_bookkeeping()
    pickup_ids = sorted({lake.file_run[f] for f in landed if f in lake.file_run})
    if not pickup_ids:
        raise BenchError(f"file {index + 1}: silver has its rows but the ledger names no ingest run")
    pickup_id = pickup_ids[0]
    say(f"file {index + 1}: waiting for run(s) {', '.join(sorted({pickup_id, alert['conjunction_run_id']}))} to end (for the breakdown)")
    deadline = time.monotonic() + args.timeout_s  # bookkeeping only: a fresh allowance
    for run_id in sorted({pickup_id, alert["conjunction_run_id"]}):
        run = wait_run_end(airflow, run_id, deadline, progress)
        if run["state"] != "success":
            raise BenchError(f"file {index + 1}: " + failed_tasks_message(airflow, run_id))
    lake.poll_bookkeeping()
    detail = breakdown(airflow, lake, airflow.run(pickup_id), t0)
    alert_run_id = alert["conjunction_run_id"]
    # a run already under way at t0 whose catalog task had not started yet raises the alert first
    alert_detail = detail if alert_run_id == pickup_id else breakdown(airflow, lake, airflow.run(alert_run_id), t0)
    sample = {
        "file": index + 1, "t0": iso(t0), "landed_files": len(landed), "records": sum(sum(c.values()) for c in sim.counts.values()),
        "landing_to_silver_s": silver["landing_to_silver_s"], "landing_to_alert_s": alert["landing_to_alert_s"],
        "pair": {k: pair[k] for k in ("primary_id", "secondary_id", "designed_tca", "achieved_tca", "achieved_miss_m")},
        "silver": silver, "alert": alert, "ingest_run_ids": pickup_ids,
        "alert_from_pickup_run": alert_run_id == pickup_id, "pickup_run": detail,
        "alert_run": None if alert_run_id == pickup_id else alert_detail,
    }
    tasks = detail["tasks"]
    say(f"file {index + 1}: silver {sample['landing_to_silver_s']} s, alert {sample['landing_to_alert_s']} s; "
        f"scheduler delay {detail['scheduler_delay_s']} s (behind active run {detail['sched_behind_active_run_s']}, "
        f"cadence wait {detail['sched_cadence_wait_s']}, queue {detail['sched_queue_s']}); per task duration/work: "
        + ", ".join(f"{k} {v['task_duration_s']}/{v['spark_work_s']}" for k, v in tasks.items()))
    return sample


def median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def summarize(samples: list[dict]) -> dict:
    runs = [s["pickup_run"] for s in samples]
    task_names = [name for name in dict.fromkeys(n for r in runs for n in r["tasks"])]

    def per_task(key: str) -> dict:
        out = {name: median([r["tasks"].get(name, {}).get(key) for r in runs]) for name in task_names}
        out["total"] = median([r[f"{key}_total"] for r in runs])
        return out

    return {
        "scheduler_delay_s": median([r["scheduler_delay_s"] for r in runs]),
        "sched_behind_active_run_s": median([r["sched_behind_active_run_s"] for r in runs]),
        "sched_cadence_wait_s": median([r["sched_cadence_wait_s"] for r in runs]),
        "sched_queue_s": median([r["sched_queue_s"] for r in runs]),
        "task_start_s": per_task("task_gap_s"),
        "client_s": per_task("client_s"),
        "server_work_s": per_task("spark_work_s"),
        "task_duration_s": per_task("task_duration_s"),
        "run_duration_s": median([r["run_duration_s"] for r in runs]),
        "alerts_from_run_active_at_t0": sum(1 for s in samples if not s["alert_from_pickup_run"]),
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=10, help=f"files (and conjunction pairs) to land one after the other (1..{MAX_FILES}; default 10)")
    p.add_argument("--gap-s", type=float, default=30.0, help="longest random pause before each landing (default 30 s)")
    p.add_argument("--cadence-minutes", type=int, default=15,
                   help="SDA_CADENCE_MINUTES of the DAG under test, the safety net behind the landing watcher (default 15)")
    p.add_argument("--timeout-s", type=float, default=1500.0,
                   help="limit for the warm-up and for each file to reach silver and gold (default 1500)")
    p.add_argument("--seed", type=int, default=1, help="seed of the random landing phases (default 1)")
    p.add_argument("--work", type=Path, default=PROJECT_ROOT / "var" / "bench" / "latency",
                   help="working directory, wiped at the start (default var/bench/latency)")
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "bench" / "results" / "latency.json")
    args = p.parse_args(argv)
    if args.files < 1:
        p.error(f"--files {args.files}: at least 1 file is needed to measure anything")
    if args.files > MAX_FILES:
        p.error(f"--files {args.files}: at most {MAX_FILES} (each file gets its own NORAD ids {FIRST_PAIR_ID}+2i/+2i+1 below 99900)")
    if args.cadence_minutes < 1:
        p.error(f"--cadence-minutes {args.cadence_minutes}: the DAG's cadence must be at least 1 minute")
    if not args.gap_s >= 0:
        p.error(f"--gap-s {args.gap_s}: expected a number of seconds >= 0")
    if not args.timeout_s > 0:
        p.error(f"--timeout-s {args.timeout_s}: expected a positive number of seconds")
    work = args.work.resolve()
    if work.is_dir() and any(work.iterdir()) and not (work / MARKER).is_file():
        p.error(f"--work {work}: not empty and not a previous latency-benchmark directory; refusing to wipe it")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / MARKER).write_text("scratch directory of bench/latency.py; wiped on every run\n")
    env = bench_env(work, args.cadence_minutes)
    # this process's simulator calls and settings see the same SDA_* locations
    for key in LOCATION_SETTINGS:
        os.environ[key] = env[key]
    dirs = {"landing": Path(env["SDA_LANDING"]), "catalog": Path(env["SDA_CATALOG_FILE"]),
            "base_catalog": work / "catalog" / "base.tle", "staging": work / "staging"}
    for d in ("landing", "staging"):
        dirs[d].mkdir(parents=True, exist_ok=True)
    lake = Lake(Path(env["SDA_LAKEHOUSE"]))

    now = dt.datetime.now(UTC).replace(microsecond=0)
    warm = simulate_into(dirs["landing"], now - dt.timedelta(minutes=WARMUP_MINUTES), now, seed=1, catalog=None,
                         catalog_out=dirs["catalog"])
    shutil.copy2(dirs["catalog"], dirs["base_catalog"])  # what the sensors observe in every sample
    say(f"warm-up data: catalogue {dirs['catalog']}, {len(warm.files)} files in {dirs['landing']}")

    from sda.config.settings import load_settings
    from sda.lake import server

    spark_settings = load_settings(env={k: v for k, v in env.items() if k.startswith("SDA_")})
    airflow = Airflow(env, work / "standalone.log")
    progress = Progress(airflow)
    samples: list[dict] = []
    try:
        started = server.start(spark_settings)
        say(f"Spark Connect server at {spark_settings.connect_url}: {json.dumps(started)}")
        airflow.start()
        airflow.wait_ready()
        airflow.set_paused(False)
        say(f"unpaused {DAG_ID} (cadence {args.cadence_minutes} min): the scheduler now creates the runs")
        warm_up(airflow, lake, warm.files, args.timeout_s, progress)
        rng = random.Random(args.seed)
        for i in range(args.files):
            samples.append(measure_one(i, airflow, lake, args, dirs, rng, progress))
    finally:
        if airflow.alive() and airflow.token:
            try:
                airflow.set_paused(True)
            except Exception:
                pass
        airflow.stop()
        server.stop(spark_settings)

    alerts = sorted(s["landing_to_alert_s"] for s in samples)
    result = {
        "files": len(samples),
        "landing_to_silver_median_s": median([s["landing_to_silver_s"] for s in samples]),
        "landing_to_alert_median_s": median(alerts),
        "landing_to_alert_p90_s": r2(alerts[min(len(alerts) - 1, max(0, -(-9 * len(alerts) // 10) - 1))]) if alerts else None,
        "cadence_minutes": args.cadence_minutes,
        "breakdown": summarize(samples),
        "samples": samples,
        "machine": {"cores": os.cpu_count(), "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
                    "spark_master": env.get("SDA_SPARK_MASTER", "local[2] (default)"),
                    "parallelism": env.get("AIRFLOW__CORE__PARALLELISM")},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    say(f"wrote {args.out}")
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    try:
        main()
    except BenchError as exc:
        print(f"latency.py: {exc}", file=sys.stderr)
        sys.exit(1)
