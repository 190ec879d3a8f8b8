"""The pipeline's KPIs in Prometheus's text exposition format (version 0.0.4), as a textfile per stage.

Each stage run, when it ends (:func:`sda.pipeline.runtime.run_stage`), rewrites ``<metrics root>/<stage>.prom``
(:func:`record_stage_run`): its counters, carried from run to run in ``<stage>.json`` beside it, and the
gauges of its last run. Writing is atomic (a temporary file renamed over the old one) and locked per stage,
so a scrape never reads half a file and two runs of one stage at once (a backfill beside the schedule) add
up. The API server serves the files together at ``/sda-metrics/metrics``
(:func:`sda.orchestration.webapp.create_metrics_app`).

Per stage (label ``stage``):

* ``sda_stage_runs_total{outcome}`` -- runs ended, ``ok`` or ``failed`` (a failed run raised: the task's
  retry runs again);
* ``sda_stage_records_total{disposition}`` -- records in, out, quarantined, duplicates, late, summed over
  the runs that ended ``ok`` (a retried run that had already recorded its figures counts them again);
* ``sda_stage_last_run_seconds``, ``sda_stage_last_run_timestamp_seconds`` (when it ended, unix seconds),
  ``sda_stage_last_success_timestamp_seconds``;
* ``sda_stage_quarantine_ratio`` -- quarantined / records in, of the last run with records;
* ``sda_consumer_lag_versions``, ``sda_consumer_lag_seconds`` -- how far behind its change-feed inputs the
  last run started (Delta versions, and the age of the oldest unconsumed commit);
* ``sda_stage_watermark_timestamp_seconds`` -- the stage's event-time watermark after its last run, where it
  keeps one;
* ``sda_open_alerts{level}`` -- the conjunction alerts open after the stage's last run that screened, by level
  (red, yellow, none);
* ``sda_propagation_errors_total`` -- objects the stage's ok runs could not propagate (SGP4 refused them; listed in
  ``ops.propagation_errors``);
* ``sda_sensor_newest_event_timestamp_seconds{sensor,kind}`` -- per sensor, the newest event time landed so
  far (normalize's arrivals, ``ops.watermarks``): the arrival watermark every event-time window is judged by;
* ``sda_landing_to_alert_seconds`` -- a histogram: per landed file, the seconds from its landing to the end of
  its DAG run's screening (:mod:`sda.pipeline.latency`), summed over the ok runs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sda.config.settings import Settings

DISPOSITIONS = ("in", "out", "quarantined", "duplicates", "late")
_COUNT_KEYS = {"in": "records_in", "out": "records_out", "quarantined": "quarantined", "duplicates": "duplicates",
               "late": "late"}

# name -> (type, help)
FAMILIES = {
    "sda_stage_runs_total": ("counter", "Stage runs ended, by outcome (ok, failed)."),
    "sda_stage_records_total": ("counter", "Records through the stage's ok runs, by disposition."),
    "sda_stage_last_run_seconds": ("gauge", "Wall seconds of the stage's last run."),
    "sda_stage_last_run_timestamp_seconds": ("gauge", "When the stage's last run ended (unix seconds)."),
    "sda_stage_last_success_timestamp_seconds": ("gauge", "When the stage's last ok run ended (unix seconds)."),
    "sda_stage_quarantine_ratio": ("gauge", "Quarantined over records in, of the stage's last run with records."),
    "sda_consumer_lag_versions": ("gauge", "Delta versions of its inputs the stage's last run started behind."),
    "sda_consumer_lag_seconds": ("gauge", "Age of the oldest input commit the stage's last run had not consumed."),
    "sda_stage_watermark_timestamp_seconds": ("gauge", "The stage's event-time watermark (unix seconds)."),
    "sda_open_alerts": ("gauge", "Conjunction alerts open after the stage's last run that screened, by level."),
    "sda_propagation_errors_total": ("counter", "Objects the stage's ok runs could not propagate."),
    "sda_sensor_newest_event_timestamp_seconds": ("gauge", "The newest event time landed of each sensor (unix "
                                                  "seconds): its arrival watermark; normalize's."),
    "sda_landing_to_alert_seconds": ("histogram", "Per landed file, seconds from its landing to the end of its "
                                     "run's screening (alerts and CDMs out)."),
}
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def family_of(sample_name: str) -> str:
    """The family a sample belongs to: a histogram's ``_bucket``, ``_sum`` and ``_count`` samples are its own."""
    for suffix in _HISTOGRAM_SUFFIXES:
        base = sample_name.removesuffix(suffix)
        if base != sample_name and FAMILIES.get(base, ("",))[0] == "histogram":
            return base
    return sample_name


