"""``sda score``: the pipeline's open alerts judged against the simulator's truth (what ``make run`` prints
at its end).

    sda score [--truth LANDING/_truth/<sim_id>.summary.json] [--json]

Only for simulated sensors: the truth is the simulator's, which the pipeline never reads. Default truth: the
newest ``_truth/*.summary.json`` in the settings' landing zone. Printed: how many open alerts screened both
objects, one or neither on their fused orbits (the rest on the catalogue's element sets), each group's
miss-distance error against the truth's closest approach of the pair (median, 90th percentile), and the
injected pair's alert (simulate ``--inject-conjunction``) with its CDM's ``COVARIANCE_METHOD``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from sda.sim import alert_truth

ALERT_COLUMNS = ("alert_id", "status", "primary_id", "secondary_id", "tca", "miss_m", "p_cov_source", "s_cov_source",
                 "cdm_file")


def add_parser(sub) -> None:
    p = sub.add_parser("score", help="judge the open alerts against the simulator's truth (simulated sensors only)")
    p.add_argument("--truth", type=Path, default=None,
                   help="a simulation's _truth/<sim_id>.summary.json (default: the newest in the landing zone)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON line")


def newest_truth(landing: Path) -> Path | None:
    """The newest simulation summary in ``landing/_truth`` (by modification time), or None."""
    found = sorted((landing / "_truth").glob("*.summary.json"), key=lambda p: (p.stat().st_mtime, p.name))
    return found[-1] if found else None


def covariance_methods(cdm_text: str) -> list[str]:
    """The ``COVARIANCE_METHOD`` values of a KVN CDM, object 1 first."""
    return re.findall(r"^\s*COVARIANCE_METHOD\s*=\s*(\S+)", cdm_text, flags=re.MULTILINE)


def _fmt_m(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f} m"


def lines(figures: dict) -> list[str]:
    """The figures as the text ``make run`` prints."""
    out = [f"open alerts: {figures['open_alerts']}; screened on fused orbits: both objects "
           f"{figures['both_fused']['alerts']}, one {figures['one_fused']['alerts']}, neither (catalogue element "
           f"sets) {figures['catalogue_only']['alerts']}"]
    for key, what in (("both_fused", "both fused"), ("one_fused", "one fused"), ("catalogue_only", "catalogue only")):
        g = figures[key]
        if g["alerts"]:
            out.append(f"  {what:15s} miss-distance error against the truth: median {_fmt_m(g['miss_error_median_m'])},"
                       f" p90 {_fmt_m(g['miss_error_p90_m'])} ({g['scored']} scored)")
    pair = figures.get("pair")
    if pair is None:
        out.append("injected pair: no open alert")
    else:
        methods = ", ".join(pair.get("covariance_methods") or []) or "n/a"
        out.append(f"injected pair {pair['primary_id']}/{pair['secondary_id']}: miss {_fmt_m(pair['miss_m'])}, truth "
                   f"{_fmt_m(pair['true_miss_m'])} (off by {_fmt_m(pair['miss_error_m'])}); orbits "
                   f"{pair['primary_orbit']}/{pair['secondary_orbit']}; CDM COVARIANCE_METHOD {methods}")
    return out


def score(spark, settings, truth: Path) -> dict:
    """:func:`sda.sim.alert_truth.alert_figures` of gold ``alerts`` against the truth ``truth`` (extended to
    the latest TCA), with the injected pair's CDM covariance methods read from the outbox."""
    import pandas as pd

    from sda.lake.tables import TABLES, table_exists
    from sda.orbit.times import unix
    from sda.sim.truth import load_ephemeris

    if not table_exists("alerts", settings):
        alerts = None
    else:
        alerts = TABLES["alerts"].read(spark, settings).select(*ALERT_COLUMNS).toPandas()
    if alerts is None or alerts.empty:
        return {"truth": str(truth), "open_alerts": 0, "both_fused": {"alerts": 0}, "one_fused": {"alerts": 0},
                "catalogue_only": {"alerts": 0}, "pair": None}
    until = max(unix(t) for t in alerts["tca"]) + 900.0
    bodies = set(alerts["primary_id"]) | set(alerts["secondary_id"])  # only they are extended to the horizon
    injected = json.loads(Path(truth).read_text()).get("injected") or {}
    pair_tca = unix(pd.Timestamp(injected["tca"])) if injected.get("tca") else None
    figures = {"truth": str(truth), **alert_truth.alert_figures(load_ephemeris(truth, until, bodies), alerts,
                                                                pair_tca_unix=pair_tca)}
    pair = figures["pair"]
    if pair is not None and pair.get("cdm_file"):
        cdm = Path(settings.outbox) / pair["cdm_file"]
        pair["covariance_methods"] = covariance_methods(cdm.read_text()) if cdm.is_file() else []
    return figures


def main(args: argparse.Namespace) -> int:
    from sda.config.settings import load_settings
    from sda.lake.spark import build_session

    settings = load_settings()
    truth = args.truth or newest_truth(Path(settings.landing))
    if truth is None or not Path(truth).is_file():
        print(f"sda score: no simulation truth {'at ' + str(truth) if truth else 'in ' + str(settings.landing)}"
              " (it scores simulated sensors only: sda simulate writes _truth/<sim_id>.summary.json)")
        return 2
    spark = build_session("sda-score", settings)
    try:
        figures = score(spark, settings, Path(truth))
    finally:
        spark.stop()
    print(json.dumps(figures, default=str) if args.json else "\n".join(lines(figures)))
    return 0
