"""Scoring the correlator against a simulation's truth, without Spark (tests and bench/correlation.py).

:func:`landed_observations` reads the landed files as upstream would hand them to correlation:
ingest refuses malformed lines (:func:`sda.transforms.wire.file_records`), normalize refuses unknown sensors and
impossible values and converts to SI, dedup collapses re-deliveries and folds a re-processed copy
with its original, keeping the earliest event time. :func:`correlate` runs
:func:`sda.orbit.correlation.correlate_frame` per event-time bucket, as each ``applyInPandas`` group of
jobs/correlate.py does; :func:`score` counts right / wrong / uncorrelated / ambiguous.

*Right* = associated with the true object -- for a body published under several catalogue numbers
(a docked stack, observed as one body: the truth's ``same_body``), with any of them, counted apart as
``right_same_body``; *wrong* = associated with another object; *uct* = uncorrelated although the
object is catalogued (``held_ambiguous`` of them are cross-tags: flagged ambiguous and held because two
objects were about equally likely); *ambiguous* = associated and flagged ambiguous. Given the catalogue's lines,
``wrong_same_element_set`` counts the wrong associations with an object whose element set is the
true object's (no measurement can tell them apart; with the stacks observed as one body, none are
expected); they are included in ``wrong``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping

import numpy as np
import pandas as pd

from sda.orbit import correlation
from sda.orbit.catalog import latest_by_object, load_catalog
from sda.orbit.correlation.association import distinct_bodies
from sda.orbit.screening import satrecs_from_lines
from sda.transforms import wire

UTC = dt.timezone.utc
MEASUREMENT_KINDS = ("radar", "optical", "isl")


def measurements(result) -> pd.DataFrame:
    """Every well-formed measurement of the landing files in the OBSERVATION envelope's units, with
    its truth row's ``key`` and, as ``bronze_id``, its record's (``file#record_no``: a radar frame's
    detections share it, as they share their bronze record in the pipeline); malformed lines,
    refused at ingest, are left out."""
    rows = []
    for rel in result.files:
        kind = rel.split("/", 1)[0]
        if kind not in MEASUREMENT_KINDS:  # the harsher skies' space-weather files carry no measurement
            continue
        for rec in wire.file_records(kind, (result.landing / rel).read_bytes()):
            if rec.text is None:  # refused at ingest (malformed)
                continue
            key = f"{rel}#{rec.record_no}"
            if kind == "radar":
                frame = json.loads(rec.text)
                for i, d in enumerate(frame["dets"]):
                    rows.append(dict(key=f"{key}#{i}", bronze_id=key, sensor_id=frame["sensor"], sensor_kind=kind,
                                     event_time=d["t"],
                                     range_m=d["range_km"] * 1000.0, az_rad=np.deg2rad(d["az_deg"]),
                                     el_rad=np.deg2rad(d["el_deg"]), range_rate_ms=d["rr_km_s"] * 1000.0))
            elif kind == "optical":
                station, stamp, ra_hours, dec_deg = rec.text.split(",")[:4]
                rows.append(dict(key=key, bronze_id=key, sensor_id=station, sensor_kind=kind, event_time=stamp,
                                 ra_rad=float(ra_hours) * np.pi / 12.0, dec_rad=np.deg2rad(float(dec_deg))))
            else:
                kv = dict(part.split("=", 1) for part in rec.text.split("|")[1:])
                stamp = dt.datetime.fromtimestamp(int(kv["t_ms"]) / 1000.0, UTC).isoformat()
                rows.append(dict(key=key, bronze_id=key, sensor_id=kv["src"], sensor_kind=kind, event_time=stamp,
                                 **{c: float(kv[c]) for c in ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms")}))
    obs = pd.DataFrame(rows)
    obs["event_time"] = pd.to_datetime(obs["event_time"], utc=True, format="ISO8601").dt.tz_convert(None)
    return obs


DEDUPS = ("pipeline", "truth")


def landed_observations(result, sensors: Mapping, dedup: str = "truth") -> pd.DataFrame:
    """Every observation that reaches correlation (OBSERVATION envelope units), with its truth:
    ``key``, ``true_id``, ``disorder`` and (with catalogue errors) ``error_r_m/t_m/n_m``.

    ``dedup``: ``"truth"`` folds each re-delivery and re-processed copy into its original by the truth's labels
    (a perfect dedup: the tests' oracle); ``"pipeline"`` by the dedup stage's own rule
    (:func:`sda.transforms.envelope.representatives`, per sensor, over every row at once), as a benchmark of the
    pipeline takes it. Either way normalize's refusals (impossible values) are taken from the truth's labels."""
    if dedup not in DEDUPS:
        raise ValueError(f"dedup must be one of {DEDUPS}, not {dedup!r}")
    truth = {}
    for line in result.truth_file.read_text().splitlines():
        row = json.loads(line)
        truth[row["key"]] = row
    obs = measurements(result)
    labels = [truth[k] for k in obs["key"]]
    obs["disorder"] = [t["disorder"] for t in labels]
    obs["true_id"] = pd.array([t["norad_id"] for t in labels], dtype="Int64")
    obs["duplicate_of"] = [t["duplicate_of"] for t in labels]
    obs["same_body"] = [tuple(t.get("same_body") or ()) for t in labels]
    errors = np.array([t.get("error_rtn_m") or [np.nan] * 3 for t in labels], dtype=float).reshape(-1, 3)
    obs["error_r_m"], obs["error_t_m"], obs["error_n_m"] = errors.T
    obs = obs[obs["sensor_id"].isin(sensors) & (obs["disorder"] != "impossible")]
    if dedup == "pipeline":
        obs = _deduplicated(obs)
    else:
        obs = obs[obs["disorder"] != "redelivery"].copy()
        obs["cluster"] = obs["duplicate_of"].where(obs["duplicate_of"].notna(), obs["key"])
        obs = obs.sort_values(["cluster", "event_time", "key"]).drop_duplicates("cluster").reset_index(drop=True)
    for column, attr in (("site_lat_deg", "lat_deg"), ("site_lon_deg", "lon_deg"), ("site_alt_m", "alt_m")):
        obs[column] = obs["sensor_id"].map({sid: getattr(s, attr) for sid, s in sensors.items()})
    obs["obs_id"] = obs["key"]
    return obs


def _deduplicated(obs: pd.DataFrame) -> pd.DataFrame:
    """``obs`` less the rows the dedup stage folds into another (:func:`sda.transforms.envelope.representatives`, one
    sensor at a time), in (event time, key) order."""
    from sda.transforms import envelope

    frame = obs.assign(obs_id=obs["key"], event_us=obs["event_time"].to_numpy("datetime64[us]").astype(np.int64))
    for column in envelope.CLUSTER_VALUES:
        if column not in frame:
            frame[column] = np.nan
    keep = np.zeros(len(frame), dtype=bool)
    for rows in frame.groupby("sensor_id", sort=False).indices.values():
        keep[rows] = envelope.representatives(frame.iloc[rows])
    return obs[keep].sort_values(["event_time", "key"]).reset_index(drop=True)


def catalogue(path) -> tuple[list[int], list]:
    """The newest element set per object of a catalogue file, as gold ``catalog`` gives it."""
    entries = latest_by_object(load_catalog(path)[0])
    return [e.norad_id for e in entries], satrecs_from_lines([e.line1 for e in entries], [e.line2 for e in entries])


def catalogue_lines(path) -> dict[int, tuple[str, str]]:
    """norad_id -> (line 1, line 2) of the newest element set per object."""
    return {e.norad_id: (e.line1, e.line2) for e in latest_by_object(load_catalog(path)[0])}


def sample_records(obs: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """At most ``n`` observations, whole records drawn at random (a radar frame's detections stay
    together, as the correlate job receives them), in ``obs``' order."""
    if len(obs) <= n:
        return obs
    sizes = obs.groupby("bronze_id", sort=True).size()
    order = sizes.sample(frac=1.0, random_state=seed)
    keep = order.index[order.cumsum().to_numpy() <= n]
    return obs[obs["bronze_id"].isin(keep)].reset_index(drop=True)


def correlate(obs: pd.DataFrame, ids, sats, gate_km: float, sigmas, **kwargs) -> pd.DataFrame:
    """``obs`` with the association columns, one ``correlate_frame`` call per event-time bucket; the measurements
    modelled with their light time (every simulated sky's radar and optical measurements carry it)."""
    kwargs.setdefault("light_time", True)
    if "model" not in kwargs and kwargs.get("prediction_sigma_m") is None:
        kwargs["model"] = correlation.prediction_model(sats)  # once, as a worker caches its catalogue
    kwargs.setdefault("bodies", distinct_bodies(np.asarray(ids, dtype=np.int64), sats))
    bucket = obs["event_time"].astype("int64") // (correlation.BUCKET_S * 10**9)
    found = pd.concat([correlation.correlate_frame(group.reset_index(drop=True), ids, sats, gate_km, sigmas, **kwargs)
                       for _, group in obs.groupby(bucket)])
    return obs.merge(found, on="obs_id", validate="one_to_one")


def _id(value) -> str:
    return "-" if pd.isna(value) else str(int(value))


def _is_observed_body(norad_ids: pd.Series, true_ids: pd.Series, bodies: pd.Series) -> np.ndarray:
    """Per row: ``norad_ids`` is the true object or another number of its body (a docked stack)."""
    return np.array([pd.notna(a) and pd.notna(t) and (int(a) == int(t) or int(a) in body)
                     for a, t, body in zip(norad_ids, true_ids, bodies)], dtype=bool)


def score(scored: pd.DataFrame, lines: Mapping[int, tuple[str, str]] | None = None) -> dict:
    """Percentages of right / wrong / uct / ambiguous, and how many wrong ones are not flagged ambiguous;
    which objects the wrong ones confused (``wrong_pairs``) and which sensor's observations of which
    object were held as cross-tags (``held_by_sensor``); with ``lines`` (norad_id -> TLE lines) the wrong
    ones that went to an identical element set. With ``nearest_norad_id``: how many cross-tags' likeliest
    candidate was the observed object (``held_likeliest_right``), and right and wrong as they would be
    if every cross-tag were associated with it (``right_pct_if_held_committed``,
    ``wrong_pct_if_held_committed``): what the rule that holds them saves or costs."""
    n = len(scored)
    associated = (scored["status"] == "correlated").to_numpy()
    exact = (scored["norad_id"] == scored["true_id"]).fillna(False).to_numpy(dtype=bool)
    bodies = scored["same_body"] if "same_body" in scored else pd.Series([()] * n, index=scored.index)
    same = _is_observed_body(scored["norad_id"], scored["true_id"], bodies)
    stack = same & ~exact
    no_object = scored["true_id"].isna().to_numpy()
    if lines is not None:  # a body the catalogue does not hold (sda.sim.events) has no object to go to
        no_object |= ~scored["true_id"].isin(list(lines)).fillna(False).to_numpy(dtype=bool)
    ambiguous = scored["ambiguous"].to_numpy(dtype=bool) & associated
    held = scored["ambiguous"].to_numpy(dtype=bool) & ~associated  # cross-tags: flagged, not associated
    right = (associated & same) | (~associated & no_object)
    wrong = associated & ~same
    uct = ~associated & ~no_object
    pct = lambda mask: round(100.0 * float(mask.sum()) / max(n, 1), 4)  # noqa: E731
    out = {"observations": n, "right": int(right.sum()), "wrong": int(wrong.sum()), "uct": int(uct.sum()),
           "ambiguous": int(ambiguous.sum()), "right_pct": pct(right), "wrong_pct": pct(wrong), "uct_pct": pct(uct),
           "ambiguous_pct": pct(ambiguous), "wrong_unflagged": int((wrong & ~ambiguous).sum()),
           "right_same_body": int((associated & stack).sum()),
           # cross-tags: flagged, not associated (near coin tosses between two objects); counted in uct
           "held_ambiguous": int(held.sum())}
    if "nearest_norad_id" in scored:
        # what committing the cross-tags would do: each to its likeliest candidate (the rule holds them)
        likeliest = _is_observed_body(scored["nearest_norad_id"], scored["true_id"], bodies) & held
        out.update(held_likeliest_right=int(likeliest.sum()),
                   right_pct_if_held_committed=pct((right & ~held) | likeliest),
                   wrong_pct_if_held_committed=pct(wrong | (held & ~likeliest)))
    if wrong.any():  # which objects the wrong ones confused: "true->associated": count, most first
        pairs = pd.Series([f"{int(t)}->{int(a)}" for t, a in zip(scored["true_id"][wrong], scored["norad_id"][wrong])])
        out["wrong_pairs"] = {k: int(v) for k, v in pairs.value_counts().head(10).items()}
    if held.any() and "sensor_id" in scored:  # where the cross-tags were: "sensor: true object": count
        rows = scored[held]
        seen = pd.Series([f"{s}: {_id(t)}" for s, t in zip(rows["sensor_id"], rows["true_id"])])
        out["held_by_sensor"] = {k: int(v) for k, v in seen.value_counts().head(10).items()}
    if lines is not None:
        from sda.sim.tle_error import element_set_key

        key = {int(n): element_set_key(*pair) for n, pair in lines.items()}
        twins = np.array([bool(w) and key.get(int(a)) == key.get(int(t)) for w, a, t in
                          zip(wrong, scored["norad_id"].fillna(-1), scored["true_id"].fillna(-2))], dtype=bool)
        out.update(wrong_same_element_set=int(twins.sum()), wrong_same_element_set_pct=pct(twins),
                   wrong_distinguishable_pct=pct(wrong & ~twins))
    return out
