"""The manoeuvre message: one CCSDS OPM (KVN) and its JSON twin per detected manoeuvre (pure: no Spark).

A row of gold ``manoeuvres`` (jobs/fuse.py) and the gold ``fused_orbits`` row it names by ``fused_id``
(the orbit re-fitted from the observations after the burn) become ``OPM-<manoeuvre_id>.opm``, an
Orbit Parameter Message (CCSDS 502.0-B-3, ``CCSDS_OPM_VERS = 3.0``), and ``OPM-<manoeuvre_id>.json``
(the two rows and the object's name), both written with :func:`sda.alerts.outbox.write_if_absent`: a
message once written is never rewritten, so publishing twice writes once. ``manoeuvre_id`` names the
window's fit and the burn's number in it: a window re-fitted with new observations that still finds the
burn gets a new id, and so a new message, which revises every earlier message of the object whose burn bracket
overlaps its own (:func:`revises`).

**Withdrawal.** A message whose manoeuvre is no longer in gold ``manoeuvres`` and that no current detection
revises -- the window was re-fitted with later observations and they explain the passes without a burn -- is
withdrawn by a message of its own, ``OPM-<manoeuvre_id>.withdrawal.json`` (:func:`withdrawal_text`; CCSDS has
no message that cancels an OPM, so this one is JSON only): which message it withdraws, and the window's fused
orbit now in gold ``fused_orbits`` that explains the observations. Written once, and its CREATION_DATE is the
later of the withdrawn detection's ``detected_at`` and that orbit's epoch, so a replay writes the same bytes.

The OPM says, in this order (what 502.0-B-3 and ``ccsds-ndm``, which validates every message written here,
require of a message with a maneuver):

* header: CREATION_DATE is the later of the row's ``detected_at`` and the re-fit's epoch -- the first time
  the message could exist, not the wall clock, so a replay writes the same bytes; ORIGINATOR and the
  MESSAGE_ID prefix are ``settings.cdm_originator``, as in the CDMs;
* metadata: OBJECT_NAME and OBJECT_ID (international designator) from the catalogue, CENTER_NAME EARTH,
  REF_FRAME TEME, TIME_SYSTEM UTC;
* the post-burn state (km, km/s) at the re-fit's epoch: the burn is already in it;
* MASS: a placeholder the standard requires with a maneuver (the object's mass is not observed), said so;
* the re-fit's 6x6 position/velocity covariance (of its 7x7 with the ballistic coefficient), TEME, in
  km**2, km**2/s, km**2/s**2 (left out, with a COMMENT, when not finite);
* one impulsive maneuver: MAN_EPOCH_IGNITION the estimated burn time, MAN_DURATION 0, MAN_DELTA_MASS
  -0.001 kg (a placeholder: the standard wants a negative mass change, the real one is unknown),
  MAN_REF_FRAME RTN (of the pre-burn orbit at the burn), MAN_DV_1/2/3 in km/s; COMMENT lines give the burn
  bracket, the delta-v's sigma and the detection test.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from sda.alerts.outbox import kvn_value, write_if_absent
from sda.alerts.values import aware, iso, missing
from sda.config.settings import Settings
from sda.lake.schemas import FUSED_ORBITS, MANOEUVRES

__all__ = ["MANOEUVRE_FIELDS", "ORBIT_FIELDS", "file_names", "opm_text", "json_text", "from_json", "emit",
           "emitted", "revises", "published_ids", "to_withdraw", "withdrawal_name", "withdrawal_text", "withdraw"]

#: the ``manoeuvres`` row (every column) and what the message takes of its ``fused_orbits`` row
MANOEUVRE_FIELDS = tuple(MANOEUVRES.fieldNames())
ORBIT_FIELDS = ("fused_id", "norad_id", "window_start", "epoch", "fit_start", "x_km", "y_km", "z_km", "vx_kms",
                "vy_kms", "vz_kms", "b_m2_kg", "covariance", "observations", "rms", "status", "regime")
_TIMES = frozenset(f.name for s in (MANOEUVRES, FUSED_ORBITS) for f in s.fields
                   if f.dataType.typeName() == "timestamp")
FORMAT = "sda-manoeuvre/1"
WITHDRAWAL_FORMAT = "sda-manoeuvre-withdrawal/1"
OPM_VERSION = "3.0"
#: placeholders the standard requires with a maneuver: neither the mass nor its change is observed
MASS_KG = 1000.0
DELTA_MASS_KG = -0.001
_STATE = (("X", "x_km", "km"), ("Y", "y_km", "km"), ("Z", "z_km", "km"),
          ("X_DOT", "vx_kms", "km/s"), ("Y_DOT", "vy_kms", "km/s"), ("Z_DOT", "vz_kms", "km/s"))
_AXES = ("X", "Y", "Z", "X_DOT", "Y_DOT", "Z_DOT")
_COV_UNITS = {0: "km**2", 1: "km**2/s", 2: "km**2/s**2"}


def file_names(manoeuvre_id: str) -> tuple[str, str]:
    """(OPM file, JSON twin) names of one manoeuvre's message."""
    return f"OPM-{manoeuvre_id}.opm", f"OPM-{manoeuvre_id}.json"


