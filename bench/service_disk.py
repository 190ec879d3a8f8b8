"""What a running service piles up on disk: ``make run`` (the simulated sensors reporting, runs starting as
files land) sampled while it runs, with each part's growth per hour, the disk after 24 h at that rate, and
where the retention settings level it off (issue 50, point 2).

    # in one shell:   make run            (leave it running; the feed starts after the first run)
    # in another:     .venv/bin/python bench/service_disk.py [--minutes 30] [--every-s 300] [--home DIR]
                                                             [--out bench/results/service_disk.json]

Parts, under the settings of ``--home`` (``SDA_HOME``; default the project): the landing zone (sensor files;
the simulator's truth, ``_truth/``, apart), the lakehouse (Delta tables), the outbox, Airflow's task logs
and the rest of ``var/airflow`` (its metadata database and own log), the Spark Connect server's log. The
first sample is taken when the feed has landed its first files after ``make run``'s first run; growth is a
straight line fitted through the samples (the service's steady rate: the first run's three hours are the
intercept). ``after_24h_bytes`` extends the line to 24 h of running; ``steady_bytes`` caps each part that
a retention prunes at its rate times the retention (landed files and the truth: SDA_LANDING_RETENTION_H,
the outbox: SDA_OUTBOX_RETENTION_H, task logs: SDA_LOG_RETENTION_H), the others grow on.

Left out: OPTIMIZE and VACUUM (the daily ``sda_maintenance``) shrink the lakehouse's small files, which the
line does not see in a shorter sample; the Airflow metadata database and its own log have no retention.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from common import RESULTS, log, write_result

from sda.pipeline.retention import disk_usage


def parts(settings) -> dict[str, Path]:
    airflow = Path(os.environ.get("AIRFLOW_HOME") or settings.jars_dir.parent / "airflow")
    return {"landing": Path(settings.landing), "truth": Path(settings.landing) / "_truth",
            "lakehouse": Path(settings.lakehouse), "outbox": Path(settings.outbox), "task_logs": airflow / "logs",
            "airflow_other": airflow, "spark_log": settings.jars_dir.parent / "spark-connect"}


def sample(paths: dict[str, Path]) -> dict[str, int]:
    out = {name: disk_usage(path) for name, path in paths.items()}
    out["landing"] -= out["truth"]  # the sensor files alone
    out["airflow_other"] -= out["task_logs"]
    return out


def fit(samples: list[tuple[float, dict[str, int]]], settings) -> dict:
    t = np.array([s[0] for s in samples]) / 3600.0
    names = list(samples[0][1])
    retention_h = {"landing": settings.landing_retention_h, "truth": settings.landing_retention_h,
                   "outbox": settings.outbox_retention_h, "task_logs": settings.log_retention_h}
    out = {}
    for name in names:
        y = np.array([s[1][name] for s in samples], float)
        rate = float(np.polyfit(t - t[0], y, 1)[0]) if len(t) > 1 else 0.0
        now = float(y[-1])
        after = now + rate * 24.0
        keep = retention_h.get(name, 0.0)
        steady = rate * keep if keep > 0 else None
        out[name] = {"now_bytes": int(now), "bytes_per_hour": int(rate), "after_24h_bytes": int(after),
                     "retention_h": keep or None, "steady_bytes": None if steady is None else int(max(steady, 0)),
                     "mb_per_hour": round(rate / 1e6, 2), "after_24h_mb": round(after / 1e6, 1),
                     "steady_mb": None if steady is None else round(max(steady, 0) / 1e6, 1)}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0, help="how long to sample (default 30)")
    p.add_argument("--every-s", type=float, default=300.0, help="seconds between samples (default 300)")
    p.add_argument("--home", type=Path, help="SDA_HOME of the service (default: the project)")
    p.add_argument("--out", type=Path, default=RESULTS / "service_disk.json")
    args = p.parse_args()
    if args.minutes <= 0 or args.every_s <= 0:
        p.error("--minutes and --every-s must be positive")
    if args.home:
        os.environ["SDA_HOME"] = str(args.home)
    from sda.config.settings import load_settings

    settings = load_settings()
    paths = parts(settings)
    if not (Path(settings.landing) / "_feed" / "state.json").is_file():
        p.error(f"no simulated sensors reporting under {settings.landing} (run `make run` first)")
    started = time.time()
    samples = []
    while True:
        samples.append((time.time() - started, sample(paths)))
        sizes = " ".join(f"{k}={v / 1e6:.1f}MB" for k, v in samples[-1][1].items())
        log(f"{(time.time() - started) / 60:5.1f} min: {sizes}")
        if time.time() - started + args.every_s > args.minutes * 60:
            break
        time.sleep(args.every_s)
    figures = fit(samples, settings)
    total = {key: sum(f[key] or 0 for f in figures.values())
             for key in ("now_bytes", "bytes_per_hour", "after_24h_bytes")}
    total.update(mb_per_hour=round(total["bytes_per_hour"] / 1e6, 2),
                 after_24h_mb=round(total["after_24h_bytes"] / 1e6, 1))
    result = {"minutes_sampled": round((time.time() - started) / 60, 1), "samples": len(samples),
              "parts": figures,
              "total": total, "home": str(args.home or "project"),
              "note": "a straight line through the samples, extended to 24 h; OPTIMIZE/VACUUM not in the sample"}
    write_result(args.out, result, announce=log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
