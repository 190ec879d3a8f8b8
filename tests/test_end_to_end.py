"""End to end, the way it is operated: Airflow behind a login runs ``sda_pipeline`` through its
scheduler over simulated sensors; the tables are checked against the simulator's truth file (never
against pipeline code); a backfill goes through the REST API; a run's report opens from its UI link in
headless Chromium.

The metadata database is PostgreSQL (Debian's package, started by the fixture on 127.0.0.1) when its
server programs are installed -- ``.ci/run`` installs them -- else SQLite, as ``make run`` uses (or
when ``SDA_TEST_AIRFLOW_DB=sqlite``). Airflow's API server, scheduler and DAG processor run as
separate processes (with the triggerer and the task-log server), as in docker-compose.yaml, started
with ``make run``'s commands; none of them listens beyond 127.0.0.1. The REST API refuses
unauthenticated calls (401); with the simple auth manager's generated password a run is triggered and
must succeed with every task, gates included. Then:

* every landed record is in bronze or quarantine, once; duplicates are gone; correlation carries the
  true NORAD id; the injected near-collision is screened, alerted and published to the outbox;
* ``POST /api/v2/backfills`` recomputes one past interval under the scheduler (``--mode replay``)
  and the tables come out unchanged;
* the quality gate's "Run report" extra link, opened in Chromium with the UI's login cookie, shows
  that run's page, whose Data Docs link opens the run's validation;
* a file landing starts an asset-triggered run (the landing watcher, in the triggerer), and a file
  landing during that run is taken by the one run after it, never by a pile of runs.

Every task runs on the suite's one Spark Connect server (tests/conftest.py), through the
``spark_connect`` connection.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

from tests import injected_pair
from tests.airflow_server import Airflow, Postgres, find_postgres
from tests.browser import Browser, find_chromium
from tests.chain import COMPARED, differences, snapshot
from tests.ports import is_loopback, listening_sockets, process_tree

pytestmark = pytest.mark.slow

PROJECT_ROOT = Path(__file__).resolve().parents[1]
UTC = dt.timezone.utc
DAG_ID = "sda_pipeline"
STAGES = ("catalog", "ingest", "normalize", "dedup", "correlate", "fuse", "acquire", "conjunction")
GATES = ("quality_silver", "quality_gold")
NOW = dt.datetime.now(UTC).replace(microsecond=0)
SIM_START = NOW - dt.timedelta(hours=2)
SIM_END = SIM_START + dt.timedelta(minutes=5)
TCA = NOW + dt.timedelta(hours=1)
PAIR = {99901, 99902}
RUN_ID = f"manual__e2e_test__{NOW:%Y%m%dT%H%M%SZ}"


def _iso(t: dt.datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    """PostgreSQL on loopback, or None (then Airflow keeps its SQLite default) where it cannot run."""
    bindir, why = find_postgres()
    if os.environ.get("SDA_TEST_AIRFLOW_DB", "").lower() == "sqlite":
        bindir, why = None, "SDA_TEST_AIRFLOW_DB=sqlite"
    if bindir is None:
        print(f"\nAirflow's metadata database: SQLite ({why})")
        yield None
        return
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
def data(tmp_path_factory, connect_server):
    root = tmp_path_factory.mktemp("pipeline")
    dirs = {name: root / name for name in ("lakehouse", "landing", "outbox")}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SDA_", "AIRFLOW"))}
    env.update({
        "SDA_LAKEHOUSE": str(dirs["lakehouse"]),
        "SDA_LANDING": str(dirs["landing"]),
        "SDA_OUTBOX": str(dirs["outbox"]),
        "SDA_CATALOG_FILE": str(root / "catalog" / "catalog.tle"),
        "SDA_SHUFFLE_PARTITIONS": "2",
        "SDA_SCREENING_HORIZON_H": "3",
        # every task runs on the suite's one Spark Connect server
        "SDA_CONNECT_PORT": str(connect_server.connect_port),
        "AIRFLOW_CONN_SPARK_CONNECT": json.dumps({"conn_type": "spark_connect", "host": "sc://127.0.0.1",
                                                  "port": connect_server.connect_port}),
    })
    sim = subprocess.run(
        [sys.executable, "-m", "sda.sim.simulate", "--start", _iso(SIM_START), "--end", _iso(SIM_END),
         "--landing", str(dirs["landing"]), "--catalog-out", env["SDA_CATALOG_FILE"], "--objects", "120",
         "--inject-conjunction", "--tca", _iso(TCA), "--miss-m", "150"],  # the default sky
        env=env, capture_output=True, text=True, timeout=600, cwd=PROJECT_ROOT,
    )
    assert sim.returncode == 0, sim.stderr[-3000:]
    return {"root": root, "env": env, **dirs}


@pytest.fixture(scope="module")
def airflow(postgres, data):
    env = dict(data["env"])
    if postgres is not None:
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
        "note": "tests/test_end_to_end.py",
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
    runs = f"{airflow.base}/api/v2/dags/{DAG_ID}/dagRuns"
    assert airflow.status(runs, method="POST", body={"logical_date": None}) == 401


def test_wrong_password_gets_no_token_and_the_generated_one_does(airflow):
    guess = {"username": "admin", "password": "admin"}
    assert airflow.status(f"{airflow.base}/auth/token", method="POST", body=guess) == 401
    # the password is generated at start-up into AIRFLOW_HOME (outside the repository), never "admin"
    assert airflow.password and airflow.password != "admin"
    assert not airflow.password_file.resolve().is_relative_to(PROJECT_ROOT / "dags")
    token = airflow.token()
    assert airflow.status(f"{airflow.base}/api/v2/dags", headers={"Authorization": f"Bearer {token}"}) == 200


# --- the compose health check of the dag processor and triggerer ------------------------------------

@pytest.mark.parametrize("job_type", ["DagProcessorJob", "TriggererJob"])
def test_jobcheck_agrees_with_airflow_jobs_check(airflow, pipeline_run, job_type):
    """docker-compose.yaml probes these two services with sda.orchestration.jobcheck (SQLAlchemy
    alone) instead of `airflow jobs check` (all of Airflow): on this live metadata database, with the
    components running, both say the job is alive (tests/include/orchestration/test_jobcheck.py has the other cases)."""
    theirs = airflow.run("jobs", "check", "--job-type", job_type, "--local", timeout=300)
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr
    env = dict(airflow.env)  # without PostgreSQL, Airflow's default: SQLite in its home
    env.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{airflow.home / 'airflow.db'}")
    ours = subprocess.run([sys.executable, "-m", "sda.orchestration.jobcheck", job_type], env=env,
                          capture_output=True, text=True, timeout=120)
    assert ours.returncode == 0, ours.stderr


# --- the pipeline under the scheduler -----------------------------------------------------------------

def test_pipeline_run_succeeds_under_the_scheduler(pipeline_run, airflow):
    assert pipeline_run["state"] == "success", f"{pipeline_run}\n{airflow.tail()}"
    assert pipeline_run["tasks"] == {task: "success" for task in STAGES + GATES}


def test_the_dag_run_is_one_trace_of_its_stage_spans_and_its_metrics_are_exposed(pipeline_run, data, airflow):
    """Each task of the run is a span of the run's trace, carrying its run id (sda.pipeline.tracing); the API
    server serves every stage's Prometheus textfile to a logged-in scrape (sda.pipeline.exposition)."""
    from sda.pipeline import tracing
    from tests.include.pipeline.test_exposition import parse

    spans = tracing.spans(data["lakehouse"].parent / "traces" / "spans.jsonl", RUN_ID)
    stages = {s["name"].removeprefix("stage ") for s in spans}
    assert set(STAGES) <= stages, f"spans of {RUN_ID}: {sorted(stages)}"
    assert all({"key": "sda.run_id", "value": {"stringValue": RUN_ID}} in s["attributes"] for s in spans)
    [ingest] = [s for s in spans if s["name"] == "stage ingest"]
    assert any(a["key"] == "sda.landed_files" and int(a["value"]["intValue"]) > 0 for a in ingest["attributes"])
    text = airflow.get_text("/sda-metrics/metrics")
    ran = {dict(k)["stage"] for k, v in parse(text)["sda_stage_runs_total"]["samples"].items()
           if dict(k)["outcome"] == "ok" and v >= 1}
    assert set(STAGES) <= ran, text[:2000]
    families = parse(text)
    assert {dict(k)["level"] for k in families["sda_open_alerts"]["samples"]} == {"red", "yellow", "none"}
    assert families["sda_propagation_errors_total"]["samples"]  # the screening counted its refusals (perhaps 0)
    # every file the run ingested, from its landing to the run's alerts out (sda.pipeline.latency)
    landed = next(int(a["value"]["intValue"]) for a in ingest["attributes"] if a["key"] == "sda.landed_files")
    latency = {dict(k)["__name__"].removeprefix("sda_landing_to_alert_seconds_") + dict(k).get("le", ""): v
               for k, v in families["sda_landing_to_alert_seconds"]["samples"].items()}
    assert latency["count"] == latency["bucket+Inf"] == landed, latency
    # the simulator dates each file (its mtime) when its chunk would have been delivered, after its chunk and never
    # after now: a file's wait is more than nothing and at most the time since SIM_START
    assert 0 < latency["sum"] / landed <= time.time() - SIM_START.timestamp()