def _epoch(t) -> str:
    """CCSDS epoch (UTC, microseconds, no zone letter)."""
    return iso(t)[:-1]


def _number(x) -> str:
    return repr(float(x))  # the shortest text that reads back to the same double


def _text(x, spec: str) -> str:
    """A number for a COMMENT, or "unknown"."""
    return "unknown" if missing(x) or not math.isfinite(float(x)) else format(float(x), spec)


def _line(key: str, value, unit: str | None = None) -> str:
    return f"{key:<20} = {value}" + (f" [{unit}]" if unit else "")


def _header(man: Mapping, orbit: Mapping, originator: str) -> list[str]:
    created = max(aware(man["detected_at"]), aware(orbit["epoch"]))
    return [
        _line("CCSDS_OPM_VERS", OPM_VERSION),
        f"COMMENT {originator} manoeuvre {man['manoeuvre_id']}: NORAD {int(man['norad_id'])}, burn {int(man['seq'])} "
        f"of the arc window from {iso(man['window_start'])}",
        "COMMENT a later message of the same object whose burn bracket overlaps this one's revises it; "
        f"OPM-{man['manoeuvre_id']}.withdrawal.json withdraws it when none does",
        _line("CREATION_DATE", _epoch(created)),
        _line("ORIGINATOR", originator),
        _line("MESSAGE_ID", f"{originator}-OPM-{man['manoeuvre_id']}"),
    ]


def _metadata(man: Mapping, name: str | None, object_id: str | None) -> list[str]:
    return [
        _line("OBJECT_NAME", kvn_value(name) if name else f"NORAD {int(man['norad_id'])}"),
        _line("OBJECT_ID", kvn_value(object_id) if object_id else "UNKNOWN"),
        _line("CENTER_NAME", "EARTH"),
        _line("REF_FRAME", "TEME"),
        _line("TIME_SYSTEM", "UTC"),
    ]


def _state(man: Mapping, orbit: Mapping) -> list[str]:
    lines = [f"COMMENT post-burn state: fused orbit {orbit['fused_id']} (jobs/fuse.py), re-fitted from "
             f"{int(man['observations_after'])} observations after the burn; the burn is already in it",
             f"COMMENT fit from {iso(orbit['fit_start'])}: weighted residual RMS {_text(orbit.get('rms'), '.3f')}, "
             f"ballistic coefficient B = {_text(orbit.get('b_m2_kg'), '.6g')} m**2/kg",
             _line("EPOCH", _epoch(orbit["epoch"]))]
    return lines + [_line(key, _number(orbit[col]), unit) for key, col, unit in _STATE]


def _covariance(orbit: Mapping) -> list[str]:
    cov = np.asarray(orbit.get("covariance") if orbit.get("covariance") is not None else [], float)
    if cov.size != 49 or not np.isfinite(cov).all():
        return ["COMMENT no covariance: the fit's is not finite"]
    cov = cov.reshape(7, 7)[:6, :6] / 1e6  # m-units -> km-units (a division: correctly rounded)
    lines = ["COMMENT covariance: the orbit determination's (its 7x7 with B less the B row and column), TEME",
             _line("COV_REF_FRAME", "TEME")]
    for i in range(6):
        for j in range(i + 1):
            lines.append(_line(f"C{_AXES[i]}_{_AXES[j]}", _number(cov[i, j]), _COV_UNITS[(i >= 3) + (j >= 3)]))
    return lines


