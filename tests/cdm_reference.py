"""An independent reading of a CDM and its 2-D Pc, for tests: nothing here comes from ``sda``.

* :func:`read_cdm` parses a CCSDS CDM (508.0-B-1, KVN) with ``ccsds-ndm-py``, another implementation
  of the standard than the project's ``sda.alerts.cdm``, and takes the hard-body radius from a CARA-style
  ``COMMENT HBR = <x> [m]`` (CDM 1.0 has no HBR keyword; CARA and this project write it as a comment).
* :func:`pc2d` is NASA CARA's 2-D Pc ("Pc2D_Foster" without TCA adjustment): the two objects' position
  covariances (inertial) are summed, projected on the encounter plane (perpendicular to the relative
  velocity) and the 2-D Gaussian centred at the miss distance is integrated over the hard-body disc,
  here by adaptive quadrature in polar coordinates (:func:`scipy.integrate.dblquad`), not by the
  error-function series the pipeline uses. As CARA's ``Pc2D_Foster.m``, the Gaussian's centre is the whole
  miss distance ``|r|`` on the encounter plane's x axis (a state given slightly off TCA has a small part
  of ``r`` along the relative velocity; CARA's expected Pc of real CDMs need that convention).
* The covariance's R/T/N axes are built from the state as written, as a receiver builds them:
  R along r, N along r x v, T = N x R.
* CARA's density-forecast terms (``COMMENT DCP Density Forecast Uncertainty = s``, ``COMMENT DCP Sensitivity
  Vector RTN Pos = a b c [m]``, ``... RTN Vel = a b c [m/sec]``, in an object's data section): when both objects
  carry them, :func:`pc_of_cdm` integrates the relative position's covariance with their shared part taken out,
  ``C1 + C2 - s1 s2 (g1 g2^T + g2 g1^T)`` (CARA's ``Pc_CovXCorr.m``, Casali et al. 2018), each ``g`` the position
  sensitivity turned from its own object's R/T/N axes.
"""

from __future__ import annotations

import math
import re

import numpy as np
from scipy import integrate

INERTIAL = {"EME2000", "GCRF", "ICRF"}
_HBR = re.compile(r"^\s*HBR\s*=\s*([-+0-9.eE]+)\s*\[m\]\s*$")
_DCP = re.compile(r"^\s*DCP (Density Forecast Uncertainty|Sensitivity Vector RTN Pos|Sensitivity Vector RTN Vel)"
                  r"\s*=\s*([-+0-9.eE ]+?)\s*(\[[a-z/]+\])?\s*$")


def read_dcp(comments) -> tuple[float, np.ndarray] | None:
    """(density uncertainty, 6-vector sensitivity on the object's R/T/N axes, m and m/s) from an object's data
    comments, or None when it has none."""
    found = {}
    for comment in comments:
        m = _DCP.match(comment)
        if m:
            found[m.group(1)] = [float(x) for x in m.group(2).split()]
    if not found:
        return None
    assert len(found) == 3, f"incomplete DCP set: {sorted(found)}"
    return (found["Density Forecast Uncertainty"][0],
            np.array(found["Sensitivity Vector RTN Pos"] + found["Sensitivity Vector RTN Vel"]))


def rtn_axes(r, v) -> np.ndarray:
    """Columns R, T, N of the frame of a state, in the state's frame."""
    r, v = np.asarray(r, float), np.asarray(v, float)
    radial = r / np.linalg.norm(r)
    normal = np.cross(r, v) / np.linalg.norm(np.cross(r, v))
    return np.column_stack([radial, np.cross(normal, radial), normal])


def read_cdm(text: str) -> dict:
    """The numbers of a KVN CDM as ``ccsds-ndm-py`` reads them: per object ``r``, ``v`` (m, m/s), ``cov_rtn``
    (6x6, m-units), ``frame``, ``method``; and ``pc`` (or None), ``hbr`` (m, or None), ``miss``, ``rel_rtn``."""
    import ccsds_ndm

    cdm = ccsds_ndm.Cdm.from_str(text, "kvn")
    rel = cdm.body.relative_metadata_data
    hbr = None
    for comment in rel.comment:
        m = _HBR.match(comment)
        if m:
            hbr = float(m.group(1))
    objects = []
    for seg in cdm.body.segments:
        state = np.asarray(seg.data.state_vector_numpy, float) * 1000.0  # km, km/s -> m, m/s
        cov = np.asarray(seg.data.covariance_matrix_numpy, float)[:6, :6]
        objects.append({"r": state[:3], "v": state[3:], "cov_rtn": cov, "frame": str(seg.metadata.ref_frame).upper(),
                        "method": str(seg.metadata.covariance_method).upper(),
                        "designator": seg.metadata.object_designator,
                        # KVN leaves it open whether comments between the metadata and the state belong to either
                        "dcp": read_dcp([*seg.metadata.comment, *seg.data.comment])})
    rsv = rel.relative_state_vector
    return {"objects": objects, "pc": rel.collision_probability, "hbr": hbr, "miss": rel.miss_distance,
            "speed": rel.relative_speed,
            "rel_r": np.array([rsv.relative_position_r, rsv.relative_position_t, rsv.relative_position_n]),
            "rel_v": np.array([rsv.relative_velocity_r, rsv.relative_velocity_t, rsv.relative_velocity_n])}


