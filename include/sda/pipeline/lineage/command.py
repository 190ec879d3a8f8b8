"""``sda trace ALERT_ID [--json] [--limit N]``: runs the trace (:func:`sda.pipeline.lineage.alert.trace`) and
prints it, as JSON or as the text :func:`render` makes of it."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any

from sda.pipeline.lineage.alert import TraceError, trace
from sda.pipeline.lineage.orbit import KINDS

MATCH_WORDS = {"window": "all of the window's correlated observations (obs_digest matches)",
               "known": "those correlated before the fit ran (obs_digest matches)",
               "changed": "the window's observations have changed since the fit (obs_digest differs): "
                          "its current ones are listed"}


def render_orbit(used: dict[str, Any], limit: int) -> list[str]:
    """The text lines of :func:`sda.pipeline.lineage.orbit.orbit_used` for one object (indented under it)."""
    if used["kind"] != "fused":
        return [f"  orbit used: {used['note']} (covariance source {used['cov_source']})"]
    out = [f"  orbit used: fused orbit {used['fused_id']} ({used['cov_source']}): its prediction and "
           "covariance at TCA"]
    f = used["fused_orbit"]
    if f is None:
        return out + ["    not found in fused_orbits nor its change feed (refitted and vacuumed since)"]
    kinds = ", ".join(f"{k} {f[f'n_{k}']} ({f[f'used_{k}']} used)" for k in KINDS if f[f"n_{k}"])
    rms = "n/a" if f["rms"] is None else f"{f['rms']:.2f}"
    out += [f"    window {f['window_start']} .. {f['window_end']}, epoch {f['epoch']}, fitted by run {f['run_id']}"
            + ("" if used["found"] == "table" else " (since refitted: found in the change feed)"),
            f"    {f['status']}" + (f" ({f['reason']})" if f.get("reason") else "")
            + f", weighted RMS {rms}, {f['iterations']} iterations, prior {f['prior_source']}",
            f"    observations {f['observations']}: {kinds or 'none'}; outliers {f['outliers']}"]
    if f.get("sigma_r_m") is not None:
        out.append(f"    1-sigma R/T/N at epoch {f['sigma_r_m']:.0f} / {f['sigma_t_m']:.0f} / {f['sigma_n_m']:.0f} m")
    obs = used["fitted_observations"]
    per_sensor = ", ".join(f"{s} {n}" for s, n in obs["by_sensor"].items())
    shown = f", first {len(obs['listed'])} shown" if obs["count"] > len(obs["listed"]) else ""
    out.append(f"    fitted to {obs['count']} observations ({per_sensor or 'none'}{shown}): "
               + MATCH_WORDS[obs["match"]])
    out += [f"      {o['event_time']} {o['sensor_id']:<14} {o['sensor_kind']:<8} obs {o['obs_id']}"
            for o in obs["listed"][:limit]]
    return out


def _side(status: str, norad) -> str:
    return f"{status} {norad}" if norad is not None else status


def render_moves(moves: list[dict[str, Any]], limit: int) -> list[str]:
    """The object's observations re-association moved (from, to, round, why)."""
    if not moves:
        return []
    shown = f" (last {min(limit, len(moves))} shown)" if len(moves) > limit else ""
    out = [f"  observations re-association moved to or from it: {len(moves)}{shown}"]
    for m in moves[-limit:]:
        out.append(f"    {m['event_time']} obs {m['obs_id'][:16]} {_side(m['from_status'], m['from_norad_id'])} -> "
                   f"{_side(m['to_status'], m['to_norad_id'])}  round {m['round']} of run {m['run_id']}: {m['reason']}")
    return out


def render(result: dict[str, Any], limit: int = 20) -> str:
    a = result["alert"]
    out = [f"alert {a['alert_id']} v{a['version']} {a['status']} {a['level']}: "
           f"{a['primary_id']} x {a['secondary_id']}, TCA {a['tca']}, miss {a['miss_m']:.0f} m, Pc {a['pc']}",
           f"  screened from {a['screen_start']} by run {result['screened_by_run']}; "
           f"{len(result['conjunctions'])} screening row(s), {len(result['versions'])} emitted version(s)"]
    if result.get("trace_id"):
        out.append(f"  trace {result['trace_id']}: that run's stage spans (<lakehouse parent>/traces/spans.jsonl)")
    for role, obj in result["objects"].items():
        es, st = obj["element_set"], obj["state_window"]
        out.append(f"{role} {obj['norad_id']}" + (f" {es['name']}" if es and es.get("name") else ""))
        if obj.get("orbit_used"):
            out += render_orbit(obj["orbit_used"], limit)
        if es:
            out.append(f"  catalogue state: element set epoch {es['epoch']} from {es['source']} "
                       f"(loaded {es['load_time']}, run {es['run_id']})")
            out += [f"    {es['line1']}", f"    {es['line2']}"]
        else:
            out.append("  catalogue state: no element set found")
        if st:
            out.append(f"  state window {st['window_start']} .. {st['window_end']}: {st['observations']} observations, "
                       f"residual RMS {st['residual_rms_m']:.0f} m, final={st['final']}")
        obs = obj["observations"]
        shown = f" (last {min(limit, len(obs))} shown)" if len(obs) > limit else ""
        out.append(f"  observations correlated before the screening ran: {len(obs)}{shown}")
        for o in obs[-limit:]:
            out.append(f"    {o['event_time']} {o['sensor_id']:<14} obs {o['obs_id'][:16]} "
                       f"residual {o['residual_m']:.0f} m  bronze {o['bronze_id'][:16]}")
        out += render_moves(obj.get("moves") or [], limit)
    out.append(f"bronze records: {len(result['bronze'])} in {len(result['landing_files'])} landing file(s)")
    for f in result["landing_files"]:
        n = sum(1 for b in result["bronze"] if b["source_file"] == f["file_path"])
        out.append(f"  {f['file_path']}  sha256 {f['file_sha256'][:16]}  {f['file_size']} B  "
                   f"{n} of its {f['records']} records  (ingest run {f['run_id']})")
    return "\n".join(out)


def main(args: argparse.Namespace) -> int:
    from sda.config.settings import load_settings
    from sda.lake.spark import build_session

    settings = load_settings()
    spark = build_session("sda-trace", settings)
    try:
        result = trace(spark, settings, args.alert_id, args.limit)
    except TraceError as exc:
        print(f"sda trace: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2,
                         default=lambda v: v.isoformat() if isinstance(v, (dt.datetime, dt.date)) else str(v)))
    else:
        print(render(result, args.limit))
    spark.stop()
    return 0