def _stage_log_lines(airflow, stage: str) -> list[dict]:
    """The ``sda`` logger's JSON lines in the task log of ``stage`` in the run (its last attempt)."""
    runs = [p for p in (airflow.home / "logs").rglob("run_id=*") if p.name == f"run_id={RUN_ID}"]
    assert runs, f"no task logs of {RUN_ID} under {airflow.home / 'logs'}"
    [log] = sorted(runs[0].glob(f"task_id={stage}/attempt=*.log"))[-1:]
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [line for line in lines if line.get("logger") == "sda"]


def test_task_logs_are_json_lines_carrying_the_run_id_stage_and_batch(pipeline_run, airflow):
    """Airflow 3 writes task logs as JSON lines; the stage's lines carry the run id, the stage and the batch as
    fields of their own (sda.pipeline.logcontext): ingest's its landing batch, correlate's its change-feed range
    (after the first line, which starts the run)."""
    for stage, batch in (("ingest", r"landing(#\d+)?"), ("correlate", r"from-start|\S+@\S+")):
        mine = _stage_log_lines(airflow, stage)
        assert mine and all(line["run_id"] == RUN_ID and line["stage"] == stage for line in mine), mine[:3]
        assert any(line["event"].startswith(f"{stage}: ") for line in mine)  # its progress lines among them
        assert all(re.fullmatch(batch, line["batch"]) for line in mine[1:]), [line["batch"] for line in mine]
    assert any(line["batch"].startswith("landing#") for line in _stage_log_lines(airflow, "ingest"))


