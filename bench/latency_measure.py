"""What ``bench/latency.py`` measures: one landed file (and its conjunction pair) from landing to silver
and to a gold alert, the run that picked it up broken down, and the warm-up before the first file.

* the Delta logs the benchmark watches, tailed without a JVM (:class:`DeltaTail`, :class:`Lake`);
* what a sample lands: ``bench/latency_sample.py``;
* waiting for the warm-up run (:func:`warm_up`) and for each file (:func:`measure_one`);
* where the time of the pickup run went, from the REST API (:func:`breakdown`).
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.parse
from pathlib import Path

from latency_sample import land, prepare_sample, replace_catalog, wait_for_chunk
from latency_stack import Airflow, BenchError, Progress, iso, r2, say, ts

POLL_S = 2.0


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


# --- the measurement -----------------------------------------------------------------------------

class Lake:
    """The tails the benchmark needs, and what they have shown so far."""

    def __init__(self, lakehouse: Path):
        self.silver = DeltaTail(lakehouse / "silver" / "observations", ["source_file", "run_id"])
        self.alerts = DeltaTail(lakehouse / "gold" / "alerts",
                                ["primary_id", "secondary_id", "tca", "miss_m", "run_id", "level"])
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
    return (f"run {run_id} failed (tasks not successful: {', '.join(bad) or 'none'}){where}; "
            f"Airflow log: {airflow.log_path}")


RETOUCH_S = 30.0  # warm-up: how long to wait for a run before the files are touched again


def touch(landing: Path, files: list[str]) -> float:
    """Give ``files`` (relative to ``landing``) a new mtime and inode change time; returns when."""
    for rel in files:
        os.utime(landing / rel)
    return time.monotonic()


def warm_up(airflow: Airflow, lake: Lake, warm_files: list[str], timeout_s: float, progress: Progress) -> str:
    """Wait until every warm-up file is ingested and the run that took them has succeeded."""
    deadline, next_check = time.monotonic() + timeout_s, 0.0
    # The files were written before the triggerer watched the landing zone, and the scheduled run of
    # the latest cadence interval may end before they were: touch them (mtime and inode change time
    # now), so that the landing watcher starts a run that takes them. A watcher reports only files
    # changed after it started, and the triggerer can be slow to start it: while no run is active,
    # they are touched again every RETOUCH_S.
    time.sleep(10)  # the triggerer picks the new watcher up
    landing = Path(os.environ["SDA_LANDING"])
    touched = touch(landing, warm_files)
    say(f"warm-up: waiting for a run to take the {len(warm_files)} warm-up files (touched for the landing watcher)")
    while True:
        lake.poll_bookkeeping()
        runs = {lake.file_run.get(f) for f in warm_files}
        if None not in runs:
            break
        if time.monotonic() >= next_check:
            next_check = time.monotonic() + 10
            dag_runs = airflow.runs()
            for r in dag_runs:
                if r["state"] == "failed":
                    raise BenchError("warm-up: " + failed_tasks_message(airflow, r["dag_run_id"]))
            if time.monotonic() - touched >= RETOUCH_S and not any(r["state"] in ("queued", "running")
                                                                   for r in dag_runs):
                touched = touch(landing, warm_files)
                say("warm-up: no run yet; the warm-up files touched again")
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


def pause_randomly(index: int, args, rng: random.Random, progress: Progress) -> None:
    """Wait 0..``--gap-s`` before a landing, so landings fall at different moments of the run before."""
    pause = rng.uniform(0, args.gap_s)
    say(f"file {index + 1}/{args.files}: pausing {pause:.0f} s (random phase against the run before)")
    pause_end = time.monotonic() + pause
    while time.monotonic() < pause_end:
        progress.tick()
        time.sleep(min(POLL_S, max(0.0, pause_end - time.monotonic())))


def silver_seen(index: int, lake: Lake, wanted: set[str], t0: float) -> dict | None:
    """The first new silver commit with rows of the landed files, or None."""
    for version, commit_ts, rows in lake.silver.poll():
        hits = [r for r in rows if r["source_file"] in wanted]
        if hits:
            silver = {"version": version, "commit": iso(commit_ts), "landing_to_silver_s": r2(commit_ts - t0),
                      "detected_s": r2(time.time() - t0), "rows": len(hits),
                      "files_with_rows": len({r["source_file"] for r in hits}), "normalize_run_id": hits[0]["run_id"]}
            say(f"file {index + 1}: silver has {len(hits)} rows of it (commit v{version}): "
                f"{silver['landing_to_silver_s']} s after t0")
            return silver
    return None


def alert_seen(index: int, lake: Lake, pair: dict, t0: float) -> dict | None:
    """The first new gold alerts commit with a row for the sample's pair, or None."""
    for version, commit_ts, rows in lake.alerts.poll():
        hits = [r for r in rows if (r["primary_id"], r["secondary_id"]) == (pair["primary_id"], pair["secondary_id"])]
        if hits:
            h = hits[0]
            alert = {"version": version, "commit": iso(commit_ts), "landing_to_alert_s": r2(commit_ts - t0),
                     "detected_s": r2(time.time() - t0), "level": h["level"], "miss_m": r2(h["miss_m"]),
                     "tca": str(h["tca"]), "conjunction_run_id": h["run_id"]}
            say(f"file {index + 1}: gold alert for {pair['primary_id']}/{pair['secondary_id']} (commit v{version}, "
                f"{h['level']}, miss {h['miss_m']:.0f} m): {alert['landing_to_alert_s']} s after t0")
            return alert
    return None


