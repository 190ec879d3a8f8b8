"""End to end: simulated sensors -> the real DAG (``dag.test()``, every task a real spark-submit) ->
the tables, checked against the simulator's truth file, never against pipeline code.
``E2E_REUSE_DIR=<root of an earlier run>`` re-checks that run's tables without running it again.

The simulated window ends 40 minutes before the run's logical date: the simulator gives files
modification times up to ~35 minutes after their events (re-deliveries, late files) and ingest only
takes files modified before the interval's end, so every file is due in this one run.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROJECT_ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
UTC = dt.timezone.utc
LOGICAL_DATE = dt.datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SIM_START = LOGICAL_DATE - dt.timedelta(minutes=70)
SIM_END = LOGICAL_DATE - dt.timedelta(minutes=40)
TCA = LOGICAL_DATE + dt.timedelta(hours=2)  # inside the 24 h screening horizon after the run
PAIR = {99901, 99902}
STAGES = ("catalog", "ingest", "normalize", "dedup", "correlate", "conjunction")

DAG_TEST = """
import datetime as dt, sys
from airflow import settings
from airflow.dag_processing.dagbag import DagBag
if settings.Session is None:
    settings.configure_orm()
bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
run = bag.dags["sda_pipeline"].test(logical_date=dt.datetime.fromisoformat(sys.argv[2]))
print("DAGRUN", run.run_id, run.state, flush=True)
sys.exit(0 if str(run.state) in ("success", "DagRunState.SUCCESS") else 1)
"""


def _iso(t: dt.datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def _run(cmd: list[str], env: dict[str, str], log: Path, timeout: int) -> subprocess.CompletedProcess:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        return subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, cwd=PROJECT_ROOT)


def _tail(log: Path, lines: int = 80) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _load(root: Path, ok: bool, log: Path, elapsed: float) -> types.SimpleNamespace:
    dirs = {name: root / name for name in ("lakehouse", "landing", "outbox", "airflow")}
    truth_dir = dirs["landing"] / "_truth"
    truth = [json.loads(line) for p in sorted(truth_dir.glob("*.jsonl")) for line in p.read_text().splitlines() if line]
    summary = json.loads(next(truth_dir.glob("*.summary.json")).read_text())
    return types.SimpleNamespace(ok=ok, log=log, elapsed=elapsed, truth=truth, summary=summary, **dirs)


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
    if os.environ.get("E2E_REUSE_DIR"):
        # re-check the tables of an earlier run (its directory, kept) without running it again
        root = Path(os.environ["E2E_REUSE_DIR"])
        return _load(root, True, root / "e2e.log", 0.0)
    missing = [s for s in STAGES if not (PROJECT_ROOT / "jobs" / f"{s}.py").is_file()]
    if missing:
        pytest.fail(f"jobs not written yet: {', '.join(f'jobs/{m}.py' for m in missing)}")
    root = tmp_path_factory.mktemp("e2e")
    dirs = {name: root / name for name in ("lakehouse", "landing", "outbox", "airflow")}
    catalog_file = root / "catalog" / "catalog.tle"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SDA_", "AIRFLOW"))}
    env.update(
        {
            "SDA_LAKEHOUSE": str(dirs["lakehouse"]),
            "SDA_LANDING": str(dirs["landing"]),
            "SDA_OUTBOX": str(dirs["outbox"]),
            "SDA_CATALOG_FILE": str(catalog_file),
            "SDA_SHUFFLE_PARTITIONS": "2",
            # the oldest simulated events are 70 minutes before the interval's end
            "SDA_ALLOWED_LATENESS_S": "7200",
            "AIRFLOW_HOME": str(dirs["airflow"]),
            "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "PYSPARK_PYTHON": PY,
            "PATH": f"{Path(PY).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    log = root / "e2e.log"
    sim = _run(
        [PY, "-m", "sda.simulate", "--start", _iso(SIM_START), "--end", _iso(SIM_END), "--landing", str(dirs["landing"]),
         "--inject-conjunction", "--tca", _iso(TCA), "--catalog-out", str(catalog_file)],
        env, log, timeout=600,
    )
    assert sim.returncode == 0, _tail(log)
    migrate = _run([str(Path(PY).parent / "airflow"), "db", "migrate"], env, log, timeout=600)
    assert migrate.returncode == 0, _tail(log)
    started = time.monotonic()
    dag_run = _run([PY, "-c", DAG_TEST, str(PROJECT_ROOT / "dags"), LOGICAL_DATE.isoformat()], env, log, timeout=3600)
    elapsed = time.monotonic() - started
    print(f"\nsda_pipeline dag.test(): {elapsed:.0f} s, log {log}")
    return _load(root, dag_run.returncode == 0, log, elapsed)


@pytest.fixture(scope="module")
def tables(pipeline_run, spark):
    if not pipeline_run.ok:
        pytest.fail(f"the DAG run failed:\n{_tail(pipeline_run.log)}")

    def read(layer: str, name: str):
        return spark.read.format("delta").load(str(pipeline_run.lakehouse / layer / name))

    return read


def _relative(path: str, landing: Path) -> str:
    prefix = str(landing).rstrip("/") + "/"
    path = path.removeprefix("file:")
    return path[len(prefix):] if path.startswith(prefix) else path


@pytest.fixture(scope="module")
def truth_of(pipeline_run, tables):
    """Map a table's rows to their truth row: through ``bronze_id`` to the landed line and, for a
    radar frame (several detections, often with the same millisecond), to the detection of the raw
    payload whose range is nearest the row's."""
    from pyspark.sql import functions as F

    by_line: dict[tuple[str, int], list[dict]] = collections.defaultdict(list)
    by_det: dict[tuple[str, int, int], dict] = {}
    for row in pipeline_run.truth:
        by_line[(row["file"], row["record_no"])].append(row)
        if row["det_index"] is not None:
            by_det[(row["file"], row["record_no"], row["det_index"])] = row
        row["ms"] = int(dt.datetime.fromisoformat(row["event_time"].replace("Z", "+00:00")).timestamp() * 1000) if row["event_time"] else None
    bronze, ranges = {}, {}
    for name in ("radar_frames", "optical_tracks", "isl_beacons"):
        for r in tables("bronze", name).select("bronze_id", "source_file", "record_no", "payload").collect():
            bronze[r["bronze_id"]] = (_relative(r["source_file"], pipeline_run.landing), r["record_no"])
            if name == "radar_frames":
                dets = json.loads(r["payload"]).get("dets") or []
                ranges[r["bronze_id"]] = [(i, d.get("range_km")) for i, d in enumerate(dets) if isinstance(d.get("range_km"), (int, float))]

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