def test_the_stack_listens_on_loopback_only(pipeline_run, airflow):
    """Every listening socket of the Airflow components and their children (task processes, the log
    server) is bound to loopback; among them the API server's and both task-log ports, so the census
    looked at the right processes."""
    sockets = listening_sockets(process_tree([p.pid for p in airflow.procs]))
    beyond = [s for s in sockets if not is_loopback(s[0])]
    assert not beyond, f"listening beyond loopback (address, port, pid): {beyond}"
    ports = {port for _, port, _ in sockets}
    log_ports = {int(airflow.env[f"AIRFLOW__LOGGING__{k}_LOG_SERVER_PORT"]) for k in ("WORKER", "TRIGGER")}
    assert {airflow.port, *log_ports} <= ports, sockets


def test_metadata_database_is_postgres(postgres, pipeline_run):
    if postgres is None:
        pytest.skip("Airflow ran on SQLite here: PostgreSQL's server programs are not installed "
                    "(.ci/run installs them)")
    rows = postgres.query("SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s", DAG_ID, RUN_ID)
    assert rows == [("success",)]
    tasks = dict(postgres.query("SELECT task_id, state FROM task_instance WHERE dag_id = %s AND run_id = %s",
                                DAG_ID, RUN_ID))
    assert tasks == {task: "success" for task in STAGES + GATES}
    assert postgres.query("SELECT version_num FROM alembic_version")  # migrated by `airflow db migrate`