def wait_silver_and_alert(index: int, airflow: Airflow, lake: Lake, timeout_s: float, t0: float, wanted: set[str],
                          pair: dict, progress: Progress) -> tuple[dict, dict]:
    """Tail silver and gold until both have the sample's rows; stop on a failed run, a dead Airflow or
    ``timeout_s``."""
    silver, alert, next_check = None, None, 0.0
    deadline = time.monotonic() + timeout_s
    while silver is None or alert is None:
        if silver is None:
            silver = silver_seen(index, lake, wanted, t0)
        if alert is None:
            alert = alert_seen(index, lake, pair, t0)
        if silver is None or alert is None:
            if time.monotonic() >= next_check:  # a failed run would hold the file back for good
                next_check = time.monotonic() + 10
                for r in airflow.runs():
                    if r["state"] == "failed" and (ts(r.get("end_date")) or 0) > t0:
                        raise BenchError(f"file {index + 1}: " + failed_tasks_message(airflow, r["dag_run_id"]))
            airflow.check_alive()
            progress.tick()
            if time.monotonic() > deadline:
                seen = f"silver {'seen' if silver else 'not seen'}, alert {'seen' if alert else 'not seen'}"
                raise BenchError(f"file {index + 1}: not through within --timeout-s {timeout_s:.0f} ({seen}); "
                                 f"see {airflow.log_path}")
            time.sleep(POLL_S)
    return silver, alert


def break_down_runs(index: int, airflow: Airflow, lake: Lake, timeout_s: float, t0: float, landed: list[str],
                    alert: dict, progress: Progress) -> tuple[list[str], dict, dict]:
    """Once the pickup run (and the alert's run) have ended: the ingest run ids of the landed files, the
    pickup run's breakdown and the alert run's (the same dict when one run did both)."""
    # the run that picked the files up: the ledger says which; wait for it (and the alert's run) to end
    lake.poll_bookkeeping()
    pickup_ids = sorted({lake.file_run[f] for f in landed if f in lake.file_run})
    if not pickup_ids:
        raise BenchError(f"file {index + 1}: silver has its rows but the ledger names no ingest run")
    pickup_id, alert_run_id = pickup_ids[0], alert["conjunction_run_id"]
    say(f"file {index + 1}: waiting for run(s) {', '.join(sorted({pickup_id, alert_run_id}))} to end "
        "(for the breakdown)")
    deadline = time.monotonic() + timeout_s  # bookkeeping only: a fresh allowance
    for run_id in sorted({pickup_id, alert_run_id}):
        run = wait_run_end(airflow, run_id, deadline, progress)
        if run["state"] != "success":
            raise BenchError(f"file {index + 1}: " + failed_tasks_message(airflow, run_id))
    lake.poll_bookkeeping()
    detail = breakdown(airflow, lake, airflow.run(pickup_id), t0)
    # a run already under way at t0 whose catalog task had not started yet raises the alert first
    alert_detail = detail if alert_run_id == pickup_id else breakdown(airflow, lake, airflow.run(alert_run_id), t0)
    return pickup_ids, detail, alert_detail


def measure_one(index: int, airflow: Airflow, lake: Lake, args, dirs: dict[str, Path], rng: random.Random,
                progress: Progress) -> dict:
    """One sample (see the docstring of ``bench/latency.py``): pause, land a file and a pair at ``t0``,
    time silver and the alert, break the pickup run down."""
    if args.warm_up == "scenario":  # the feed's sky: the next whole chunk first
        wait_for_chunk(progress)
    pause_randomly(index, args, rng, progress)
    staged = prepare_sample(index, lake, dirs, args.warm_up)
    pair, subdir, records = staged["pair"], staged["subdir"], staged["records"]

    # t0: land the files and the pair at the same moment
    t0 = time.time()
    landed = land(staged["staging"], staged["files"], dirs["landing"], subdir, t0)
    replace_catalog(dirs["catalog"], pair["text"])
    say(f"file {index + 1}: landed {len(landed)} sensor files ({records} records, "
        f"events {iso(staged['span'][0])} .. {iso(staged['span'][1])}) under */{subdir}/ and pair "
        f"{pair['primary_id']}/{pair['secondary_id']} (TCA {pair['achieved_tca']}, miss {pair['achieved_miss_m']} m) "
        f"at t0 {iso(t0)}")

    silver, alert = wait_silver_and_alert(index, airflow, lake, args.timeout_s, t0, set(landed), pair, progress)
    pickup_ids, detail, alert_detail = break_down_runs(index, airflow, lake, args.timeout_s, t0, landed, alert,
                                                       progress)
    from_pickup = alert["conjunction_run_id"] == pickup_ids[0]
    sample = {
        "file": index + 1, "t0": iso(t0), "landed_files": len(landed), "records": records,
        "landing_to_silver_s": silver["landing_to_silver_s"], "landing_to_alert_s": alert["landing_to_alert_s"],
        "pair": {k: pair[k] for k in ("primary_id", "secondary_id", "designed_tca", "achieved_tca", "achieved_miss_m")},
        "silver": silver, "alert": alert, "ingest_run_ids": pickup_ids,
        "alert_from_pickup_run": from_pickup, "pickup_run": detail,
        "alert_run": None if from_pickup else alert_detail,
    }
    tasks = detail["tasks"]
    say(f"file {index + 1}: silver {sample['landing_to_silver_s']} s, alert {sample['landing_to_alert_s']} s; "
        f"scheduler delay {detail['scheduler_delay_s']} s (behind active run {detail['sched_behind_active_run_s']}, "
        f"cadence wait {detail['sched_cadence_wait_s']}, queue {detail['sched_queue_s']}); per task duration/work: "
        + ", ".join(f"{k} {v['task_duration_s']}/{v['spark_work_s']}" for k, v in tasks.items()))
    return sample
