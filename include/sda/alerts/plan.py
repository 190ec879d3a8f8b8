"""Conjunction assessment (Pc, level), the alert lifecycle, and CCSDS CDM emission.

``jobs/conjunction.py`` screens the catalogue and hands its close approaches to :func:`publish`,
which does everything after the screening:

1. **Assess** every event (:func:`assess`): each object's position covariance at TCA from the
   uncertainty model (:mod:`sda.orbit.uncertainty`: the newest gold ``object_state`` residuals when the
   object was observed since its element-set epoch, else literature TLE accuracy for its orbit regime,
   grown with the time from that reference to TCA); the 2-D Pc of Foster's method in the encounter
   plane (:func:`sda.orbit.pc.pc2d_foster`, combined covariance, ``settings.hard_body_radius_m``); CARA's
   validity test -- an encounter for which the 2-D method is invalid (low relative velocity: a long
   encounter; or an encounter offset from TCA) gets **no** Pc (null) and a ``pc_flag`` saying why.
2. **Level** (:func:`alert_level`): red if Pc >= ``settings.pc_red``; yellow if Pc >=
   ``settings.pc_yellow`` or miss < ``settings.alert_distance_km``; else none. An event without a
   valid Pc is judged on the miss distance alone, and its reason says so.
3. ``gold.conjunctions``: every event, with pc / pc_valid / pc_flag / level (MERGE on event_id).
4. **Lifecycle** (:func:`plan_alerts`). ``gold.alerts`` holds the current state of each alert,
   ``gold.alert_events`` one row per emitted change (its history). An alert is identified by its pair
   and TCA: an event matches an alert of the same (primary, secondary) whose TCA is within
   ``alert_tca_tolerance_s`` (default :data:`TCA_TOLERANCE_S` = 120 s: a new element set moves a TCA
   by seconds, while two approaches of one pair are at least a large fraction of an orbit apart);
   each event matches at most one alert and vice versa, nearest TCA first. Then:

   * an alert-level event matching no alert -> a **new** alert, version 1, alert_id = the event's
     event_id (sha256 of the pair and the TCA minute);
   * a matched open alert whose emitted content changed -> **updated**, version + 1. The content is
     level, pc_valid / pc_flag, Pc to 3 significant digits, miss to 1 m, relative speed to 0.1 m/s,
     RTN position to 1 m, TCA to 1 s (``content_hash``); it has changed when that hash differs *and*
     some value moved by at least its rounding step (or level / validity changed), so a value
     hovering at a rounding boundary does not flap. Unchanged -> nothing emitted, nothing rewritten;
   * a matched open alert whose event fell below both thresholds -> **closed** ("risk dropped below
     thresholds", level none, the new values);
   * an open alert whose TCA is before the run's screening start -> **closed** ("TCA passed", values
     and level of its last version);
   * an open alert not found again although this screening covered its TCA (TCA in
     ``[screen_start + tolerance, screen_end - tolerance)``: the margin keeps a TCA that moved across a
     window edge from counting as lost) -> **closed** ("no longer found by screening": the miss grew
     beyond the screening threshold or the TCA moved by more than the tolerance; level none, values of
     its last version). Open alerts outside that range are left as they are;
   * a closed alert whose TCA is still ahead (closed for risk dropped / not found) that an alert-level
     event matches again is reopened: **updated**, version + 1 (its reason starts with "reopened").
   * the open events an incremental screening kept without re-assessing them (``kept``) keep their
     alerts as they are: still found, nothing emitted;
   * a persistent proximity (``flag`` "persistent: ...", event_id of the pair alone) is one alert per
     pair: matched whatever its time, changed only by its level or Pc, closed ("no longer found by
     screening") when the screening no longer finds the pair persistent.

   Every change increments ``version`` and is emitted exactly once.
5. **Emission**: each change writes ``CDM-<alert_id>-v<version>.cdm`` (CCSDS 508.0-B-1 KVN, see
   :func:`build_cdm`) and its JSON twin ``CDM-<alert_id>-v<version>.json`` (the alert_events row)
   into ``settings.outbox``, each atomically (temp file, fsync, ``os.replace``) and only when absent.

Crash safety (the order of writes): conjunctions -> outbox files (JSON, then CDM) -> ``alert_events``
(insert-if-absent on (alert_id, version)) -> ``alerts`` (upsert). The file names are deterministic
per (alert_id, version) and the CDM's MESSAGE_ID and CREATION_DATE (the emitting run's screening
start) are too, so a retry after a crash between the files and the MERGEs plans the same versions
and finds their files already there: nothing is written twice, nothing lost. Should the inputs have
changed in between, the outbox holds a version the table does not know: before planning, each alert's
next version is looked up in the outbox (:func:`plan_alerts` ``emitted``) and, if present, *adopted*
-- recorded as emitted, from its JSON twin (a missing CDM is rewritten from it) -- and the new plan
starts after it. A rerun of a finished run (same or new run id, unchanged results) finds every
alert's content unchanged: the ``alerts`` table's version and content hash are the guard.

CDM conventions (:func:`sda.alerts.outbox.build_cdm`; the writing and reading of outbox files lives in
:mod:`sda.alerts.outbox`): REF_FRAME = ITRF (TEME, SGP4's frame, is not a CDM frame):
states at TCA rotated with :func:`sda.orbit.frames.teme_to_ecef` (PEF at UT1 = UTC, polar motion neglected;
the same rotation for both objects, so the relative geometry is exact). The covariance is the
uncertainty model's, diagonal in each object's RTN frame built from its *inertial* (TEME) state
(COVARIANCE_METHOD = DEFAULT: a model, not an orbit-determination covariance); MISS_DISTANCE,
RELATIVE_SPEED and RELATIVE_POSITION/VELOCITY_R/T/N are the inertial values (secondary relative to
primary, primary's RTN frame). COLLISION_PROBABILITY with COLLISION_PROBABILITY_METHOD = FOSTER-1992
only when the 2-D method is valid; otherwise a COMMENT says why it is absent. The hard-body radius
is a CARA-style ``COMMENT HBR = 20.0 [m]``.

Settings: ``alert_tca_tolerance_s`` (120), ``cdm_originator`` ("SDA-FUSION"),
``uncertainty_min_sigma_m`` (10), besides the thresholds and the hard-body radius.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sda.alerts.outbox import (  # noqa: F401  (the outbox's writers and readers, re-exported for callers of this module)
    _TIME_FIELDS,
    ALERT_FIELDS,
    ORIGINATOR,
    UTC,
    _aware,
    _iso,
    _missing,
    build_cdm,
    cdm_text,
    emit,
    file_names,
    json_text,
    outbox_lookup,
    row_from_json,
    teme_states_from_cdm,
    write_if_absent,
)
from sda.lake import schemas
from sda.orbit import frames, uncertainty
from sda.orbit.pc import Pc2DResult, pc2d_foster, rtn_to_inertial

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings

__all__ = [
    "TCA_TOLERANCE_S",
    "ORIGINATOR",
    "LEVELS",
    "STATUSES",
    "CLOSE_TCA_PASSED",
    "CLOSE_RISK_DROPPED",
    "CLOSE_NOT_FOUND",
    "alert_level",
    "pc_flag",
    "foster_pc",
    "assess",
    "content_hash",
    "content_changed",
    "Plan",
    "plan_alerts",
    "file_names",
    "build_cdm",
    "cdm_text",
    "json_text",
    "row_from_json",
    "teme_states_from_cdm",
    "write_if_absent",
    "emit",
    "publish",
]

TCA_TOLERANCE_S = 120.0
LEVELS = ("red", "yellow", "none")
STATUSES = ("new", "updated", "closed")
CLOSE_TCA_PASSED = "TCA passed"
CLOSE_RISK_DROPPED = "risk dropped below thresholds"
CLOSE_NOT_FOUND = "no longer found by screening"
#: alerts older than this (TCA before screen start minus it) cannot match anything: not read
_LOOKBACK = dt.timedelta(days=1)
STATE_COLS = ("x", "y", "z", "vx", "vy", "vz")
_STATE_FIELDS = tuple(f"{o}_{c}" for o in ("p", "s") for c in ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms"))
_SIGMA_FIELDS = tuple(f"{o}_sigma_{c}" for o in ("p", "s")
                      for c in ("r_m", "t_m", "n_m", "rdot_ms", "tdot_ms", "ndot_ms"))
EVENT_FIELDS = tuple(schemas.ALERT_EVENTS.fieldNames())


def _setting(settings, name: str, default):
    return getattr(settings, name, default)


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


def alert_level(pc: float | None, miss_m: float, settings, flag: str | None = None) -> tuple[str, str]:
    """(level, reason): red if pc >= pc_red; yellow if pc >= pc_yellow or miss < alert distance; else
    none. ``pc`` None (or NaN): the 2-D method is invalid, the miss distance alone decides."""
    red, yellow = float(settings.pc_red), float(settings.pc_yellow)
    dist_m = float(settings.alert_distance_km) * 1000.0
    under = f"miss {miss_m:.0f} m under the {dist_m:.0f} m alert distance"
    over = f"miss {miss_m:.0f} m at or above the {dist_m:.0f} m alert distance"
    if pc is not None and math.isfinite(pc):
        if pc >= red:
            return "red", f"Pc {pc:.3g} >= red threshold {red:g}"
        if pc >= yellow:
            return "yellow", f"Pc {pc:.3g} >= yellow threshold {yellow:g}"
        if miss_m < dist_m:
            return "yellow", f"{under} (Pc {pc:.3g} below the yellow threshold {yellow:g})"
        return "none", f"Pc {pc:.3g} below the yellow threshold {yellow:g} and {over}"
    pre = f"Pc not computed, the 2-D method is invalid ({flag or 'invalid geometry'}): level from the miss distance, "
    if miss_m < dist_m:
        return "yellow", pre + under
    return "none", pre + over


def foster_pc(r1_m, v1_ms, cov1_rtn, r2_m, v2_ms, cov2_rtn, hbr_m: float) -> Pc2DResult:
    """Foster 2-D Pc (with CARA's validity test) from inertial states [m, m/s] and each object's
    RTN covariance (3x3 or 6x6, m-units), rotated to inertial with that object's own state."""
    C1 = rtn_to_inertial(cov1_rtn, r1_m, v1_ms)
    C2 = rtn_to_inertial(cov2_rtn, r2_m, v2_ms)
    return pc2d_foster(r1_m, v1_ms, C1, r2_m, v2_ms, C2, hbr_m, check_validity=True)


# --------------------------------------------------------------------------- assessment

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
    if info is None or _missing(info.get("epoch")):
        raise ValueError(f"object {norad_id}: not in the catalogue, no uncertainty reference")
    st = states.get(norad_id) or {}
    last, rms = st.get("last_observed"), st.get("residual_rms_m")
    return uncertainty.choose_reference(
        _aware(info["epoch"]), float(info["perigee_km"]), float(info["apogee_km"]),
        None if _missing(last) else _aware(last), None if _missing(rms) else float(rms), min_sigma_m)


def assess(events: pd.DataFrame, states, catalog_info, settings) -> pd.DataFrame:
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
    """
    from sda.orbit import screening

    catalog = _by_id(catalog_info, ("epoch", "perigee_km", "apogee_km", "name", "line1", "line2"))
    observed = _by_id(states, ("last_observed", "residual_rms_m", "observations"))
    hbr = float(settings.hard_body_radius_m)
    min_sigma = float(_setting(settings, "uncertainty_min_sigma_m", uncertainty.MIN_SIGMA_M))
    columns = ["event_id", "primary_id", "secondary_id", "tca", "tca_unix", "miss_m", "rel_speed_ms", "r_m",
               "t_m", "n_m", *_STATE_FIELDS, *_SIGMA_FIELDS, "p_cov_source", "s_cov_source", "pc", "pc_valid",
               "pc_flag", "pc_reason", "level", "reason", "hbr_m", "primary_name", "secondary_name",
               "primary_intldes", "secondary_intldes", "flag"]
    if events is None or len(events) == 0:
        return pd.DataFrame(columns=columns)
    events = events.reset_index(drop=True)
    P, S = _teme_states(events, catalog)
    refs: dict[int, uncertainty.Reference] = {}

    def ref(norad_id: int) -> uncertainty.Reference:
        if norad_id not in refs:
            refs[norad_id] = _reference(norad_id, catalog, observed, min_sigma)
        return refs[norad_id]

    rows = []
    flags = events["flag"].tolist() if "flag" in events.columns else [None] * len(events)
    for i, ev in enumerate(events.itertuples(index=False)):
        pid, sid, t = int(ev.primary_id), int(ev.secondary_id), float(ev.tca_unix)
        flag_i = flags[i] if screening.is_persistent(flags[i]) else None
        r1, v1 = P[i, :3] * 1000.0, P[i, 3:] * 1000.0
        r2, v2 = S[i, :3] * 1000.0, S[i, 3:] * 1000.0
        ref1, ref2 = ref(pid), ref(sid)
        sig1, sig2 = uncertainty.sigmas6(ref1, t, r1), uncertainty.sigmas6(ref2, t, r2)
        res = foster_pc(r1, v1, np.diag(sig1 ** 2), r2, v2, np.diag(sig2 ** 2), hbr)
        pc = float(res.pc) if res.valid and math.isfinite(res.pc) else None
        flag = pc_flag(res)
        miss_m = float(ev.miss_km) * 1000.0
        level, reason = alert_level(pc, miss_m, settings, flag)
        if flag_i:  # no closest approach in the window: say so, the miss is the smallest distance in it
            reason = f"{flag_i} (smallest distance {miss_m:.0f} m); {reason}"
        p_info, s_info = catalog.get(pid, {}), catalog.get(sid, {})
        row = {
            "event_id": screening.event_key(pid, sid, t, flag_i), "primary_id": pid, "secondary_id": sid,
            "tca": _aware(t), "tca_unix": t, "miss_m": miss_m, "rel_speed_ms": float(ev.rel_speed_km_s) * 1000.0,
            "r_m": float(ev.r_km) * 1000.0, "t_m": float(ev.t_km) * 1000.0, "n_m": float(ev.n_km) * 1000.0,
            **dict(zip(_STATE_FIELDS, [float(x) for x in np.r_[r1, v1, r2, v2]])),
            **dict(zip(_SIGMA_FIELDS, [float(x) for x in np.r_[sig1, sig2]])),
            "p_cov_source": ref1.label, "s_cov_source": ref2.label,
            "pc": pc, "pc_valid": bool(res.valid), "pc_flag": flag, "pc_reason": res.reason,
            "level": level, "reason": reason, "hbr_m": hbr,
            "primary_name": p_info.get("name"), "secondary_name": s_info.get("name"),
            "primary_intldes": intl_designator(p_info.get("line1")),
            "secondary_intldes": intl_designator(s_info.get("line1")),
            "flag": flag_i,
        }
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


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


# --------------------------------------------------------------------------- content and change

def _rounded(row: Mapping) -> dict:
    pc = row.get("pc")
    pc = None if _missing(pc) else float(f"{float(pc):.3g}")
    return {
        "tca_s": int(round(_aware(row["tca"]).timestamp())),
        "miss_m": int(round(float(row["miss_m"]))),
        "rel_speed_ms": round(float(row["rel_speed_ms"]), 1),
        "rtn_m": [int(round(float(row[k]))) for k in ("r_m", "t_m", "n_m")],
        "pc": pc,
        "pc_valid": bool(row["pc_valid"]),
        "pc_flag": row.get("pc_flag"),
        "level": row["level"],
    }


def content_hash(row: Mapping) -> str:
    """sha256 of the emitted content, rounded: level, pc validity/flag, Pc to 3 significant digits, miss
    to 1 m, relative speed to 0.1 m/s, RTN to 1 m, TCA to 1 s."""
    text = json.dumps(_rounded(row), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def content_changed(old: Mapping, new: Mapping) -> bool:
    """Whether ``new`` must be emitted as an update of ``old``: the rounded content differs and either
    level / Pc validity changed or some value moved by at least its rounding step."""
    if content_hash(old) == content_hash(new):
        return False
    if (old["level"], bool(old["pc_valid"]), old.get("pc_flag")) != (new["level"], bool(new["pc_valid"]), new.get("pc_flag")):
        return True
    if abs(_aware(old["tca"]).timestamp() - _aware(new["tca"]).timestamp()) >= 1.0:
        return True
    if abs(float(old["miss_m"]) - float(new["miss_m"])) >= 1.0:
        return True
    if abs(float(old["rel_speed_ms"]) - float(new["rel_speed_ms"])) >= 0.1:
        return True
    if any(abs(float(old[k]) - float(new[k])) >= 1.0 for k in ("r_m", "t_m", "n_m")):
        return True
    a, b = old.get("pc"), new.get("pc")
    if _missing(a) != _missing(b):
        return True
    if not _missing(a) and abs(float(a) - float(b)) >= 1e-3 * max(abs(float(a)), abs(float(b))):
        return True
    return False


# --------------------------------------------------------------------------- lifecycle

_VALUE_FIELDS = ("event_id", "primary_id", "secondary_id", "primary_name", "secondary_name", "primary_intldes",
                 "secondary_intldes", "screen_start", "tca", "miss_m", "rel_speed_ms", "r_m", "t_m", "n_m", "pc",
                 "pc_valid", "pc_flag", "hbr_m", *_STATE_FIELDS, *_SIGMA_FIELDS, "p_cov_source", "s_cov_source")


@dataclasses.dataclass
class Plan:
    """What a run does to the alerts: ``changes`` to emit (full ALERT rows, new versions, in order),
    ``adopted`` versions found in the outbox but not in the table (recorded, not re-emitted),
    ``unchanged`` matched alerts with nothing to emit."""

    changes: list[dict]
    adopted: list[dict]
    unchanged: int = 0

    def count(self, status: str) -> int:
        return sum(1 for c in self.changes if c["status"] == status)


def _values(event: Mapping, screen_start) -> dict:
    out = {k: event.get(k) for k in _VALUE_FIELDS if k != "screen_start"}
    out["screen_start"] = _aware(screen_start)
    out["tca"] = _aware(event["tca"])
    if _missing(out.get("pc")):
        out["pc"] = None
    return out


def _flagged(event: Mapping) -> bool:
    from sda.orbit import screening

    return screening.is_persistent(event.get("flag"))


def _persistent_alert(a: Mapping) -> bool:
    from sda.orbit import screening

    return a.get("event_id") == screening.persistent_event_id(a["primary_id"], a["secondary_id"])


def _persistent_changed(old: Mapping, new: Mapping) -> bool:
    """A persistent proximity is updated, not re-emitted, as its smallest distance and its time move
    from run to run: only a new level, Pc validity or Pc (3 significant digits) is a change."""
    if (old["level"], bool(old["pc_valid"]), old.get("pc_flag")) != (new["level"], bool(new["pc_valid"]), new.get("pc_flag")):
        return True
    a, b = old.get("pc"), new.get("pc")
    if _missing(a) != _missing(b):
        return True
    return not _missing(a) and abs(float(a) - float(b)) >= 1e-3 * max(abs(float(a)), abs(float(b)))


def plan_alerts(assessed: pd.DataFrame, current: Iterable[Mapping], screen_start, screen_end, run_id: str,
                settings, emitted: Callable[[str, int], Mapping | None] | None = None,
                kept: pd.DataFrame | None = None) -> Plan:
    """The alert changes of a run (pure: no I/O but ``emitted``).

    assessed: :func:`assess` rows (one per event_id); current: the ``alerts`` rows that may be affected
    (open ones, and closed ones whose TCA is not long past); screen_start / screen_end: the interval this
    screening covered; emitted(alert_id, version): the JSON-twin row of an emitted version found in the
    outbox, or None (crash recovery, see the module docstring). kept: open events of the screening
    that were not re-assessed this run (an incremental screening kept them as they were: primary_id,
    secondary_id, tca_unix): their alerts are still found, nothing changes for them.

    A persistent proximity (event_id :func:`sda.orbit.screening.persistent_event_id`) is one alert per pair:
    it matches its alert whatever its time, changes only with its level or Pc
    (:func:`_persistent_changed`), and closes when a screening no longer finds the pair persistent
    (persistent pairs are worked out over the whole horizon by every screening).
    """
    tol = float(_setting(settings, "alert_tca_tolerance_s", TCA_TOLERANCE_S))
    start_s, end_s = _aware(screen_start).timestamp(), _aware(screen_end).timestamp()
    emitted = emitted or (lambda alert_id, version: None)
    adopted: list[dict] = []

    def catch_up(alert_id: str, row: dict | None) -> dict | None:
        version = int(row["version"]) if row else 0
        while True:
            found = emitted(alert_id, version + 1)
            if found is None:
                return row
            found = {k: found.get(k) for k in ALERT_FIELDS}
            found["first_run_id"] = (row or {}).get("first_run_id") or found.get("first_run_id") or found["run_id"]
            adopted.append(found)
            row, version = found, version + 1

    alerts: dict[str, dict] = {}
    for a in current:
        a = {k: a.get(k) for k in ALERT_FIELDS}
        alerts[a["alert_id"]] = catch_up(a["alert_id"], a)

    def matchable(a: dict) -> bool:
        if a["status"] != "closed" or _persistent_alert(a):
            return True
        return a.get("close_reason") != CLOSE_TCA_PASSED and _aware(a["tca"]).timestamp() >= start_s - tol

    events = [] if assessed is None or len(assessed) == 0 else assessed.to_dict("records")
    pairs: dict[tuple[int, int], tuple[list[int], list[str]]] = {}
    for i, e in enumerate(events):
        pairs.setdefault((int(e["primary_id"]), int(e["secondary_id"])), ([], []))[0].append(i)
    for aid, a in alerts.items():
        key = (int(a["primary_id"]), int(a["secondary_id"]))
        if key in pairs and matchable(a):
            pairs[key][1].append(aid)
    matched: dict[int, str] = {}
    for ev_idx, alert_ids in pairs.values():
        options = sorted(
            (0.0 if _persistent_alert(alerts[aid]) else
             abs(float(events[i]["tca_unix"]) - _aware(alerts[aid]["tca"]).timestamp()), i, aid)
            for i in ev_idx for aid in alert_ids
            if _persistent_alert(alerts[aid]) == _flagged(events[i]))
        used_alerts: set[str] = set()
        for gap, i, aid in options:
            if gap <= tol and i not in matched and aid not in used_alerts:
                matched[i] = aid
                used_alerts.add(aid)

    changes: list[dict] = []
    unchanged = 0
    cdm_created = _aware(screen_start)

    def change(base: dict | None, alert_id: str, status: str, level: str, reason: str, close_reason: str | None,
               values: Mapping) -> dict:
        version = (int(base["version"]) if base else 0) + 1
        row = {**(base or {}), **values, "alert_id": alert_id, "version": version, "status": status,
               "level": level, "reason": reason, "close_reason": close_reason}
        row["content_hash"] = content_hash(row)
        row["cdm_file"], row["json_file"] = file_names(alert_id, version)
        row["cdm_created"] = cdm_created
        row["run_id"] = run_id
        row["first_run_id"] = (base or {}).get("first_run_id") or run_id
        row = {k: row.get(k) for k in ALERT_FIELDS}
        changes.append(row)
        alerts[alert_id] = row
        return row

    touched: set[str] = set()
    for i, e in enumerate(events):
        values = _values(e, screen_start)
        level, reason = e["level"], e["reason"]
        aid = matched.get(i)
        if aid is None:
            if level == "none":
                continue
            aid = e["event_id"]
            if aid in alerts:  # the id of an unrelated old alert (TCA long past, same minute): disambiguate
                aid = hashlib.sha256(f"{aid}|{run_id}|{e['tca_unix']!r}".encode()).hexdigest()
            base = catch_up(aid, None)  # a version emitted by a crashed attempt and never recorded
            if base is None:
                change(None, aid, "new", level, reason, None, values)
                touched.add(aid)
                continue
            alerts[aid] = base
        a = alerts[aid]
        touched.add(aid)
        candidate = {**a, **values, "level": level}
        if a["status"] == "closed":
            if level != "none":
                change(a, aid, "updated", level, f"reopened: {reason}", None, values)
            continue
        if level == "none":
            change(a, aid, "closed", "none", reason, CLOSE_RISK_DROPPED, values)
        elif (_persistent_changed if _flagged(e) else content_changed)(a, candidate):
            change(a, aid, "updated", level, reason, None, values)
        else:
            unchanged += 1

    # alerts of events kept as screened before (not re-assessed): still found, nothing to emit
    open_by_pair: dict[tuple[int, int], list[str]] = {}
    for aid, a in alerts.items():
        if aid not in touched and a is not None and a["status"] != "closed" and not _persistent_alert(a):
            open_by_pair.setdefault((int(a["primary_id"]), int(a["secondary_id"])), []).append(aid)
    for p, s_id, t in ([] if kept is None or not len(kept) or not open_by_pair else
                       zip(kept["primary_id"], kept["secondary_id"], kept["tca_unix"])):
        for aid in open_by_pair.get((int(p), int(s_id)), ()):
            if aid not in touched and abs(_aware(alerts[aid]["tca"]).timestamp() - float(t)) <= tol:
                touched.add(aid)
                unchanged += 1
                break

    for aid, a in list(alerts.items()):
        if aid in touched or a is None or a["status"] == "closed":
            continue
        tca_s = _aware(a["tca"]).timestamp()
        kept = {k: a[k] for k in _VALUE_FIELDS}
        if _persistent_alert(a):
            change(a, aid, "closed", "none",
                   f"no longer a persistent proximity in the screening of [{_iso(screen_start)}, {_iso(screen_end)}); "
                   f"last level {a['level']}", CLOSE_NOT_FOUND, kept)
        elif tca_s < start_s:
            change(a, aid, "closed", a["level"],
                   f"TCA {_iso(a['tca'])} passed (before the screening start {_iso(screen_start)}); "
                   f"last level {a['level']}", CLOSE_TCA_PASSED, kept)
        elif start_s + tol <= tca_s < end_s - tol:
            change(a, aid, "closed", "none",
                   f"not found by the screening of [{_iso(screen_start)}, {_iso(screen_end)}): the miss grew beyond "
                   f"the screening threshold or the TCA moved by more than {tol:g} s; last level {a['level']}",
                   CLOSE_NOT_FOUND, kept)
    return Plan(changes, adopted, unchanged)


# --------------------------------------------------------------------------- the job's entry point

def _conjunction_rows(assessed: pd.DataFrame, screen_start, run_id: str) -> list[tuple]:
    fields = schemas.CONJUNCTION.fieldNames()
    return [_spark_row({**e, "screen_start": screen_start, "run_id": run_id}, fields)
            for e in assessed.to_dict("records")]


def _spark_row(row: Mapping, fields: Iterable[str]) -> tuple:
    out = []
    for f in fields:
        v = row.get(f)
        if f in _TIME_FIELDS and v is not None:
            v = _aware(v)
        elif isinstance(v, (np.floating, np.integer, np.bool_)):
            v = v.item()
        if f == "version":
            v = int(v)
        if f == "pc" and _missing(v):
            v = None
        out.append(v)
    return tuple(out)


def _read_inputs(spark: "SparkSession", settings: "Settings", ids: set[int], screen_start: dt.datetime):
    from pyspark.sql import functions as F

    from sda.lake.tables import TABLES

    id_list = sorted(ids)
    catalog = []
    states = []
    if id_list:
        # the newest element set per object (as the screening uses): a few epochs per object, picked here
        newest: dict[int, Any] = {}
        for r in (TABLES["catalog"].read(spark, settings).where(F.col("norad_id").isin(id_list))
                  .select("norad_id", "epoch", "perigee_km", "apogee_km", "name", "line1", "line2").collect()):
            if r["norad_id"] not in newest or r["epoch"] > newest[r["norad_id"]]["epoch"]:
                newest[r["norad_id"]] = r
        catalog = list(newest.values())
        state = F.max_by(F.struct("last_observed", "residual_rms_m", "observations"), "last_observed")
        states = (TABLES["object_state"].read(spark, settings).where(F.col("norad_id").isin(id_list))
                  .groupBy("norad_id").agg(state.alias("s"))
                  .select("norad_id", "s.last_observed", "s.residual_rms_m", "s.observations")
                  .collect())
    since = (screen_start - _LOOKBACK).astimezone(UTC).replace(tzinfo=None)
    current = (TABLES["alerts"].read(spark, settings)
               .where((F.col("status") != "closed") | (F.col("tca") >= F.lit(since)))
               .collect())
    return catalog, states, [r.asDict() for r in current]


def publish(spark: "SparkSession", settings: "Settings", events: pd.DataFrame, screen_start: dt.datetime,
            run_id: str, *, screen_end: dt.datetime | None = None, lifecycle: bool = True,
            kept: pd.DataFrame | None = None) -> dict[str, Any]:
    """Everything after the screening: assess, write ``conjunctions``, run the alert lifecycle, emit the
    outbox files, write ``alert_events`` and ``alerts``. Idempotent and crash-safe (module docstring).

    events: the screening's approaches (:func:`assess` columns; more are ignored), possibly several per
    event_id (the closest is kept). screen_start / screen_end: the screened interval (default end:
    ``screen_start + settings.screening_horizon_h``). ``lifecycle=False`` (a replay) stops after the
    ``conjunctions`` upsert: no alert changes, no outbox files. Returns the run's figures: events, alerts_new,
    alerts_updated, alerts_closed, alerts_unchanged, alerts_recovered (versions found in the outbox
    from an interrupted attempt), emitted_files, red, yellow, pc_invalid (among this run's events).
    kept: the open events an incremental screening kept without re-assessing them (their alerts are
    still found, :func:`plan_alerts`).
    """
    from sda.pipeline import runtime

    screen_start = _aware(screen_start)
    screen_end = _aware(screen_end) if screen_end is not None else (
        screen_start + dt.timedelta(hours=float(settings.screening_horizon_h)))
    events = dedup_events(events)
    n_events = 0 if events is None else len(events)
    ids: set[int] = set()
    if n_events:
        ids = {int(x) for x in events["primary_id"]} | {int(x) for x in events["secondary_id"]}
    catalog, states, current = _read_inputs(spark, settings, ids, screen_start)
    assessed = assess(events, states, catalog, settings)

    if len(assessed):
        conj = spark.createDataFrame(_conjunction_rows(assessed, screen_start, run_id), schemas.CONJUNCTION)
        runtime.upsert(spark, conj, "conjunctions", settings)
    levels = assessed["level"].tolist() if len(assessed) else []
    if not lifecycle:  # a replay: the screening record only (jobs/conjunction.py replay)
        return {"events": len(assessed), "red": levels.count("red"), "yellow": levels.count("yellow")}

    outbox = Path(settings.outbox)
    originator = str(_setting(settings, "cdm_originator", ORIGINATOR))
    plan = plan_alerts(assessed, current, screen_start, screen_end, run_id, settings, outbox_lookup(outbox), kept=kept)
    written = 0
    for row in plan.adopted + plan.changes:  # adopted: rewrite a CDM whose JSON twin made it, but not itself
        written += emit(row, outbox, originator)
    runtime.checkpoint("conjunction:after-outbox")
    history = plan.adopted + plan.changes
    if history:
        rows = [_spark_row(r, EVENT_FIELDS) for r in history]
        runtime.merge_new(spark, spark.createDataFrame(rows, schemas.ALERT_EVENTS), "alert_events", settings)
        runtime.checkpoint("conjunction:after-alert-events")
        latest: dict[str, dict] = {}
        for r in history:
            if r["alert_id"] not in latest or r["version"] > latest[r["alert_id"]]["version"]:
                latest[r["alert_id"]] = r
        rows = [_spark_row(r, ALERT_FIELDS) for r in latest.values()]
        runtime.upsert(spark, spark.createDataFrame(rows, schemas.ALERT), "alerts", settings)

    return {
        "events": len(assessed),
        "alerts_new": plan.count("new"),
        "alerts_updated": plan.count("updated"),
        "alerts_closed": plan.count("closed"),
        "alerts_unchanged": plan.unchanged,
        "alerts_recovered": len(plan.adopted),
        "emitted_files": written,
        "red": levels.count("red"),
        "yellow": levels.count("yellow"),
        "pc_invalid": int((~assessed["pc_valid"].astype(bool)).sum()) if len(assessed) else 0,
    }
