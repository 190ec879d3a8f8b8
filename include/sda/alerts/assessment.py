"""Conjunction assessment: the Pc, its validity and the alert level of each screened event (pure: no I/O).

1. **Assess** every event (:func:`assess`): each object's position covariance at TCA from the
   uncertainty model (:mod:`sda.orbit.uncertainty`: the newest gold ``object_state`` residuals when the
   object was observed since its element-set epoch, else literature TLE accuracy for its orbit regime,
   grown with the time from that reference to TCA); the 2-D Pc of Foster's method in the encounter
   plane (:func:`sda.orbit.pc.pc2d_foster_rtn`, combined covariance, ``settings.hard_body_radius_m``);
   CARA's validity test -- an encounter for which the 2-D method is invalid (low relative velocity: a
   long encounter; or an encounter offset from TCA) gets **no** Pc (null) and a ``pc_flag`` saying why.
   The states at TCA are the events' own (the screening's) or, when absent, SGP4 on the catalogue's
   newest element set.
   When both objects have fused orbits, the Pc is on the pair's covariance: their shared density-forecast
   error (each carries CARA's DCP terms, ``p_dcp_sigma`` / ``p_dcp_rtn``) is subtracted from the sum
   (:mod:`sda.orbit.pair_covariance`).
2. **Level** (:func:`judge`), three rules: ``pc`` (Pc >= ``settings.pc_yellow``; red when Pc >=
   ``settings.pc_red``), ``miss_distance`` (the predicted miss under ``settings.alert_distance_km``) and
   ``miss_probability`` (the probability that the miss is under the alert distance, from the pair's covariance,
   :func:`sda.orbit.pair_covariance.miss_probability`, at least ``settings.alert_miss_probability``). Yellow
   when a rule fires and Pc is under the red threshold; none when none fires. ``alert_rule`` names the rules
   that fired (comma-separated, in that order; null when none). An event without a valid Pc is judged on the
   miss distance and its probability, and its reason says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from sda.alerts.values import aware, missing
from sda.orbit import frames, uncertainty
from sda.orbit.pair_covariance import Dcp, miss_probability, pc2d_pair
from sda.orbit.pc import Pc2DResult, rtn_basis

__all__ = [
    "LEVELS",
    "RULES",
    "STATE_COLS",
    "STATE_FIELDS",
    "SIGMA_FIELDS",
    "ASSESSED_COLUMNS",
    "pc_flag",
    "alert_level",
    "judge",
    "intl_designator",
    "assess",
    "dedup_events",
]

LEVELS = ("red", "yellow", "none")
#: the alert rules, in the order ``alert_rule`` lists them
RULES = ("pc", "miss_distance", "miss_probability")
#: the screening events' TEME state columns at TCA, per object (``p_x`` .. ``s_vz``, km and km/s)
STATE_COLS = ("x", "y", "z", "vx", "vy", "vz")
#: an assessed event's states at TCA (m, m/s) and modelled 1-sigma RTN uncertainties there, per object
STATE_FIELDS = tuple(f"{o}_{c}" for o in ("p", "s") for c in ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms"))
SIGMA_FIELDS = tuple(f"{o}_sigma_{c}" for o in ("p", "s")
                     for c in ("r_m", "t_m", "n_m", "rdot_ms", "tdot_ms", "ndot_ms"))
#: the columns of :func:`assess`
ASSESSED_COLUMNS = ("event_id", "primary_id", "secondary_id", "tca", "tca_unix", "miss_m", "rel_speed_ms", "r_m",
                    "t_m", "n_m", *STATE_FIELDS, *SIGMA_FIELDS, "p_cov_source", "s_cov_source", "p_cov_rtn",
                    "s_cov_rtn", "p_dcp_sigma", "p_dcp_rtn", "s_dcp_sigma", "s_dcp_rtn", "pc", "pc_valid",
                    "pc_flag", "pc_reason", "miss_probability", "level", "alert_rule", "reason", "hbr_m",
                    "primary_name", "secondary_name",
                    "primary_intldes", "secondary_intldes", "flag", "p_maneuverable", "s_maneuverable")


# --------------------------------------------------------------------------- level and Pc

def pc_flag(result: Pc2DResult) -> str | None:
    """Short category of why the 2-D Pc is invalid (None when it is valid)."""
    if result.valid:
        return None
    text = result.reason
    if "zero relative velocity" in text:
        return "low relative velocity"
    if text.startswith("extended encounter"):
        return "long encounter (low relative velocity)"
    if "offset" in text:
        return "encounter offset from TCA"
    return "unusable covariance"


def judge(pc: float | None, miss_m: float, settings, flag: str | None = None,
          p_miss: float | None = None) -> tuple[str, str, tuple[str, ...]]:
    """(level, reason, rules fired) of the module docstring's rules. ``pc`` None (or NaN): the 2-D method is
    invalid, the miss distance and its probability decide; ``p_miss`` None: that rule is not applied."""
    red, yellow = float(settings.pc_red), float(settings.pc_yellow)
    dist_m = float(settings.alert_distance_km) * 1000.0
    threshold = float(settings.alert_miss_probability)
    valid = pc is not None and math.isfinite(pc)
    fired = (valid and pc >= yellow, miss_m < dist_m, p_miss is not None and p_miss >= threshold)
    rules = tuple(rule for rule, on in zip(RULES, fired) if on)
    level = "red" if valid and pc >= red else "yellow" if rules else "none"
    if not valid:
        parts = [f"Pc not computed, the 2-D method is invalid ({flag or 'invalid geometry'}): "
                 f"level from the miss distance and its probability"]
    elif pc >= red:
        parts = [f"Pc {pc:.3g} >= red threshold {red:g}"]
    elif pc >= yellow:
        parts = [f"Pc {pc:.3g} >= yellow threshold {yellow:g}"]
    else:
        parts = [f"Pc {pc:.3g} below the yellow threshold {yellow:g}"]
    parts.append(f"miss {miss_m:.0f} m under the {dist_m:.0f} m alert distance" if fired[1] else
                 f"miss {miss_m:.0f} m at or above the {dist_m:.0f} m alert distance")
    if p_miss is not None:
        parts.append(f"P(miss < {dist_m:.0f} m) {p_miss:.3g} {'>=' if fired[2] else 'below'} {threshold:g}")
    return level, "; ".join(parts), rules


def alert_level(pc: float | None, miss_m: float, settings, flag: str | None = None,
                p_miss: float | None = None) -> tuple[str, str]:
    """(level, reason) of :func:`judge`."""
    level, reason, _ = judge(pc, miss_m, settings, flag, p_miss)
    return level, reason


# --------------------------------------------------------------------------- inputs

def _by_id(frame, columns: Iterable[str]) -> dict[int, dict]:
    """norad_id -> row dict, from a pandas frame, a list of dicts / Rows, or a mapping."""
    if frame is None:
        return {}
    if isinstance(frame, Mapping):
        return {int(k): dict(v) for k, v in frame.items()}
    if isinstance(frame, pd.DataFrame):
        records = frame.to_dict("records")
    else:
        records = [r.asDict() if hasattr(r, "asDict") else dict(r) for r in frame]
    out = {}
    for rec in records:
        out[int(rec["norad_id"])] = {c: rec.get(c) for c in columns if c in rec}
    return out


def intl_designator(line1: str | None) -> str:
    """CCSDS INTERNATIONAL_DESIGNATOR (YYYY-NNNP{PP}) from TLE line 1 columns 10-17, else UNKNOWN."""
    if not line1 or len(line1) < 17:
        return "UNKNOWN"
    field = line1[9:17].strip()
    if len(field) < 6 or not field[:5].isdigit():
        return "UNKNOWN"
    yy = int(field[:2])
    year = 1900 + yy if yy >= 57 else 2000 + yy
    return f"{year}-{field[2:5]}{field[5:]}"


def _teme_states(events: pd.DataFrame, catalog: dict[int, dict]) -> tuple[np.ndarray, np.ndarray]:
    """(n, 6) TEME states [km, km/s] of primaries and secondaries at TCA: the events' own columns
    (p_x .. s_vz) when present, else SGP4 on the catalogue's newest element set."""
    cols = [f"{o}_{c}" for o in ("p", "s") for c in STATE_COLS]
    if all(c in events.columns for c in cols):
        P = events[[f"p_{c}" for c in STATE_COLS]].to_numpy(float)
        S = events[[f"s_{c}" for c in STATE_COLS]].to_numpy(float)
        return P, S
    from sgp4.api import Satrec

    sats: dict[int, Satrec] = {}

    def state(norad_id: int, t: float) -> np.ndarray:
        if norad_id not in sats:
            info = catalog.get(norad_id) or {}
            if not info.get("line1") or not info.get("line2"):
                raise ValueError(f"object {norad_id}: no state columns in the events and no element set to propagate")
            sats[norad_id] = Satrec.twoline2rv(info["line1"], info["line2"])
        jd, fr = frames.unix_to_jd(t)
        err, r, v = sats[norad_id].sgp4(float(jd), float(fr))
        if err:
            raise ValueError(f"object {norad_id}: SGP4 error {err} at {t}")
        return np.r_[r, v]

    P = np.array([state(int(p), t) for p, t in zip(events["primary_id"], events["tca_unix"])]).reshape(-1, 6)
    S = np.array([state(int(s), t) for s, t in zip(events["secondary_id"], events["tca_unix"])]).reshape(-1, 6)
    return P, S