@pytest.fixture(scope="module")
def tables(pipeline_run, data, spark):
    assert pipeline_run["state"] == "success", pipeline_run

    def read(layer: str, name: str):
        return spark.read.format("delta").load(str(data["lakehouse"] / layer / name))

    return read


@pytest.fixture(scope="module")
def truth(data) -> list[dict]:
    truth_dir = data["landing"] / "_truth"
    return [json.loads(line) for p in sorted(truth_dir.glob("*.jsonl")) for line in p.read_text().splitlines() if line]


@pytest.fixture(scope="module")
def summary(data) -> dict:
    return json.loads(next((data["landing"] / "_truth").glob("*.summary.json")).read_text())


def catalogue_miss_m(data) -> float:
    """The injected pair's miss as the catalogue predicts it (tests.injected_pair)."""
    return injected_pair.catalogue_miss_m(Path(data["env"]["SDA_CATALOG_FILE"]), TCA.timestamp())


def explained(miss_m: float, data) -> bool:
    """The pair's screened miss: the catalogue's prediction, or the truth's on fused orbits (tests.injected_pair)."""
    return injected_pair.explained(miss_m, Path(data["env"]["SDA_CATALOG_FILE"]), TCA.timestamp())


def test_tables_hold_the_landed_data(tables, truth, data):
    from pyspark.sql import functions as F

    read = tables
    landed = {(t["file"], t["record_no"]) for t in truth}
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
    assert explained(injected[0]["miss_m"], data), (injected[0]["miss_m"], catalogue_miss_m(data))

    # the gates validated this run's rows and recorded every check
    checked = {(r["layer"], r["table"]) for r in read("ops", "data_quality").where(F.col("run_id") == RUN_ID)
               .select("layer", "table").distinct().collect()}
    assert {("bronze", "radar_frames"), ("silver", "observations"), ("gold", "correlated"),
            ("gold", "conjunctions")} <= checked


# --- the tables against the simulator's truth file ----------------------------------------------

def _relative(path: str, landing: Path) -> str:
    prefix = str(landing).rstrip("/") + "/"
    path = path.removeprefix("file:")
    return path[len(prefix):] if path.startswith(prefix) else path


@pytest.fixture(scope="module")
def truth_of(data, truth, tables):
    """Map a table's rows to their truth row: through ``bronze_id`` to the landed line and, for a
    radar frame (several detections, often with the same millisecond), to the detection of the raw
    payload whose range is nearest the row's."""
    from pyspark.sql import functions as F

    by_line: dict[tuple[str, int], list[dict]] = collections.defaultdict(list)
    by_det: dict[tuple[str, int, int], dict] = {}
    for row in truth:
        by_line[(row["file"], row["record_no"])].append(row)
        if row["det_index"] is not None:
            by_det[(row["file"], row["record_no"], row["det_index"])] = row
        when = row["event_time"]
        row["ms"] = int(dt.datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() * 1000) if when else None
    bronze, ranges = {}, {}
    for name in ("radar_frames", "optical_tracks", "isl_beacons"):
        for r in tables("bronze", name).select("bronze_id", "source_file", "record_no", "payload").collect():
            bronze[r["bronze_id"]] = (_relative(r["source_file"], data["landing"]), r["record_no"])
            if name == "radar_frames":
                dets = json.loads(r["payload"]).get("dets") or []
                ranges[r["bronze_id"]] = [(i, d.get("range_km")) for i, d in enumerate(dets)
                                          if isinstance(d.get("range_km"), (int, float))]

    def resolve(df) -> list[tuple[dict | None, dict]]:
        out = []
        for r in df.withColumn("_ms", F.unix_millis("event_time")).collect():
            line = bronze.get(r["bronze_id"])
            match = None
            if line is not None and r["bronze_id"] in ranges and r["range_m"] is not None and ranges[r["bronze_id"]]:
                det, _ = min(ranges[r["bronze_id"]], key=lambda d: abs(d[1] * 1000.0 - r["range_m"]))
                match = by_det.get((*line, det))
            elif line is not None:
                timed = [t for t in by_line.get(line, []) if t["ms"] is not None]
                match = min(timed, key=lambda t: abs(t["ms"] - r["_ms"])) if timed else None
            out.append((match, r.asDict()))
        return out

    return resolve


