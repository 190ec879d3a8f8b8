"""What an alert version says, and whether a new assessment says something else (pure).

The emitted content is level, pc_valid / pc_flag, Pc to 3 significant digits, miss to 1 m, relative
speed to 0.1 m/s, RTN position to 1 m, TCA to 1 s (:func:`content_hash`, stored with every version).
A matched alert has changed when that hash differs *and* some value moved by at least its rounding
step (or level / validity changed), so a value hovering at a rounding boundary does not flap
(:func:`content_changed`). A persistent proximity, whose smallest distance and time move from run to
run, changes only with its level, Pc validity or Pc (:func:`persistent_changed`).

Whether each object has manoeuvred (``p_maneuverable`` / ``s_maneuverable``: the CDM's MANEUVERABLE) is
part of the verdict: a change of either is a new version of any alert. It enters the hash only when one
of them is true, so the hashes of versions stored before the flags existed (null, read as false) stand.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from sda.alerts.values import aware, flag, missing

__all__ = ["content_hash", "content_changed", "persistent_changed"]


def _rounded(row: Mapping) -> dict:
    pc = row.get("pc")
    pc = None if missing(pc) else float(f"{float(pc):.3g}")
    out = {
        "tca_s": int(round(aware(row["tca"]).timestamp())),
        "miss_m": int(round(float(row["miss_m"]))),
        "rel_speed_ms": round(float(row["rel_speed_ms"]), 1),
        "rtn_m": [int(round(float(row[k]))) for k in ("r_m", "t_m", "n_m")],
        "pc": pc,
        "pc_valid": bool(row["pc_valid"]),
        "pc_flag": row.get("pc_flag"),
        "level": row["level"],
    }
    if any(_maneuverable(row)):
        out["maneuverable"] = list(_maneuverable(row))
    return out


def _maneuverable(row: Mapping) -> tuple[bool, bool]:
    """(primary, secondary) has manoeuvred; a missing flag (a row from before the column) is false."""
    return flag(row.get("p_maneuverable")), flag(row.get("s_maneuverable"))


def content_hash(row: Mapping) -> str:
    """sha256 of the emitted content, rounded: level, pc validity/flag, Pc to 3 significant digits, miss
    to 1 m, relative speed to 0.1 m/s, RTN to 1 m, TCA to 1 s; the MANEUVERABLE flags when one is true."""
    text = json.dumps(_rounded(row), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _verdict_changed(old: Mapping, new: Mapping) -> bool:
    """Level, Pc validity, the reason for an invalid Pc or an object's MANEUVERABLE changed."""
    return ((old["level"], bool(old["pc_valid"]), old.get("pc_flag"), _maneuverable(old))
            != (new["level"], bool(new["pc_valid"]), new.get("pc_flag"), _maneuverable(new)))


def _pc_changed(old: Mapping, new: Mapping) -> bool:
    """Pc appeared, vanished, or moved by at least its rounding step (3 significant digits)."""
    a, b = old.get("pc"), new.get("pc")
    if missing(a) != missing(b):
        return True
    return not missing(a) and abs(float(a) - float(b)) >= 1e-3 * max(abs(float(a)), abs(float(b)))


def content_changed(old: Mapping, new: Mapping) -> bool:
    """Whether ``new`` must be emitted as an update of ``old``: the rounded content differs and either
    level / Pc validity / MANEUVERABLE changed or some value moved by at least its rounding step."""
    if content_hash(old) == content_hash(new):
        return False
    if _verdict_changed(old, new):
        return True
    if abs(aware(old["tca"]).timestamp() - aware(new["tca"]).timestamp()) >= 1.0:
        return True
    if abs(float(old["miss_m"]) - float(new["miss_m"])) >= 1.0:
        return True
    if abs(float(old["rel_speed_ms"]) - float(new["rel_speed_ms"])) >= 0.1:
        return True
    if any(abs(float(old[k]) - float(new[k])) >= 1.0 for k in ("r_m", "t_m", "n_m")):
        return True
    return _pc_changed(old, new)


def persistent_changed(old: Mapping, new: Mapping) -> bool:
    """A persistent proximity is updated, not re-emitted, as its smallest distance and its time move
    from run to run: only a new level, Pc validity, MANEUVERABLE or Pc (3 significant digits) is a change."""
    return _verdict_changed(old, new) or _pc_changed(old, new)