def test_run_succeeds(pipeline_run):
    assert pipeline_run.ok, _tail(pipeline_run.log)


def test_every_landing_record_is_in_bronze_or_quarantine(pipeline_run, tables):
    from pyspark.sql import functions as F

    landing = pipeline_run.landing
    expected = {(t["file"], t["record_no"]) for t in pipeline_run.truth}
    bronze: list[tuple[str, int]] = []
    for name in ("radar_frames", "optical_tracks", "isl_beacons"):
        bronze += [(_relative(r[0], landing), r[1]) for r in tables("bronze", name).select("source_file", "record_no").collect()]
    refused = [
        (_relative(r[0], landing), r[1])
        for r in tables("ops", "quarantine").where(F.col("stage") == "ingest").select("source_file", "record_no").collect()
    ]
    assert len(bronze) == len(set(bronze)), "a landed record is in bronze twice"
    assert len(refused) == len(set(refused)), "a landed record is quarantined twice"
    assert not set(bronze) & set(refused), "a record is both in bronze and in quarantine"
    assert set(bronze) | set(refused) == expected
    # the ledger: per file, every record counted, the refused ones among them
    ledger = {r["file_path"]: r for r in tables("ops", "ingested_files").collect()}
    per_file = collections.Counter(f for f, _ in expected)
    refused_per_file = collections.Counter(f for f, _ in refused)
    assert set(ledger) == set(per_file)
    for path, n in per_file.items():
        assert (ledger[path]["records"] + ledger[path]["quarantined"], ledger[path]["quarantined"]) == (
            n, refused_per_file[path]), path
    assert sum(pipeline_run.summary["files"].values()) == len(ledger)


def test_duplicates_are_gone(pipeline_run, tables, truth_of):
    by_key = {t["key"]: t for t in pipeline_run.truth}

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


def test_injected_conjunction_is_alerted(pipeline_run, tables):
    alerts = tables("gold", "alerts").select("primary_id", "secondary_id", "miss_m", "level").collect()
    pairs = [r for r in alerts if {r["primary_id"], r["secondary_id"]} == PAIR]
    assert pairs, f"no alert for {sorted(PAIR)} among {len(alerts)} alerts"
    assert pipeline_run.summary["injected"] is not None
    assert any(p.is_file() for p in pipeline_run.outbox.rglob("*")), "no alert message in the outbox"