def test_every_landing_record_is_in_bronze_or_quarantine(data, truth, summary, tables):
    from pyspark.sql import functions as F

    landing = data["landing"]
    expected = {(t["file"], t["record_no"]) for t in truth}
    bronze: list[tuple[str, int]] = []
    for name in ("radar_frames", "optical_tracks", "isl_beacons"):
        rows = tables("bronze", name).select("source_file", "record_no").collect()
        bronze += [(_relative(r[0], landing), r[1]) for r in rows]
    refused = [
        (_relative(r[0], landing), r[1])
        for r in tables("ops", "quarantine").where(F.col("stage") == "ingest")
        .select("source_file", "record_no").collect()
    ]
    assert len(bronze) == len(set(bronze)), "a landed record is in bronze twice"
    assert len(refused) == len(set(refused)), "a landed record is quarantined twice"
    assert not set(bronze) & set(refused), "a record is both in bronze and in quarantine"
    assert set(bronze) | set(refused) == expected
    # the ledger: per file, every record counted, the refused ones among them
    ledger = {r["file_path"]: r for r in tables("ops", "ingested_files").collect()}
    per_file = collections.Counter(f for f, _ in expected)
    refused_per_file = collections.Counter(f for f, _ in refused)
    # and the space-weather files: the simulator issues one at every 3-hour boundary (sda.sim.weather), which the
    # five simulated minutes cross when the suite starts within five minutes before 02, 05, ... 23 UTC
    weather = {str(p.relative_to(landing)) for p in (landing / "space_weather").glob("SW-*.txt")}
    assert set(ledger) == set(per_file) | weather
    for path, n in per_file.items():
        assert (ledger[path]["records"] + ledger[path]["quarantined"], ledger[path]["quarantined"]) == (
            n, refused_per_file[path]), path
    assert sum(summary["files"].values()) + len(weather) == len(ledger)


def test_duplicates_are_gone(truth, tables, truth_of):
    by_key = {t["key"]: t for t in truth}

    def root(t: dict) -> str:
        while t.get("duplicate_of"):
            t = by_key[t["duplicate_of"]]
        return t["key"]

    kept = truth_of(tables("silver", "observations_dedup"))
    unmatched = [row for match, row in kept if match is None]
    assert not unmatched, f"{len(unmatched)} deduplicated observations match no landed record"
    roots = collections.Counter(root(match) for match, _ in kept)
    repeated = {k: n for k, n in roots.items() if n > 1}
    assert not repeated, f"{len(repeated)} observations survive dedup more than once, e.g. {list(repeated)[:5]}"
    disorders = collections.Counter(match["disorder"] for match, _ in kept)
    assert disorders["none"] > 0


def test_correlation_matches_truth(tables, truth_of):
    rows = truth_of(tables("gold", "correlated"))
    catalogued = [(match, row) for match, row in rows if match is not None and match["norad_id"] is not None]
    assert len(catalogued) > 100
    right = sum(1 for match, row in catalogued if row["norad_id"] == match["norad_id"])
    assert right / len(catalogued) >= 0.95, f"{right}/{len(catalogued)} correlated observations carry the true norad_id"


def test_injected_conjunction_is_alerted_and_published(data, summary, tables):
    alerts = tables("gold", "alerts").select("primary_id", "secondary_id", "miss_m", "level").collect()
    pairs = [r for r in alerts if {r["primary_id"], r["secondary_id"]} == PAIR]
    assert pairs, f"no alert for {sorted(PAIR)} among {len(alerts)} alerts"
    assert summary["injected"] is not None
    assert abs(summary["injected"]["achieved_miss_m"] - 150.0) < 1.0  # the truth's miss is the designed one
    assert any(p.is_file() for p in data["outbox"].rglob("*")), "no alert message in the outbox"