def _reference(norad_id: int, catalog: dict[int, dict], states: dict[int, dict], min_sigma_m: float
               ) -> uncertainty.Reference:
    info = catalog.get(norad_id)
    if info is None or missing(info.get("epoch")):
        raise ValueError(f"object {norad_id}: not in the catalogue, no uncertainty reference")
    st = states.get(norad_id) or {}
    last, rms = st.get("last_observed"), st.get("residual_rms_m")
    return uncertainty.choose_reference(
        aware(info["epoch"]), float(info["perigee_km"]), float(info["apogee_km"]),
        None if missing(last) else aware(last), None if missing(rms) else float(rms), min_sigma_m)


# --------------------------------------------------------------------------- assessment

def assess(events: pd.DataFrame, states, catalog_info, settings, fused=None, manoeuvred=None,
           noise=None) -> pd.DataFrame:
    """Pc, validity and level of each screened event.

    events: columns primary_id, secondary_id, tca_unix, miss_km, rel_speed_km_s, r_km, t_km, n_km and
    (optional) the TEME states at TCA p_x .. p_vz, s_x .. s_vz [km, km/s] -- when absent, the
    catalogue's element sets (``line1``/``line2``) are propagated to TCA.
    states: the newest gold object_state per object (norad_id, last_observed, residual_rms_m), as a
    pandas frame, rows or ``{norad_id: {...}}``; objects absent are "never observed".
    catalog_info: the newest element set per object (norad_id, epoch, perigee_km, apogee_km, and
    optionally name, line1, line2).

    Returns one row per event with the event's identity and values in SI units (event_id, tca, miss_m,
    rel_speed_ms, r_m, t_m, n_m), the states (p_x_m .. s_vz_ms), the modelled sigmas at TCA
    (p_sigma_r_m .. s_sigma_ndot_ms), p_cov_source / s_cov_source, pc (None when invalid), pc_valid,
    pc_flag, pc_reason, level, reason, hbr_m, names and international designators.
    fused: ``{norad_id: sda.alerts.fused.FusedOrbit}``: events of these objects are refined on their fused
    orbits, whose covariances at TCA they use (p_cov_rtn / s_cov_rtn, 36 values row-major; else None).
    manoeuvred: the objects known to have manoeuvred (p_maneuverable / s_maneuverable true: the CDM's
    MANEUVERABLE = YES).
    noise: the fused predictions' model error (:class:`sda.orbit.estimation.noise.ProcessNoise` with the landed
    space weather; None: quiet).
    """
    from sda.alerts.fused import refinements
    from sda.orbit import screening

    catalog = _by_id(catalog_info, ("epoch", "perigee_km", "apogee_km", "name", "line1", "line2"))
    observed = _by_id(states, ("last_observed", "residual_rms_m", "observations"))
    min_sigma = float(settings.uncertainty_min_sigma_m)
    if events is None or len(events) == 0:
        return pd.DataFrame(columns=list(ASSESSED_COLUMNS))
    events = events.reset_index(drop=True)
    P, S = _teme_states(events, catalog)
    refs: dict[int, uncertainty.Reference] = {}

    def ref(norad_id: int) -> uncertainty.Reference:
        if norad_id not in refs:
            refs[norad_id] = _reference(norad_id, catalog, observed, min_sigma)
        return refs[norad_id]

    flags = events["flag"].tolist() if "flag" in events.columns else [None] * len(events)
    fused = fused or {}
    refined = refinements(events, fused, catalog, noise)
    rows = [_assess_event(ev, flags[i] if screening.is_persistent(flags[i]) else None, P[i] * 1000.0,
                          S[i] * 1000.0, ref, catalog, settings, refined[i], fused)
            for i, ev in enumerate(events.itertuples(index=False))]
    out = pd.DataFrame(rows, columns=list(ASSESSED_COLUMNS))
    manoeuvred = sorted({int(n) for n in manoeuvred or ()})
    out["p_maneuverable"] = out["primary_id"].isin(manoeuvred).astype(bool)
    out["s_maneuverable"] = out["secondary_id"].isin(manoeuvred).astype(bool)
    return out