def pc2d(r1, v1, cov1, r2, v2, cov2, hbr: float) -> float:
    """CARA's 2-D Pc of two objects (inertial states, 3x3 inertial position covariances, one unit system)."""
    r = np.asarray(r2, float) - np.asarray(r1, float)
    v = np.asarray(v2, float) - np.asarray(v1, float)
    c = np.asarray(cov1, float)[:3, :3] + np.asarray(cov2, float)[:3, :3]
    y = v / np.linalg.norm(v)  # CARA's encounter frame: y along v, z along r x v, x = y x z
    z = np.cross(r, v) / np.linalg.norm(np.cross(r, v))
    plane = np.array([np.cross(y, z), z])
    mean = np.array([np.linalg.norm(r), 0.0])  # as CARA: the whole miss, not only its in-plane part
    cp = plane @ c @ plane.T
    inv, det = np.linalg.inv(cp), np.linalg.det(cp)
    norm = 1.0 / (2.0 * math.pi * math.sqrt(det))

    def density(rho: float, theta: float) -> float:  # dblquad's inner variable first
        d = np.array([rho * math.cos(theta), rho * math.sin(theta)]) - mean
        return norm * math.exp(-0.5 * d @ inv @ d) * rho

    value, _ = integrate.dblquad(density, 0.0, 2.0 * math.pi, 0.0, float(hbr), epsabs=0.0, epsrel=1e-10)
    return float(value)


def pc_of_cdm(cdm: dict, hbr: float | None = None, cross_correlation: bool = True) -> float:
    """The 2-D Pc of a :func:`read_cdm` message from its contents alone (inertial REF_FRAME only); with both
    objects' DCP terms and ``cross_correlation``, on the pair's covariance (module docstring)."""
    inertial, shared = [], []
    for o in cdm["objects"]:
        assert o["frame"] in INERTIAL, f"REF_FRAME {o['frame']}: not an inertial frame"
        axes = rtn_axes(o["r"], o["v"])
        inertial.append((o["r"], o["v"], axes @ o["cov_rtn"][:3, :3] @ axes.T))
        if o.get("dcp") is not None:
            shared.append((o["dcp"][0], axes @ o["dcp"][1][:3]))
    (r1, v1, c1), (r2, v2, c2) = inertial
    if cross_correlation and len(shared) == 2:
        (s1, g1), (s2, g2) = shared
        c1, c2 = c1 + c2 - s1 * s2 * (np.outer(g1, g2) + np.outer(g2, g1)), np.zeros((3, 3))
    return pc2d(r1, v1, c1, r2, v2, c2, cdm["hbr"] if hbr is None else hbr)


def check_outbox(outbox, min_pc: float = 1e-10, rel: float = 1e-3) -> dict:
    """Every CDM of an outbox read with ccsds-ndm-py and checked against itself and its JSON twin (the alert row
    as emitted): both objects in EME2000; RELATIVE_POSITION/VELOCITY_R/T/N and MISS_DISTANCE equal to the
    written states' (on the primary's R/T/N axes built from its written state); COLLISION_PROBABILITY and the
    HBR comment equal to the alert's; and for every Pc >= ``min_pc`` the 2-D Pc recomputed from the message
    alone within ``rel`` of the alert's. Returns the counts, the covariance methods seen and the largest
    relative difference (assertion errors name the file)."""
    import json
    from pathlib import Path

    files = sorted(Path(outbox).glob("CDM-*.cdm"))
    methods, compared, worst = set(), 0, 0.0
    for f in files:
        cdm = read_cdm(f.read_text())
        row = json.loads(f.with_suffix(".json").read_text())
        p, s = cdm["objects"]
        assert (p["frame"], s["frame"]) == ("EME2000", "EME2000"), f.name
        methods |= {p["method"], s["method"]}
        dr, axes = s["r"] - p["r"], rtn_axes(p["r"], p["v"])
        assert np.allclose(axes.T @ dr, cdm["rel_r"], rtol=0, atol=1e-3), f.name
        assert np.allclose(axes.T @ (s["v"] - p["v"]), cdm["rel_v"], rtol=0, atol=1e-6), f.name
        assert abs(np.linalg.norm(dr) - cdm["miss"]) < 1e-3, f.name
        assert cdm["pc"] == row["pc"] and cdm["hbr"] == row["hbr_m"], f.name
        if row["pc"] is None or row["pc"] < min_pc:
            continue
        relative = abs(pc_of_cdm(cdm) / row["pc"] - 1.0)
        assert relative < rel, (f.name, row["pc"], relative)
        compared, worst = compared + 1, max(worst, relative)
    return {"cdms": len(files), "compared": compared, "worst": worst, "methods": methods}