def test_every_cdm_gives_its_pc_from_its_contents_alone(data, pipeline_run):
    """Every CDM of the run read with the independent reader ccsds-ndm-py (tests/cdm_reference.py): in EME2000,
    relative position from the written states, and NASA CARA's 2-D Pc recomputed from the message alone within
    1e-3 of the alert's for every Pc >= 1e-10. Five minutes of observations fuse no orbit, so these covariances
    are modelled (DEFAULT); tests/jobs/test_fuse.py checks fused ones."""
    from tests.cdm_reference import check_outbox

    found = check_outbox(data["outbox"])
    print("CDM Pc agreement:", found)
    assert "DEFAULT" in found["methods"] and found["compared"] >= 1


# --- the run report, from the UI's link, in a browser ------------------------------------------------

def test_run_report_link_opens_the_runs_report_in_a_browser(airflow, pipeline_run, data):
    binary, why = find_chromium()
    if binary is None:
        pytest.skip(why)
    assert pipeline_run["state"] == "success"
    links = airflow.api("GET", f"/dags/{DAG_ID}/dagRuns/{RUN_ID}/taskInstances/quality_gold/links")["extra_links"]
    url = links["Run report"]
    assert url == f"{airflow.base}/sda-reports/runs/{quote(RUN_ID, safe='')}/index.html"
    assert airflow.status(url) == 401  # behind Airflow's login like the rest of the UI
    with Browser(binary) as browser:
        # what the UI's login leaves in the browser: the JWT in Airflow's session cookie
        browser.set_cookie("_token", airflow.token(), airflow.base)
        page = browser.open(url)
        assert page["status"] == 200, page
        html = page["html"]
        assert f"<code>{RUN_ID}</code>" in html
        # counts per stage drawn for every stage of this run
        for stage in STAGES:
            bar, row = f'data-stage="{stage}" data-count="records_in"', f'<tr data-stage="{stage}">'
            assert bar in html or row in html, stage
        # the injected pair's alert has its separation plot, with the TCA marker at the predicted miss
        assert 'data-alert="' in html and 'class="chart separation"' in html
        misses = [float(m) for m in re.findall(r'data-miss-m="([0-9.]+)"', html)]
        assert any(explained(m, data) for m in misses), misses
        # and a click through to the Great Expectations page of this run's validation
        docs = browser.evaluate("document.querySelector('a.data-docs').href")
        assert docs.startswith(f"{airflow.base}/sda-reports/gx/uncommitted/data_docs/"), docs
        gx = browser.open(docs)
        assert gx["status"] == 200 and RUN_ID in unquote(gx["html"])


# --- a backfill through the REST API -------------------------------------------------------------------