def _assess_event(ev, flag_i: str | None, p_state: np.ndarray, s_state: np.ndarray,
                  ref: Callable[[int], uncertainty.Reference], catalog: dict[int, dict], settings,
                  refined=None, fused=None) -> dict:
    """One :func:`assess` row: ``ev`` a screening event, ``flag_i`` its persistent-proximity flag (or
    None), ``p_state`` / ``s_state`` the objects' TEME states at TCA [m, m/s]; ``refined`` its
    refinement on fused orbits (:mod:`sda.alerts.fused`), which then gives TCA, states and covariances (the
    orbit determination's, resolved on the state's RTN axes)."""
    from sda.orbit import screening

    pid, sid, t = int(ev.primary_id), int(ev.secondary_id), float(ev.tca_unix)
    event_id = screening.event_key(pid, sid, t, flag_i)  # the screening's identity of the event
    hbr = float(settings.hard_body_radius_m)
    geometry = (float(ev.miss_km) * 1000.0, float(ev.rel_speed_km_s) * 1000.0,
                [float(ev.r_km) * 1000.0, float(ev.t_km) * 1000.0, float(ev.n_km) * 1000.0])
    if refined is not None:
        t, p_state, s_state = refined.tca_unix, refined.p_state * 1000.0, refined.s_state * 1000.0
        geometry = _geometry(p_state, s_state)
    r1, v1 = p_state[:3], p_state[3:]
    r2, v2 = s_state[:3], s_state[3:]
    covs, sigmas, sources, dcps = _covariances((pid, sid), (p_state, s_state), t, ref, refined, fused)
    res = pc2d_pair(r1, v1, covs[0], r2, v2, covs[1], hbr, dcps[0], dcps[1])
    pc = float(res.pc) if res.valid and math.isfinite(res.pc) else None
    flag = pc_flag(res)
    miss_m = geometry[0]
    dist_m = float(settings.alert_distance_km) * 1000.0
    p_miss = miss_probability(r1, v1, covs[0], r2, v2, covs[1], dist_m, dcps[0], dcps[1])
    level, reason, rules = judge(pc, miss_m, settings, flag, p_miss)
    if flag_i:  # no closest approach in the window: say so, the miss is the smallest distance in it
        reason = f"{flag_i} (smallest distance {miss_m:.0f} m); {reason}"
    p_info, s_info = catalog.get(pid, {}), catalog.get(sid, {})
    return {
        "event_id": event_id, "primary_id": pid, "secondary_id": sid,
        "tca": aware(t), "tca_unix": t, "miss_m": miss_m, "rel_speed_ms": geometry[1],
        "r_m": geometry[2][0], "t_m": geometry[2][1], "n_m": geometry[2][2],
        **dict(zip(STATE_FIELDS, [float(x) for x in np.r_[r1, v1, r2, v2]])),
        **dict(zip(SIGMA_FIELDS, [float(x) for x in np.r_[sigmas[0], sigmas[1]]])),
        "p_cov_source": sources[0], "s_cov_source": sources[1],
        "p_cov_rtn": _full(covs[0], sources[0]), "s_cov_rtn": _full(covs[1], sources[1]),
        **_dcp_fields(dcps),
        "pc": pc, "pc_valid": bool(res.valid), "pc_flag": flag, "pc_reason": res.reason, "miss_probability": p_miss,
        "level": level, "alert_rule": ",".join(rules) or None, "reason": reason, "hbr_m": hbr,
        "primary_name": p_info.get("name"), "secondary_name": s_info.get("name"),
        "primary_intldes": intl_designator(p_info.get("line1")),
        "secondary_intldes": intl_designator(s_info.get("line1")),
        "flag": flag_i,
    }