def _maneuver(man: Mapping) -> list[str]:
    dv = [man[f"dv_{a}_ms"] for a in "rtn"]
    if any(missing(x) or not math.isfinite(float(x)) for x in dv):
        raise ValueError(f"manoeuvre {man['manoeuvre_id']}: no delta-v estimate, no OPM maneuver can say it")
    return [
        f"COMMENT impulsive burn estimated from the pre- and post-burn orbits (sda.orbit.manoeuvre.detection): "
        f"after {iso(man['burn_after'])}, not after {iso(man['burn_before'])}",
        f"COMMENT delta-v {_text(man.get('dv_ms'), '.4g')} m/s, 1-sigma {_text(man.get('dv_sigma_ms'), '.4g')} m/s; "
        "RTN: radial, transverse, normal of the pre-burn orbit at the burn",
        f"COMMENT detected by {int(man['passes'])} pass(es): statistic {float(man['statistic']):.4g} with "
        f"{int(man['dof'])} degrees of freedom, log10 p = {float(man['log10_p']):.3f}",
        f"COMMENT MAN_DELTA_MASS {DELTA_MASS_KG} kg is a placeholder the standard requires: the mass change is unknown",
        _line("MAN_EPOCH_IGNITION", _epoch(man["burn_time"])),
        _line("MAN_DURATION", _number(0.0), "s"),
        _line("MAN_DELTA_MASS", _number(DELTA_MASS_KG), "kg"),
        _line("MAN_REF_FRAME", "RTN"),
        *[_line(f"MAN_DV_{k}", _number(float(v) / 1000.0), "km/s") for k, v in enumerate(dv, 1)],
    ]


def opm_text(manoeuvre: Mapping, orbit: Mapping, name: str | None = None, object_id: str | None = None,
             originator: str = Settings.cdm_originator) -> str:
    """The OPM (KVN) of one manoeuvre: a pure function of its ``manoeuvres`` row, the ``fused_orbits`` row
    named by its ``fused_id`` and the object's catalogue name and international designator; validated by
    ``ccsds-ndm`` (ValueError if it refuses the message)."""
    import ccsds_ndm

    if orbit["fused_id"] != manoeuvre["fused_id"]:
        raise ValueError(f"manoeuvre {manoeuvre['manoeuvre_id']} names fused orbit {manoeuvre['fused_id']}, "
                         f"not {orbit['fused_id']}")
    mass = [f"COMMENT MASS {MASS_KG} kg is a placeholder the standard requires with a maneuver: the mass is unknown",
            _line("MASS", _number(MASS_KG), "kg")]
    lines = (_header(manoeuvre, orbit, originator) + _metadata(manoeuvre, name, object_id) + _state(manoeuvre, orbit)
             + mass + _covariance(orbit) + _maneuver(manoeuvre))
    text = "\n".join(lines) + "\n"
    ccsds_ndm.Opm.from_str(text, "kvn").validate()  # the parser's check of what is written
    return text


