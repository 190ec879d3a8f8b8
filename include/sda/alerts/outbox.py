"""The outbox: one CCSDS CDM (KVN) and its JSON twin per emitted alert version.

:mod:`sda.alerts.plan` decides *what* changed; this module writes it. Each version of an alert becomes
``CDM-<alert_id>-v<version>.cdm`` (CCSDS 508.0-B-1, built from the alert row by :func:`build_cdm`)
and ``CDM-<alert_id>-v<version>.json`` (the row itself), both written atomically and only when absent
(:func:`write_if_absent`), so a file once emitted is never rewritten and a retry writes nothing twice.
:func:`outbox_lookup` reads a version back from its JSON twin (how :func:`sda.alerts.plan.plan_alerts`
adopts a version emitted by an interrupted attempt); :func:`row_from_json` and
:func:`teme_states_from_cdm` invert the writers.

CDM conventions (:func:`build_cdm`): everything in one frame the standard names, REF_FRAME = EME2000 (TEME,
SGP4's and the estimator's frame, is not a CDM frame). The TEME states at TCA are rotated to EME2000 with
:func:`sda.orbit.inertial.eme2000_to_teme` (IAU 2006/2000A, ERFA; the rotation's own rate, precession and
nutation, moves a LEO velocity by ~1e-4 m/s and is left out). Each covariance is re-expressed on the RTN axes
of the EME2000 state as written (``C' = R C R^T``, R the rotation from the TEME state's R/T/N triad to the
EME2000 state's: the identity to rounding, as both frames are inertial, so R/T/N components do not change), so
a receiver that builds R/T/N from the written state, as the standard defines them, uses the axes the
covariance is on. MISS_DISTANCE, RELATIVE_SPEED and RELATIVE_POSITION_R/T/N are the alert row's (secondary
minus primary, on the primary's R/T/N axes, from the TEME states): lengths and R/T/N components do not change
between inertial frames, so they are those of the written states to rounding (~1e-9 m);
RELATIVE_VELOCITY_R/T/N are computed from the written states. The covariance is the orbit determination's for
a fused object (COVARIANCE_METHOD = CALCULATED, full 6x6) or the uncertainty model's, diagonal on R/T/N
(DEFAULT); COLLISION_PROBABILITY is the 2-D Pc (Foster 1992, ``sda.orbit.pc``) the alert computed from the
same states and covariances in TEME (a rotation of both changes no Pc) and ``HBR``, given only when the 2-D
method is valid; otherwise a COMMENT says why it is absent. CDM 1.0 has no hard-body radius keyword: it is a
CARA-style ``COMMENT HBR = 20.0 [m]`` in the relative metadata. MANEUVERABLE = YES for an object the row flags
(``p_maneuverable`` / ``s_maneuverable``: a manoeuvre in gold ``manoeuvres`` burnt at or before the CDM's
CREATION_DATE, :func:`sda.alerts.publish.publish`), else N/A. Every number is written with the shortest text
that reads back to the same double (up to 17 significant digits). ORIGINATOR and the MESSAGE_ID prefix:
``settings.cdm_originator``.

A fused object's density-forecast terms (CARA's DCP: ``p_dcp_sigma`` / ``p_dcp_rtn``) are CARA's three
``COMMENT DCP ...`` lines of its data section, just before X (:meth:`sda.alerts.cdm_model.CdmObject.set_dcp`),
the sensitivity vector on the R/T/N axes of the state as written (turned as the covariance is); when both
objects carry them the COLLISION_PROBABILITY is on the pair's covariance (:mod:`sda.orbit.pair_covariance`) and
a comment says so. The relative metadata says which alert rules fired (``COMMENT ALERT_RULE = pc,miss_distance``,
:func:`sda.alerts.assessment.judge`) and the probability that the miss is under the alert distance
(``COMMENT MISS_PROBABILITY = ...``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from sda.alerts.cdm import new_cdm, write_cdm
from sda.alerts.cdm_model import Cdm, Dcp, Entry
from sda.alerts.values import aware, flag, iso, missing
from sda.config.settings import Settings
from sda.lake import schemas
from sda.orbit import frames, inertial
from sda.orbit.pc import rtn_basis

#: the ``alerts`` row (and the JSON twin's body): every column of gold ``alerts``
ALERT_FIELDS = tuple(schemas.ALERT.fieldNames())
#: its timestamp columns (aware UTC datetimes in a row, ISO text in the JSON twin)
TIME_FIELDS = frozenset(f.name for f in schemas.ALERT.fields if f.dataType.typeName() == "timestamp")


def _epoch(t) -> str:
    """CCSDS epoch (UTC, microseconds, no zone letter)."""
    return iso(t)[:-1]


def file_names(alert_id: str, version: int) -> tuple[str, str]:
    """(CDM file, JSON twin) names of one emitted version."""
    stem = f"CDM-{alert_id}-v{int(version)}"
    return f"{stem}.cdm", f"{stem}.json"


def _states_km(row: Mapping, obj: str) -> np.ndarray:
    return np.array([row[f"{obj}_{c}"] for c in ("x_m", "y_m", "z_m", "vx_ms", "vy_ms", "vz_ms")], float) / 1000.0


def _sigmas(row: Mapping, obj: str) -> np.ndarray:
    return np.array([row[f"{obj}_sigma_{c}"] for c in ("r_m", "t_m", "n_m", "rdot_ms", "tdot_ms", "ndot_ms")], float)


def _insert_comment_before(section, key: str, text: str) -> None:
    for i, e in enumerate(section.entries):
        if e.key == key:
            section.entries.insert(i, Entry("COMMENT", text))
            return
    section.entries.append(Entry("COMMENT", text))


def kvn_value(text: str) -> str:
    """A free-text value a KVN line can hold: square brackets (they open a unit, as in real names
    like ``STARLINK-11353 [DTC]``) become parentheses, line breaks spaces."""
    return " ".join(str(text).replace("[", "(").replace("]", ")").split())


def _unix_ns(t: dt.datetime) -> int:
    return (t - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1) * 1000


def to_eme2000(teme_km: np.ndarray, cov_rtn: np.ndarray, unix_ns: int,
               dcp_rtn: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """A TEME state [km, km/s] and its covariance on that state's R/T/N axes -> (the EME2000 state, the
    covariance on the EME2000 state's R/T/N axes): ``C' = R C R^T``, R the rotation between the triads; with
    ``dcp_rtn`` (a DCP sensitivity vector on the TEME state's R/T/N axes) also ``R g``, a third value."""
    q = inertial.eme2000_to_teme(unix_ns).T  # TEME of date -> EME2000
    r, v = q @ teme_km[:3], q @ teme_km[3:]
    turn = rtn_basis(r, v).T @ q @ rtn_basis(teme_km[:3], teme_km[3:])
    big = np.kron(np.eye(2), turn)
    out = (np.r_[r, v], big @ np.asarray(cov_rtn, float) @ big.T)
    return out if dcp_rtn is None else (*out, big @ np.asarray(dcp_rtn, float))


def dcp_of(row: Mapping, o: str) -> Dcp | None:
    """The alert's DCP terms of object ``o`` (p or s) on its TEME state's R/T/N axes, or None (no fused orbit,
    or a row from before the columns)."""
    sigma, g = row.get(f"{o}_dcp_sigma"), row.get(f"{o}_dcp_rtn")
    if missing(sigma) or g is None or not isinstance(g, (list, tuple, np.ndarray)) or len(g) != 6:
        return None
    return Dcp(float(sigma), np.asarray(g, float))


def _objects(row: Mapping) -> dict[int, dict]:
    objects = {}
    for n, o in ((1, "p"), (2, "s")):
        norad = int(row["primary_id" if o == "p" else "secondary_id"])
        name = kvn_value(row.get("primary_name" if o == "p" else "secondary_name") or f"NORAD {norad}")
        intl = row.get("primary_intldes" if o == "p" else "secondary_intldes") or "UNKNOWN"
        objects[n] = {"OBJECT_DESIGNATOR": f"{norad:05d}", "OBJECT_NAME": name, "INTERNATIONAL_DESIGNATOR": intl,
                      "COVARIANCE_METHOD": "CALCULATED" if _full_cov(row, o) is not None else "DEFAULT",
                      "MANEUVERABLE": "YES" if maneuverable(row, o) else "N/A"}
    return objects


def build_cdm(row: Mapping, originator: str = Settings.cdm_originator) -> Cdm:
    """The CCSDS CDM (508.0-B-1) of one alert version, a pure function of its alerts row."""
    tca = aware(row["tca"])
    eme, cov, dcp = {}, {}, {}
    for o in ("p", "s"):
        full = _full_cov(row, o)
        full = full if full is not None else np.diag(_sigmas(row, o) ** 2)
        terms = dcp_of(row, o)
        if terms is None:
            (eme[o], cov[o]), dcp[o] = to_eme2000(_states_km(row, o), full, _unix_ns(tca)), None
        else:
            eme[o], cov[o], g = to_eme2000(_states_km(row, o), full, _unix_ns(tca), terms.rtn)
            dcp[o] = Dcp(terms.sigma, g)
    objects = _objects(row)
    cdm = new_cdm(tca=_epoch(tca), originator=originator,
                  message_id=f"{originator}-{row['alert_id']}-V{int(row['version'])}",
                  creation_date=_epoch(row["cdm_created"]),
                  state1_km=eme["p"], cov1_rtn=cov["p"], state2_km=eme["s"], cov2_rtn=cov["s"],
                  object1=objects[1], object2=objects[2], ref_frame="EME2000")
    rel = cdm.relative
    # the alert's own values (TEME states): lengths and R/T/N components, the same in EME2000 to rounding
    rel.set("MISS_DISTANCE", float(row["miss_m"]), "m")
    rel.set("RELATIVE_SPEED", float(row["rel_speed_ms"]), "m/s")
    for axis, key in zip("RTN", ("r_m", "t_m", "n_m")):
        rel.set(f"RELATIVE_POSITION_{axis}", float(row[key]), "m")
    comments = [
        f"{originator} alert {row['alert_id']} version {int(row['version'])}: status {row['status'].upper()}, "
        f"level {row['level'].upper()}",
        f"reason: {row['reason']}",
    ]
    if row.get("close_reason"):
        comments.append(f"closed: {row['close_reason']}")
    comments += _rule_comments(row)
    if row["pc_valid"] and not missing(row.get("pc")):
        rel.set("COLLISION_PROBABILITY", float(row["pc"]))
        rel.set("COLLISION_PROBABILITY_METHOD", "FOSTER-1992")
        comments.append("COLLISION_PROBABILITY: 2-D Pc of the states, covariances and HBR of this message" + (
            ", on the pair's covariance: the shared density forecast error (both objects' DCP comments) "
            "subtracted as CARA's Pc_CovXCorr does" if dcp["p"] is not None and dcp["s"] is not None else ""))
    else:
        comments.append(f"COLLISION_PROBABILITY not given: the 2-D Pc method is invalid for this encounter "
                        f"({row.get('pc_flag') or 'invalid geometry'})")
    comments.append("relative position/velocity: secondary minus primary, primary's RTN frame (the same "
                    "in EME2000 and in TEME, where the alert computed them)")
    comments.append(f"HBR = {float(row['hbr_m'])!r} [m]")
    rel.entries[0:0] = [Entry("COMMENT", c) for c in comments]
    for n, o in ((1, "p"), (2, "s")):
        _object_comments(cdm.object(n), row, o)
        if dcp[o] is not None:
            cdm.object(n).set_dcp(dcp[o])
    return cdm


def _rule_comments(row: Mapping) -> list[str]:
    """The alert rules that fired (sda.alerts.assessment.judge) and the miss probability, when the row has them."""
    out = []
    if not missing(row.get("alert_rule")):
        out.append(f"ALERT_RULE = {row['alert_rule']}")
    if not missing(row.get("miss_probability")):
        out.append(f"MISS_PROBABILITY = {float(row['miss_probability'])!r}: the probability that the miss is "
                   f"under the alert distance (the pair's covariance)")
    return out


def _object_comments(obj, row: Mapping, o: str) -> None:
    fused = _full_cov(row, o) is not None
    origin = "the fused orbit's numerical prediction" if fused else "SGP4"
    _insert_comment_before(obj, "X", f"state at TCA: {origin} (TEME of date) rotated to EME2000 (IAU 2006/2000A)")
    sig = _sigmas(row, o)
    source = row[f"{o}_cov_source"]
    how = (f"orbit determination ({source}: jobs/fuse.py), propagated to TCA with drag-consider and process "
           f"noise (sda.orbit.estimation.predict), full 6x6" if fused else
           f"modelled ({source}, sda.orbit.uncertainty), diagonal")
    _insert_comment_before(obj, "CR_R", f"covariance: {how}, on the R/T/N axes of the state above; "
                                        f"sigma R/T/N = {sig[0]:.1f}/{sig[1]:.1f}/{sig[2]:.1f} m")
    if maneuverable(row, o):
        _insert_comment_before(obj, "MANEUVERABLE", "MANEUVERABLE = YES: a manoeuvre of this object burnt at or "
                                                    "before CREATION_DATE is in gold manoeuvres (its OPM: outbox)")


def maneuverable(row: Mapping, o: str) -> bool:
    """Whether the alert row says object ``o`` (p or s) has manoeuvred (null: a row from before the flag)."""
    return flag(row.get(f"{o}_maneuverable"))


def _full_cov(row: Mapping, o: str) -> np.ndarray | None:
    """The alert's full RTN covariance of object ``o`` (a fused orbit's), or None (modelled: diagonal)."""
    value = row.get(f"{o}_cov_rtn")
    if value is None or (not isinstance(value, (list, tuple, np.ndarray))) or len(value) != 36:
        return None
    return np.asarray(value, float).reshape(6, 6)


def cdm_text(row: Mapping, originator: str = Settings.cdm_originator) -> str:
    return write_cdm(build_cdm(row, originator))


def _json_value(v):
    if isinstance(v, (dt.datetime, pd.Timestamp)):
        return iso(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def json_text(row: Mapping) -> str:
    """The JSON twin of a CDM: the alert row (every ``alerts`` column), deterministic bytes."""
    body = {"format": "sda-alert/1", **{k: _json_value(row.get(k)) for k in ALERT_FIELDS}}
    return json.dumps(body, sort_keys=True, indent=2, allow_nan=False) + "\n"


def row_from_json(text: str) -> dict:
    """Inverse of :func:`json_text`: the alert row (aware UTC datetimes)."""
    body = json.loads(text)
    row = {k: body.get(k) for k in ALERT_FIELDS}
    for k in TIME_FIELDS:
        if row.get(k) is not None:
            row[k] = dt.datetime.fromisoformat(row[k].replace("Z", "+00:00"))
    row["version"] = int(row["version"])
    return row


def teme_states_from_cdm(cdm: Cdm) -> tuple[np.ndarray, np.ndarray]:
    """(primary, secondary) TEME states [m, m/s] of a CDM written by :func:`build_cdm` (EME2000 -> TEME;
    ITRF, as older messages were written, through :func:`sda.orbit.frames.ecef_to_teme`)."""
    out = []
    for o in cdm.objects:
        s = o.state_km
        if (o.ref_frame or "").upper() == "ITRF":
            r, v = frames.ecef_to_teme(s[:3], s[3:], cdm.tca.timestamp())
        else:
            q = inertial.eme2000_to_teme(_unix_ns(cdm.tca))
            r, v = q @ s[:3], q @ s[3:]
        out.append(np.r_[r, v] * 1000.0)
    return out[0], out[1]


def write_if_absent(path: Path, text: str) -> bool:
    """Atomically create ``path`` with ``text`` (temp file, fsync, ``os.replace``) unless it exists:
    an emitted file is never rewritten. True if written."""
    path = Path(path)
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:  # pragma: no cover - platforms without directory fsync
        pass
    return True


def emit(row: Mapping, outbox: Path, originator: str = Settings.cdm_originator) -> int:
    """Write a version's JSON twin, then its CDM, each only when absent; the number of files written."""
    cdm_name, json_name = file_names(row["alert_id"], row["version"])
    written = write_if_absent(Path(outbox) / json_name, json_text(row))
    written += write_if_absent(Path(outbox) / cdm_name, cdm_text(row, originator))
    return int(written)


def outbox_lookup(outbox: Path) -> Callable[[str, int], dict | None]:
    """``emitted`` for :func:`plan_alerts`: the row of a version whose JSON twin is in the outbox."""
    def lookup(alert_id: str, version: int) -> dict | None:
        path = Path(outbox) / file_names(alert_id, version)[1]
        if not path.is_file():
            return None
        return row_from_json(path.read_text(encoding="utf-8"))

    return lookup
