"""bench/accuracy.py's scoring of the alerts' CDMs: the relative position at TCA against the covariance the CDM
implies for it.

For each open alert, its current CDM (``settings.outbox`` / the alert's ``cdm_file``) is read with ccsds-ndm-py
(:func:`read_cdm`: another implementation of CCSDS 508.0-B-1 than the pipeline's ``sda.alerts.cdm``, which wrote
it), as a receiver of the message reads it:

* the relative position the message states: OBJECT2's position minus OBJECT1's (EME2000, m);
* the covariance of that relative position the message implies: the sum of the two objects' position
  covariances, each given on the R/T/N axes of its own state (R along r, N along r x v, T = N x R) and turned to
  EME2000, less the density-forecast error the two share when both objects carry CARA's DCP comments
  (``s1 s2 (g1 g2^T + g2 g1^T)``, each position sensitivity g turned from its own object's R/T/N axes: CARA's
  ``Pc_CovXCorr.m``) (:func:`relative_covariance`; ``cross_correlation=False``: the plain sum);
* the truth's relative position at the message's TCA: both bodies of the truth (TEME of date, km) rotated to
  EME2000 with :func:`sda.orbit.inertial.eme2000_to_teme` (:func:`true_relative`).

``d^2`` of the true minus the stated relative position under that covariance (:func:`relative_d2`) is chi-square
with 3 degrees of freedom when the message's covariances are realistic. Per group of alerts (both objects on
fused orbits, one, neither: from the alert's ``p_cov_source`` / ``s_cov_source``, as bench/accuracy_events.py
splits them) :func:`score_alert_cdms` gives the count, mean and median ``d^2``, the share inside the 95 %
ellipsoid and one goodness-of-fit test of the sample (bench/accuracy_stats.py); ``both_fused_sum`` the same
CDMs of two fused objects under the plain sum (what the pair's covariance is compared with).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from accuracy_stats import chi2_test, d2_figures, mahalanobis_d2
from common import parse_iso

INERTIAL = "EME2000"
_DCP = re.compile(r"^\s*DCP (Density Forecast Uncertainty|Sensitivity Vector RTN Pos|Sensitivity Vector RTN Vel)"
                  r"\s*=\s*([-+0-9.eE ]+?)\s*(\[[a-z/]+\])?\s*$")


def rtn_axes(r, v) -> np.ndarray:
    """Columns R, T, N of the frame of a state, in the state's frame."""
    r, v = np.asarray(r, float), np.asarray(v, float)
    radial = r / np.linalg.norm(r)
    normal = np.cross(r, v) / np.linalg.norm(np.cross(r, v))
    return np.column_stack([radial, np.cross(normal, radial), normal])


def read_dcp(comments) -> tuple[float, np.ndarray] | None:
    """(density forecast uncertainty, position sensitivity on the object's R/T/N axes, m) from an object section's
    comments (CARA's ``COMMENT DCP ...`` lines), or None when it has not all three."""
    found = {}
    for comment in comments:
        m = _DCP.match(str(comment))
        if m:
            found[m.group(1)] = [float(x) for x in m.group(2).split()]
    if len(found) < 3:
        return None
    return found["Density Forecast Uncertainty"][0], np.array(found["Sensitivity Vector RTN Pos"][:3])


def read_cdm(text: str) -> dict:
    """A KVN CDM as ccsds-ndm-py reads it: ``tca`` (aware datetime) and per object (OBJECT1, OBJECT2)
    ``norad_id`` (from OBJECT_DESIGNATOR; None when it is not a number), ``frame``, ``r`` and ``v`` (m, m/s) and
    ``cov_rtn`` (3x3, m^2, on the state's R/T/N axes), ``dcp`` (:func:`read_dcp`, or None)."""
    import ccsds_ndm

    cdm = ccsds_ndm.Cdm.from_str(text, "kvn")
    objects = []
    for seg in cdm.body.segments:
        state = np.asarray(seg.data.state_vector_numpy, float) * 1000.0  # km, km/s -> m, m/s
        designator = str(seg.metadata.object_designator).strip()
        objects.append({"norad_id": int(designator) if designator.isdigit() else None,
                        "frame": str(seg.metadata.ref_frame).upper(), "r": state[:3], "v": state[3:],
                        "cov_rtn": np.asarray(seg.data.covariance_matrix_numpy, float)[:3, :3],
                        # comments between the metadata and the state: either section's, as KVN reads
                        "dcp": read_dcp([*seg.metadata.comment, *seg.data.comment])})
    return {"tca": parse_iso(str(cdm.body.relative_metadata_data.tca)), "objects": objects}