def _json_value(v):
    if isinstance(v, dt.datetime):
        return iso(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_json_value(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def json_text(manoeuvre: Mapping, orbit: Mapping, name: str | None = None, object_id: str | None = None) -> str:
    """The JSON twin of an OPM: everything it was built from, deterministic bytes."""
    body = {"format": FORMAT, "name": name, "object_id": object_id,
            "manoeuvre": {k: _json_value(manoeuvre.get(k)) for k in MANOEUVRE_FIELDS},
            "orbit": {k: _json_value(orbit.get(k)) for k in ORBIT_FIELDS}}
    return json.dumps(body, sort_keys=True, indent=2, allow_nan=False) + "\n"


def from_json(text: str) -> dict:
    """Inverse of :func:`json_text`: ``{manoeuvre, orbit, name, object_id}`` (times aware UTC), the
    arguments :func:`opm_text` takes."""
    body = json.loads(text)
    out = {"name": body.get("name"), "object_id": body.get("object_id")}
    for part in ("manoeuvre", "orbit"):
        row = dict(body[part])
        for k in _TIMES & set(row):
            if row[k] is not None:
                row[k] = dt.datetime.fromisoformat(row[k].replace("Z", "+00:00"))
        out[part] = row
    return out


def emitted(outbox: Path, manoeuvre_id: str) -> bool:
    """Whether the manoeuvre's OPM (written after its JSON twin) is in the outbox."""
    return (Path(outbox) / file_names(manoeuvre_id)[0]).is_file()


def emit(manoeuvre: Mapping, orbit: Mapping, outbox: Path, name: str | None = None, object_id: str | None = None,
         originator: str = Settings.cdm_originator) -> int:
    """Write the JSON twin, then the OPM, each only when absent; the number of files written. An OPM missing
    beside its twin (a crash between the two) is written from the twin, so the pair always agrees."""
    opm_name, json_name = file_names(manoeuvre["manoeuvre_id"])
    twin = Path(outbox) / json_name
    written = write_if_absent(twin, json_text(manoeuvre, orbit, name, object_id))
    opm = Path(outbox) / opm_name
    if opm.exists():
        return int(written)
    if not written:
        parts = from_json(twin.read_text(encoding="utf-8"))
        manoeuvre, orbit, name, object_id = parts["manoeuvre"], parts["orbit"], parts["name"], parts["object_id"]
    return int(written) + int(write_if_absent(opm, opm_text(manoeuvre, orbit, name, object_id, originator)))


def revises(new: Mapping, old: Mapping) -> bool:
    """Whether detection ``new`` revises ``old``: the same object, and their burn brackets overlap."""
    return (int(new["norad_id"]) == int(old["norad_id"]) and aware(new["burn_after"]) <= aware(old["burn_before"])
            and aware(old["burn_after"]) <= aware(new["burn_before"]))


def withdrawal_name(manoeuvre_id: str) -> str:
    return f"OPM-{manoeuvre_id}.withdrawal.json"


def published_ids(outbox: Path) -> list[str]:
    """The manoeuvre ids whose OPM is in the outbox and that no withdrawal has withdrawn yet."""
    outbox = Path(outbox)
    ids = sorted(p.name[len("OPM-"):-len(".opm")] for p in outbox.glob("OPM-*.opm"))
    return [i for i in ids if not (outbox / withdrawal_name(i)).is_file()]


def to_withdraw(outbox: Path, current: list[Mapping]) -> list[dict]:
    """The published manoeuvres (their rows, read from the JSON twins) that are not among the ``current`` gold
    ``manoeuvres`` rows and that no current row revises (:func:`revises`)."""
    known = {r["manoeuvre_id"] for r in current}
    out = []
    for manoeuvre_id in published_ids(outbox):
        if manoeuvre_id in known:
            continue
        old = from_json((Path(outbox) / file_names(manoeuvre_id)[1]).read_text(encoding="utf-8"))["manoeuvre"]
        if not any(revises(r, old) for r in current):
            out.append(old)
    return out


def withdrawal_text(manoeuvre: Mapping, orbit: Mapping, originator: str = Settings.cdm_originator) -> str:
    """The withdrawal of the published ``manoeuvre``: ``orbit`` is its window's fused orbit now in gold
    ``fused_orbits`` (another fit than the one that detected it); deterministic bytes."""
    if orbit["fused_id"] == manoeuvre["fused_id"]:
        raise ValueError(f"manoeuvre {manoeuvre['manoeuvre_id']}: its own fit {orbit['fused_id']} still stands")
    created = max(aware(manoeuvre["detected_at"]), aware(orbit["epoch"]))
    body = {
        "format": WITHDRAWAL_FORMAT, "creation_date": iso(created), "originator": originator,
        "message_id": f"{originator}-OPM-{manoeuvre['manoeuvre_id']}-WITHDRAWAL",
        "withdraws": {"message_id": f"{originator}-OPM-{manoeuvre['manoeuvre_id']}",
                      "files": list(file_names(manoeuvre["manoeuvre_id"]))},
        "reason": "the arc window was re-fitted with later observations, which it explains without this burn",
        "manoeuvre": {k: _json_value(manoeuvre.get(k)) for k in ("manoeuvre_id", "norad_id", "window_start", "seq",
                                                                  "burn_after", "burn_before", "burn_time", "dv_ms",
                                                                  "detected_at", "fused_id")},
        "orbit": {k: _json_value(orbit.get(k)) for k in ("fused_id", "norad_id", "window_start", "epoch", "fit_start",
                                                          "observations", "rms", "status")},
    }
    return json.dumps(body, sort_keys=True, indent=2, allow_nan=False) + "\n"


def withdraw(manoeuvre: Mapping, orbit: Mapping, outbox: Path, originator: str = Settings.cdm_originator) -> int:
    """Write the withdrawal of ``manoeuvre`` when absent; 1 if written."""
    return int(write_if_absent(Path(outbox) / withdrawal_name(manoeuvre["manoeuvre_id"]),
                               withdrawal_text(manoeuvre, orbit, originator)))