def test_backfill_through_the_rest_api_recomputes_and_changes_nothing(airflow, pipeline_run, data, spark):
    """POST /api/v2/backfills over one past interval: the scheduler runs it in replay mode (catalog,
    ingest and the gates skip) and each stage recomputes that interval from bronze. The observation
    tables hold exactly what they held before (idempotent). Backfills run only on an unpaused DAG, so
    a scheduled run may be queued meanwhile: it is dropped, or, if already running, changes none of
    these tables (it has no new files). Its conjunction screening (a new screening time) is why the
    screening tables are not compared here; tests/test_exactly_once_determinism.py compares those for a replay."""
    import time

    from pyspark.sql import functions as F

    from sda.config.settings import load_settings

    assert pipeline_run["state"] == "success"
    settings = load_settings(env={}, lakehouse=data["lakehouse"])
    compared = [t for t in COMPARED if t not in ("conjunctions", "alerts", "alert_events")]
    before = snapshot(spark, settings, compared)
    window = {"dag_id": DAG_ID, "from_date": _iso(SIM_START), "to_date": _iso(SIM_END + dt.timedelta(minutes=30))}
    planned = airflow.api("POST", "/backfills/dry_run", window)["backfills"]
    assert planned, "the dry run plans no interval in the simulated range"
    first = planned[0]["logical_date"]
    backfill = airflow.api("POST", "/backfills", {**window, "from_date": first, "to_date": first,
                                                  "max_active_runs": 1, "reprocess_behavior": "completed"})
    airflow.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})  # backfills run only on an unpaused DAG
    try:
        runs: list[dict] = []
        started = time.monotonic()
        deadline = started + 1800
        while time.monotonic() < deadline:
            runs = airflow.api("GET", f"/dags/{DAG_ID}/dagRuns?order_by=-run_after&limit=20")["dag_runs"]
            # a scheduled run the unpaused DAG queues meanwhile is dropped before it starts (the
            # concurrent case is tests/jobs/test_concurrent_writers.py); one already running changes
            # none of the compared tables (it has no new files)
            for other in runs:
                if other["run_type"] == "scheduled" and other["state"] == "queued":
                    airflow.api("DELETE", f"/dags/{DAG_ID}/dagRuns/{other['dag_run_id']}")
            backfills = [r for r in runs if r["run_type"] == "backfill"]
            if backfills and all(r["state"] in ("success", "failed") for r in backfills):
                break
            time.sleep(1 if time.monotonic() - started < 60 else 5)  # unpausing queues one at once
    finally:
        airflow.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": True})
    backfills = [r for r in runs if r["run_type"] == "backfill"]
    assert len(backfills) == 1 and backfills[0]["state"] == "success", f"{runs}\n{airflow.tail()}"
    run = backfills[0]
    tasks = {t["task_id"]: t["state"] for t in
             airflow.api("GET", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances")["task_instances"]}
    assert tasks == {"catalog": "skipped", "ingest": "skipped", "normalize": "success", "dedup": "success",
                     "correlate": "success", "fuse": "success", "acquire": "success", "conjunction": "success",
                     "quality_silver": "skipped",
                     "quality_gold": "skipped"}, tasks
    # the scheduler marks a backfill complete on its next check (every 30 s) after its last run ends
    deadline = time.monotonic() + 180
    while airflow.api("GET", f"/backfills/{backfill['id']}")["completed_at"] is None:
        assert time.monotonic() < deadline, f"backfill {backfill['id']} not marked complete within 180 s"
        time.sleep(5)

    assert differences(before, snapshot(spark, settings, compared)) == []
    metrics = (spark.read.format("delta").load(str(data["lakehouse"] / "ops" / "run_metrics"))
               .where(F.col("run_id") == run["dag_run_id"]).collect())
    assert {m["stage"] for m in metrics} == {"normalize", "dedup", "correlate", "fuse", "acquire", "conjunction"}
    assert {m["mode"] for m in metrics} == {"replay"}
    start = dt.datetime.fromisoformat(run["data_interval_start"].replace("Z", "+00:00"))
    assert {m["interval_start"].replace(tzinfo=UTC) for m in metrics} == {start}


# --- runs start when files land -------------------------------------------------------------------

def _runs(airflow) -> list[dict]:
    return airflow.api("GET", f"/dags/{DAG_ID}/dagRuns?order_by=-run_after&limit=50")["dag_runs"]


def _ingest_runs(spark, data) -> dict[str, str]:
    rows = spark.read.format("delta").load(str(data["lakehouse"] / "ops" / "ingested_files")).collect()
    return {r["file_path"]: r["run_id"] for r in rows}


def test_landed_files_start_runs_and_never_pile_up(airflow, pipeline_run, data, spark, tmp_path):
    """The landing watcher (an AssetWatcher on sda.orchestration.landing_watch.LandingTrigger, run by the
    triggerer) starts an asset-triggered run when a file lands, without waiting for the cadence. A file
    landing while that run is under way does not start a second run beside it (Airflow defers
    asset-triggered runs at max_active_runs=1) and is taken by the one run that follows."""
    import time

    assert pipeline_run["state"] == "success"
    from sda.sim.simulate import SimConfig, simulate

    staging = tmp_path / "staging"
    simulate(SimConfig(start=SIM_END, end=SIM_END + dt.timedelta(minutes=2), landing=staging, seed=11,
                       catalog=Path(data["env"]["SDA_CATALOG_FILE"]), catalog_out=tmp_path / "catalog.tle"))
    files = sorted(str(p.relative_to(staging)) for p in staging.rglob("*.jsonl") if "_truth" not in p.parts)
    first, second = files[0], files[-1]

    def land(rel: str) -> str:
        target = data["landing"] / Path(rel).parts[0] / "watched" / Path(rel).name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(staging / rel, target)  # a fresh file: its mtime and ctime are now
        return str(target.relative_to(data["landing"]))

    before = {r["dag_run_id"] for r in _runs(airflow)}
    second_run = None
    airflow.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
    try:
        # unpausing may queue the latest cadence interval: dropped, so only the watcher starts runs
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for run in _runs(airflow):
                if run["run_type"] == "scheduled" and run["dag_run_id"] not in before and run["state"] == "queued":
                    airflow.api("DELETE", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}")
            time.sleep(2)
        before = {r["dag_run_id"] for r in _runs(airflow)}
        landed_first, t0 = land(first), time.monotonic()
        started, first_run = None, None
        while time.monotonic() < t0 + 300 and first_run is None:
            new = [r for r in _runs(airflow) if r["dag_run_id"] not in before and r["run_type"] == "asset_triggered"]
            if new:
                first_run, started = new[0], time.monotonic() - t0
            time.sleep(1)
        assert first_run is not None, f"no asset-triggered run within 300 s of a landed file:\n{airflow.tail()}"
        print(f"landing -> asset-triggered run created in {started:.1f} s (poll 1 s)")

        landed_second = land(second)  # while the first run is under way
        runs_during = []
        while True:
            runs = _runs(airflow)
            current = next(r for r in runs if r["dag_run_id"] == first_run["dag_run_id"])
            if current["state"] in ("success", "failed"):
                break
            runs_during.append([r["dag_run_id"] for r in runs if r["dag_run_id"] not in before
                                and r["dag_run_id"] != first_run["dag_run_id"] and r["state"] in ("queued", "running")])
            assert time.monotonic() < t0 + 1500, "the asset-triggered run did not end within 25 minutes"
            time.sleep(3)
        assert current["state"] == "success", f"{current}\n{airflow.tail()}"
        assert all(not other for other in runs_during), f"runs beside the one under way: {runs_during}"

        # the run that follows takes the second file: its ingest is what this test is about, so once
        # that task has succeeded the run is stopped (marked failed) rather than waited for
        second_run, ingest_state = None, None
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and ingest_state not in ("success", "failed", "upstream_failed"):
            later = [r for r in _runs(airflow) if r["dag_run_id"] not in before
                     and r["dag_run_id"] != first_run["dag_run_id"] and r["run_type"] == "asset_triggered"]
            if later:
                second_run = later[0]
                ingest_state = airflow.api(
                    "GET", f"/dags/{DAG_ID}/dagRuns/{second_run['dag_run_id']}/taskInstances/ingest")["state"]
            time.sleep(3)
        assert second_run is not None and ingest_state == "success", (
            f"{ingest_state}: {_runs(airflow)[:3]}\n{airflow.tail()}")
        extra = [r for r in _runs(airflow) if r["dag_run_id"] not in before
                 and r["dag_run_id"] not in (first_run["dag_run_id"], second_run["dag_run_id"])]
        assert not extra, f"more runs than landings: {extra}"
    finally:
        airflow.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": True})
        if second_run is not None:
            airflow.api("PATCH", f"/dags/{DAG_ID}/dagRuns/{second_run['dag_run_id']}", {"state": "failed"})
    ledger = _ingest_runs(spark, data)
    assert ledger[landed_first] == first_run["dag_run_id"]
    assert ledger[landed_second] == second_run["dag_run_id"]