def relative_covariance(objects: list[dict], cross_correlation: bool = True) -> np.ndarray:
    """The covariance (inertial, m^2) of OBJECT2's minus OBJECT1's position: the two objects' RTN position
    covariances turned to the inertial frame of the states and summed, less their shared density-forecast error
    when both carry DCP terms and ``cross_correlation`` (module docstring)."""
    total, shared = np.zeros((3, 3)), []
    for o in objects:
        axes = rtn_axes(o["r"], o["v"])
        total += axes @ np.asarray(o["cov_rtn"], float) @ axes.T
        if o.get("dcp") is not None:
            shared.append((o["dcp"][0], axes @ o["dcp"][1]))
    if cross_correlation and len(shared) == 2:
        (s1, g1), (s2, g2) = shared
        total = total - s1 * s2 * (np.outer(g1, g2) + np.outer(g2, g1))
    return total


def relative_d2(objects: list[dict], true_relative_m, cross_correlation: bool = True) -> float:
    """d^2 of the true relative position (OBJECT2 minus OBJECT1, the states' frame, m) minus the stated one under
    :func:`relative_covariance`."""
    stated = np.asarray(objects[1]["r"], float) - np.asarray(objects[0]["r"], float)
    cov = relative_covariance(objects, cross_correlation)
    return float(mahalanobis_d2(np.asarray(true_relative_m, float) - stated, cov))


def true_relative(eph, primary_id: int, secondary_id: int, tca) -> np.ndarray | None:
    """The truth's secondary minus primary position at ``tca`` (aware datetime) in EME2000, m; None when the
    truth has not both bodies there."""
    from sda.orbit import inertial

    index = {int(n): i for i, n in enumerate(eph.norad)}
    if int(primary_id) not in index or int(secondary_id) not in index:
        return None
    t = tca.timestamp()
    r, _ = eph.at_pairs(np.array([index[int(primary_id)], index[int(secondary_id)]]), np.array([t, t]))
    if not np.isfinite(r).all():
        return None
    ns = int(round(tca.timestamp() * 1e6)) * 1000  # the message's microseconds, as integer nanoseconds
    return inertial.eme2000_to_teme(ns).T @ (r[1] - r[0]) * 1000.0


def cdm_d2(path: Path, eph) -> tuple[float, float]:
    """:func:`relative_d2` of one CDM file against the truth, under the pair's covariance and under the plain sum;
    NaN when the truth lacks a body or the message is not in EME2000 or names an object by something other than
    its catalogue number."""
    cdm = read_cdm(Path(path).read_text())
    objects = cdm["objects"]
    if any(o["frame"] != INERTIAL or o["norad_id"] is None for o in objects):
        return math.nan, math.nan
    rel = true_relative(eph, objects[0]["norad_id"], objects[1]["norad_id"], cdm["tca"])
    if rel is None:
        return math.nan, math.nan
    return relative_d2(objects, rel), relative_d2(objects, rel, cross_correlation=False)


def _group(d2: np.ndarray, alerts: int) -> dict:
    return {"alerts": int(alerts), **d2_figures(d2), "test": chi2_test(d2)}


def score_alert_cdms(eph, alerts: pd.DataFrame, outbox: Path) -> dict:
    """The open alerts' CDMs against the truth (module docstring), all together and per group."""
    open_alerts = alerts[alerts["status"] != "closed"]
    d2, d2_sum, missing = [], [], 0
    for name in open_alerts["cdm_file"]:
        path = Path(outbox) / str(name)
        if not path.is_file():
            missing += 1
            d2.append(math.nan)
            d2_sum.append(math.nan)
            continue
        pair, plain = cdm_d2(path, eph)
        d2.append(pair)
        d2_sum.append(plain)
    d2, d2_sum = np.array(d2, float), np.array(d2_sum, float)
    p_fused = open_alerts["p_cov_source"].astype(str).str.startswith("fused/").to_numpy(bool)
    s_fused = open_alerts["s_cov_source"].astype(str).str.startswith("fused/").to_numpy(bool)
    both, either = p_fused & s_fused, p_fused | s_fused
    return {"what": "d^2 of the truth's relative position at the CDM's TCA minus the CDM's, under the pair's "
                    "covariance the CDM implies (the two objects' position covariances summed, less their shared "
                    "density-forecast error when both carry DCP comments; chi-square 3 when realistic)",
            "cdm_files_missing": missing, "all": _group(d2, len(d2)),
            "both_fused": _group(d2[both], both.sum()), "both_fused_sum": _group(d2_sum[both], both.sum()),
            "one_fused": _group(d2[either & ~both], (either & ~both).sum()),
            "catalogue_only": _group(d2[~either], (~either).sum())}