def _covariances(ids, states, t: float, ref, refined, fused):
    """Per object (primary, secondary): its RTN covariance at TCA, 1-sigmas, source and density terms
    (:class:`sda.orbit.pair_covariance.Dcp` on its own R/T/N axes; None without a fused orbit)."""
    covs, sigmas, sources, dcps = [], [], [], []
    for n, state, which in zip(ids, states, ("p", "s")):
        cov_teme = None if refined is None else getattr(refined, f"{which}_cov")
        dcp = None if refined is None else getattr(refined, f"{which}_dcp")
        if cov_teme is not None:
            from sda.orbit.estimation.measurements import rtn_covariance

            cov = rtn_covariance(state[None, :3], state[None, 3:], np.asarray(cov_teme, float)[None])[0]
            cov = 0.5 * (cov + cov.T)
            sigmas.append(np.sqrt(np.clip(np.diag(cov), 0.0, None)))
            sources.append(fused[n].label)
        else:
            ref_n = ref(n)
            sigmas.append(uncertainty.sigmas6(ref_n, t, state[:3]))
            cov = np.diag(sigmas[-1] ** 2)
            sources.append(ref_n.label)
        covs.append(cov)
        dcps.append(None if dcp is None or cov_teme is None else _dcp_rtn(dcp, state))
    return covs, sigmas, sources, dcps