def metrics_root(settings: Settings) -> Path:
    return settings.lakehouse.parent / "metrics"


def escape(value: str) -> str:
    """A label value as the exposition format writes it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() or abs(value) >= 1e15 else str(int(value))


# the content type of the text format, for whatever serves it
EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def sample_line(name: str, labels: dict[str, str], value: float) -> str:
    """One sample as the text format writes it: ``name{label="value",...} number``."""
    body = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
    return f"{name}{{{body}}} {number(float(value))}"


def render(samples: list[tuple[str, dict[str, str], float]]) -> str:
    """The text of ``samples`` (name, labels, value), each family once with its HELP and TYPE lines, in
    :data:`FAMILIES`' order; a family without samples is left out."""
    lines: list[str] = []
    for name, (kind, help_text) in FAMILIES.items():
        mine = [s for s in samples if family_of(s[0]) == name]
        if not mine:
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        lines += [sample_line(sample, labels, value) for sample, labels, value in mine]
    return "\n".join(lines) + "\n" if lines else ""


def _unix(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.timestamp()


def updated_state(state: dict[str, Any], metrics: dict[str, Any], ok: bool, now: float) -> dict[str, Any]:
    """The stage's carried state after a run that ended (``ok`` or not) at ``now`` with ``metrics``."""
    state = {"runs": {"ok": 0, "failed": 0}, "records": dict.fromkeys(DISPOSITIONS, 0), **state}
    outcome = "ok" if ok else "failed"
    state["runs"] = {**state["runs"], outcome: state["runs"].get(outcome, 0) + 1}
    state["last_run"] = now
    if "seconds" in metrics:
        state["seconds"] = float(metrics["seconds"])
    if not ok:
        return state
    state["last_success"] = now
    state["records"] = {d: state["records"].get(d, 0) + int(metrics.get(_COUNT_KEYS[d]) or 0) for d in DISPOSITIONS}
    if metrics.get("records_in"):
        state["quarantine_ratio"] = int(metrics.get("quarantined") or 0) / int(metrics["records_in"])
    for key in ("lag_versions", "lag_seconds"):
        if metrics.get(key) is not None:
            state[key] = float(metrics[key])
    if metrics.get("watermark") is not None:
        state["watermark"] = _unix(metrics["watermark"])
    if metrics.get("sgp4_errors") is not None:
        state["propagation_errors"] = state.get("propagation_errors", 0) + int(metrics["sgp4_errors"])
    levels = {k.removeprefix("open_alerts_"): int(v) for k, v in metrics.items() if k.startswith("open_alerts_")}
    if levels:
        state["open_alerts"] = levels
    sensors = dict(state.get("sensors", {}))
    for sensor, seen in (metrics.get("sensor_newest") or {}).items():  # a watermark never moves back
        if sensor not in sensors or seen["newest_unix_s"] > sensors[sensor]["newest_unix_s"]:
            sensors[sensor] = {"kind": seen["kind"], "newest_unix_s": float(seen["newest_unix_s"])}
    if sensors:
        state["sensors"] = sensors
    if (metrics.get("landing_to_alert") or {}).get("count"):
        state["landing_to_alert"] = added_histograms(state.get("landing_to_alert"), metrics["landing_to_alert"])
    return state


def added_histograms(carried: dict[str, Any] | None, run: dict[str, Any]) -> dict[str, Any]:
    """A carried cumulative histogram plus one run's (bucket counts, count and sum add up)."""
    carried = carried or {"buckets": {}, "count": 0, "sum": 0.0}
    buckets = {b: carried["buckets"].get(b, 0) + n for b, n in run["buckets"].items()}
    return {"buckets": buckets, "count": carried["count"] + run["count"], "sum": carried["sum"] + run["sum"]}


def _histogram_samples(name: str, labels: dict[str, str], histogram: dict[str, Any]) -> list:
    by_bound = sorted(histogram["buckets"].items(), key=lambda kv: float(kv[0]))
    out = [(f"{name}_bucket", {**labels, "le": number(float(b))}, n) for b, n in by_bound]
    out.append((f"{name}_bucket", {**labels, "le": "+Inf"}, histogram["count"]))
    return out + [(f"{name}_sum", labels, histogram["sum"]), (f"{name}_count", labels, histogram["count"])]


def samples(stage: str, state: dict[str, Any]) -> list[tuple[str, dict[str, str], float]]:
    """The stage's samples from its carried state."""
    out = [("sda_stage_runs_total", {"stage": stage, "outcome": k}, v) for k, v in sorted(state["runs"].items())]
    out += [("sda_stage_records_total", {"stage": stage, "disposition": d}, state["records"][d]) for d in DISPOSITIONS]
    gauges = {"sda_stage_last_run_seconds": "seconds", "sda_stage_last_run_timestamp_seconds": "last_run",
              "sda_stage_last_success_timestamp_seconds": "last_success",
              "sda_stage_quarantine_ratio": "quarantine_ratio", "sda_consumer_lag_versions": "lag_versions",
              "sda_consumer_lag_seconds": "lag_seconds", "sda_stage_watermark_timestamp_seconds": "watermark"}
    out += [(name, {"stage": stage}, state[key]) for name, key in gauges.items() if state.get(key) is not None]
    out += [("sda_open_alerts", {"stage": stage, "level": level}, n)
            for level, n in sorted(state.get("open_alerts", {}).items())]
    if "propagation_errors" in state:
        out.append(("sda_propagation_errors_total", {"stage": stage}, state["propagation_errors"]))
    out += [("sda_sensor_newest_event_timestamp_seconds", {"sensor": sensor, "kind": seen["kind"]},
             seen["newest_unix_s"]) for sensor, seen in sorted(state.get("sensors", {}).items())]
    if state.get("landing_to_alert"):
        out += _histogram_samples("sda_landing_to_alert_seconds", {"stage": stage}, state["landing_to_alert"])
    return out


@contextlib.contextmanager
def _locked(root: Path, stage: str) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{stage}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def record_stage_run(settings: Settings, stage: str, metrics: dict[str, Any], ok: bool,
                     now: float | None = None) -> Path:
    """Add a run of ``stage`` that ended (``ok``: its figures recorded; otherwise it raised) to its textfile;
    returns the file."""
    root = metrics_root(settings)
    with _locked(root, stage):
        state_file = root / f"{stage}.json"
        state = json.loads(state_file.read_text()) if state_file.is_file() else {}
        state = updated_state(state, metrics, ok, dt.datetime.now(dt.timezone.utc).timestamp() if now is None else now)
        _replace(state_file, json.dumps(state, sort_keys=True))
        _replace(root / f"{stage}.prom", render(samples(stage, state)))
    return root / f"{stage}.prom"


def exposition(root: Path) -> str:
    """Every stage's textfile under ``root``, as one exposition: each family's HELP and TYPE once, its samples
    from all stages together (the format wants a family's lines in one group)."""
    groups: dict[str, list[str]] = {}
    heads: dict[str, list[str]] = {}
    for path in sorted(root.glob("*.prom")) if root.is_dir() else []:
        for line in path.read_text().splitlines():
            if line.startswith("# "):
                name = line.split()[2]
                heads.setdefault(name, [])
                if len(heads[name]) < 2:
                    heads[name].append(line)
            elif line:
                groups.setdefault(family_of(line.split("{")[0].split(" ")[0]), []).append(line)
    lines = [line for name in FAMILIES if name in groups for line in (*heads.get(name, []), *groups[name])]
    return "\n".join(lines) + "\n" if lines else ""