def _dcp_rtn(dcp, state: np.ndarray) -> Dcp:
    """A refinement's (sigma, TEME sensitivity [m, m/s]) on the R/T/N axes of ``state`` (TEME, m, m/s)."""
    sigma, g = float(dcp[0]), np.asarray(dcp[1], float)
    axes = rtn_basis(state[:3], state[3:])
    return Dcp(sigma, np.r_[axes.T @ g[:3], axes.T @ g[3:]])


def _dcp_fields(dcps) -> dict:
    out = {}
    for o, dcp in zip(("p", "s"), dcps):
        out[f"{o}_dcp_sigma"] = None if dcp is None else float(dcp.sigma)
        out[f"{o}_dcp_rtn"] = None if dcp is None else [float(x) for x in dcp.rtn]
    return out


def _full(cov: np.ndarray, source: str) -> list[float] | None:
    """A fused object's 6x6 RTN covariance as stored (row-major); None for a modelled (diagonal) one."""
    return [float(x) for x in np.asarray(cov).ravel()] if source.startswith("fused/") else None


def _geometry(p_state: np.ndarray, s_state: np.ndarray) -> tuple[float, float, list[float]]:
    """(miss m, relative speed m/s, secondary - primary in the primary's RTN frame [m]) of two TEME states."""
    dr, dv = s_state[:3] - p_state[:3], s_state[3:] - p_state[3:]
    rtn = rtn_basis(p_state[:3], p_state[3:]).T @ dr
    return float(np.linalg.norm(dr)), float(np.linalg.norm(dv)), [float(x) for x in rtn]


def dedup_events(events: pd.DataFrame) -> pd.DataFrame:
    """One event per event_id (the closest if two approaches of a pair share a TCA minute), as
    ``conjunction_frame`` in jobs/conjunction.py did."""
    from sda.orbit import screening

    if events is None or len(events) == 0:
        return events
    ordered = events.sort_values(["miss_km", "primary_id", "secondary_id", "tca_unix"], kind="stable")
    flags = ordered["flag"] if "flag" in ordered.columns else [None] * len(ordered)
    ids = [screening.event_key(p, s, t, f) for p, s, t, f in zip(ordered["primary_id"], ordered["secondary_id"],
                                                                  ordered["tca_unix"], flags)]
    keep = ~pd.Series(ids, index=ordered.index).duplicated()
    out = ordered[keep.to_numpy()]
    return out.sort_values(["tca_unix", "primary_id", "secondary_id"], kind="stable").reset_index(drop=True)
