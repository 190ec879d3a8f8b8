"""CCSDS Conjunction Data Message (CDM, CCSDS 508.0-B-1) in KVN form: parse, write, and Pc.

A CDM is kept as ordered ``KEY = value [unit]`` entries (``COMMENT`` lines included) in three
kinds of section: the header (CCSDS_CDM_VERS .. MESSAGE_ID), the relative metadata (TCA,
MISS_DISTANCE, RELATIVE_*, COLLISION_PROBABILITY, ...) and the two object sections (each
starting ``OBJECT = OBJECT1`` / ``OBJECT2``: metadata, OD parameters, state vector X..Z_DOT in
km and km/s, RTN covariance CR_R .. CNDOT_NDOT in m^2, m^2/s, m^2/s^2). Values are stored as
the text written in the message, so ``parse_cdm(write_cdm(cdm)) == cdm`` holds exactly and
numbers survive the round trip bit for bit; typed accessors convert on demand.

Quirks tolerated:
* CARA's hard-body radius in a COMMENT (``COMMENT HBR = 15 [m]``, ``COMMENT HBR   = 20.0``,
  ``COMMENT EFFECTIVE_HBR = ...``, ``COMMENT Operator Hard Body Radius = ...``), in the
  relative metadata or in an object section, as CARA's ``read_cdm.m`` accepts.
* RELATIVE_VELOCITY_R/T/N labelled ``[m]`` (CARA's synthetic CDMs): read as m/s, unit
  rewritten to ``m/s`` and a note added to ``Cdm.warnings``.
* a byte-order mark / stray invisible character before a keyword, blank lines, CRLF.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from sda.orbit.pc import Pc2DResult, pc2d_foster, rtn_to_inertial

__all__ = [
    "CdmError",
    "Entry",
    "CdmSection",
    "CdmObject",
    "Cdm",
    "COV_KEYS",
    "STATE_KEYS",
    "parse_cdm",
    "write_cdm",
    "pc_from_cdm",
    "new_cdm",
]

HEADER_KEYS = ("CCSDS_CDM_VERS", "CREATION_DATE", "ORIGINATOR", "MESSAGE_FOR", "MESSAGE_ID")
STATE_KEYS = ("X", "Y", "Z", "X_DOT", "Y_DOT", "Z_DOT")
_AXES = ("R", "T", "N", "RDOT", "TDOT", "NDOT")
#: Lower-triangle RTN covariance keywords in CCSDS order, with their (row, col) indices.
COV_KEYS: tuple[tuple[str, int, int], ...] = tuple(
    (f"C{_AXES[i]}_{_AXES[j]}", i, j) for i in range(6) for j in range(i + 1)
)
_COV_UNITS = {0: "m**2", 1: "m**2/s", 2: "m**2/s**2"}
_INERTIAL_FRAMES = {"EME2000", "GCRF", "ICRF", "J2000"}

_LINE_RE = re.compile(r"^([A-Za-z0-9_]+)\s*=\s*(.*?)\s*$")
_UNIT_RE = re.compile(r"^(.*?)\s*\[([^\[\]]*)\]$")
_HBR_RE = re.compile(
    r"^(?:HBR|EFFECTIVE_HBR|Operator\s+Hard\s+Body\s+Radius)\s*=?\s*"
    r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?:\[\s*([A-Za-z]+)\s*\])?\s*$",
    re.IGNORECASE,
)


class CdmError(ValueError):
    """Malformed or unsupported CDM."""


@dataclass(frozen=True)
class Entry:
    """One KVN line: ``key = value [unit]``; for a comment key is ``COMMENT`` and value its text."""

    key: str
    value: str
    unit: str | None = None


def _fmt_value(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "YES" if value else "NO"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v):
            return "NaN"
        return repr(v)  # shortest string that round-trips exactly
    return str(value)


def _to_float(text: str) -> float:
    try:
        return float(text)
    except ValueError as exc:
        raise CdmError(f"not a number: {text!r}") from exc


@dataclass
class CdmSection:
    """Ordered KVN entries of one section, with dictionary-like access to the keywords."""

    entries: list[Entry] = field(default_factory=list)

    def __contains__(self, key: str) -> bool:
        return any(e.key == key for e in self.entries if e.key != "COMMENT")

    def _find(self, key: str) -> int | None:
        for i, e in enumerate(self.entries):
            if e.key == key:
                return i
        return None

    def get(self, key: str, default=None) -> str | None:
        i = self._find(key)
        return default if i is None else self.entries[i].value

    def __getitem__(self, key: str) -> str:
        i = self._find(key)
        if i is None:
            raise KeyError(key)
        return self.entries[i].value

    def unit(self, key: str) -> str | None:
        i = self._find(key)
        return None if i is None else self.entries[i].unit

    def get_float(self, key: str, default: float | None = None) -> float | None:
        v = self.get(key)
        return default if v is None else _to_float(v)

    def set(self, key: str, value, unit: str | None = None, *, after: str | None = None) -> None:
        """Set (replace in place, or append / insert after ``after``) a keyword's value."""
        text = _fmt_value(value)
        i = self._find(key)
        if i is not None:
            self.entries[i] = Entry(key, text, unit if unit is not None else self.entries[i].unit)
            return
        j = self._find(after) if after else None
        entry = Entry(key, text, unit)
        if j is None:
            self.entries.append(entry)
        else:
            self.entries.insert(j + 1, entry)

    def add_comment(self, text: str) -> None:
        self.entries.append(Entry("COMMENT", str(text)))

    @property
    def comments(self) -> list[str]:
        return [e.value for e in self.entries if e.key == "COMMENT"]

    def keys(self) -> list[str]:
        return [e.key for e in self.entries if e.key != "COMMENT"]

    def as_dict(self) -> dict[str, str]:
        return {e.key: e.value for e in self.entries if e.key != "COMMENT"}

    def hbr_m(self) -> float | None:
        """Hard-body radius [m] from a CARA-style COMMENT line, if there is one."""
        for text in self.comments:
            m = _HBR_RE.match(text.strip())
            if m:
                val = float(m.group(1))
                unit = (m.group(2) or "m").lower()
                return val * 1000.0 if unit == "km" else val
        return None


@dataclass
class CdmObject(CdmSection):
    """An OBJECT1 / OBJECT2 section (its first entry is ``OBJECT = OBJECTn``)."""

    @property
    def name(self) -> str:
        return self.get("OBJECT", "")

    @property
    def designator(self) -> str | None:
        return self.get("OBJECT_DESIGNATOR")

    @property
    def object_name(self) -> str | None:
        return self.get("OBJECT_NAME")

    @property
    def ref_frame(self) -> str | None:
        return self.get("REF_FRAME")

    def _state_scale(self, key: str) -> float:
        unit = (self.unit(key) or ("km" if not key.endswith("_DOT") else "km/s")).lower()
        return {"km": 1.0, "km/s": 1.0, "m": 1e-3, "m/s": 1e-3}.get(unit, 1.0)

    @property
    def state_km(self) -> np.ndarray:
        """[X, Y, Z, X_DOT, Y_DOT, Z_DOT] in km and km/s."""
        missing = [k for k in STATE_KEYS if k not in self]
        if missing:
            raise CdmError(f"{self.name}: missing state keywords {missing}")
        return np.array([self.get_float(k) * self._state_scale(k) for k in STATE_KEYS])

    @property
    def position_m(self) -> np.ndarray:
        return self.state_km[:3] * 1000.0

    @property
    def velocity_ms(self) -> np.ndarray:
        return self.state_km[3:] * 1000.0

    @property
    def cov_rtn(self) -> np.ndarray:
        """6x6 position/velocity covariance in the object's RTN frame [m^2, m^2/s, m^2/s^2].

        Velocity keywords that are absent (position-only CDMs) are left as zero.
        """
        missing = [k for k, i, j in COV_KEYS[:6] if k not in self]
        if missing:
            raise CdmError(f"{self.name}: missing covariance keywords {missing}")
        C = np.zeros((6, 6))
        for key, i, j in COV_KEYS:
            v = self.get(key)
            if v is None:
                continue
            C[i, j] = C[j, i] = _to_float(v)
        return C

    def set_state_km(self, state) -> None:
        s = np.asarray(state, float).reshape(6)
        for k, val in zip(STATE_KEYS, s):
            self.set(k, float(val), "km/s" if k.endswith("_DOT") else "km")

    def set_cov_rtn(self, cov) -> None:
        C = np.asarray(cov, float)
        if C.shape != (6, 6):
            raise CdmError("RTN covariance must be 6x6")
        for key, i, j in COV_KEYS:
            self.set(key, float(C[i, j]), _COV_UNITS[(i >= 3) + (j >= 3)])


@dataclass
class Cdm:
    """A parsed CDM. ``warnings`` (notes on tolerated quirks) is not part of equality."""

    header: CdmSection
    relative: CdmSection
    objects: list[CdmObject]
    warnings: list[str] = field(default_factory=list, compare=False)

    # ---- header
    @property
    def version(self) -> str | None:
        return self.header.get("CCSDS_CDM_VERS")

    @property
    def message_id(self) -> str | None:
        return self.header.get("MESSAGE_ID")

    @property
    def originator(self) -> str | None:
        return self.header.get("ORIGINATOR")

    @property
    def creation_date(self) -> datetime | None:
        v = self.header.get("CREATION_DATE")
        return None if v is None else parse_epoch(v)

    # ---- relative metadata
    @property
    def tca(self) -> datetime:
        v = self.relative.get("TCA")
        if v is None:
            raise CdmError("CDM has no TCA")
        return parse_epoch(v)

    @property
    def miss_distance_m(self) -> float | None:
        return self.relative.get_float("MISS_DISTANCE")

    @property
    def relative_speed_ms(self) -> float | None:
        return self.relative.get_float("RELATIVE_SPEED")

    @property
    def relative_position_rtn_m(self) -> np.ndarray | None:
        keys = [f"RELATIVE_POSITION_{a}" for a in "RTN"]
        if not all(k in self.relative for k in keys):
            return None
        return np.array([self.relative.get_float(k) for k in keys])

    @property
    def relative_velocity_rtn_ms(self) -> np.ndarray | None:
        keys = [f"RELATIVE_VELOCITY_{a}" for a in "RTN"]
        if not all(k in self.relative for k in keys):
            return None
        return np.array([self.relative.get_float(k) for k in keys])

    @property
    def collision_probability(self) -> float | None:
        return self.relative.get_float("COLLISION_PROBABILITY")

    @property
    def hbr_m(self) -> float | None:
        """CARA's hard-body radius from a COMMENT (relative metadata first, then objects)."""
        for sec in (self.relative, self.header, *self.objects):
            h = sec.hbr_m()
            if h is not None:
                return h
        return None

    def set_hbr_m(self, hbr: float) -> None:
        """Write the hard-body radius as CARA does (``COMMENT HBR = x [m]``)."""
        text = f"HBR = {_fmt_value(float(hbr))} [m]"
        for sec in (self.relative, self.header, *self.objects):
            for i, e in enumerate(sec.entries):
                if e.key == "COMMENT" and _HBR_RE.match(e.value.strip()):
                    sec.entries[i] = Entry("COMMENT", text)
                    return
        self.relative.add_comment(text)

    # ---- objects
    def object(self, which: int | str) -> CdmObject:
        name = f"OBJECT{which}" if isinstance(which, int) else str(which).upper()
        for o in self.objects:
            if o.name.upper() == name:
                return o
        raise KeyError(name)

    @property
    def object1(self) -> CdmObject:
        return self.object(1)

    @property
    def object2(self) -> CdmObject:
        return self.object(2)


def parse_epoch(text: str) -> datetime:
    """CCSDS epoch (``YYYY-MM-DDThh:mm:ss[.d...]`` or ``YYYY-DDDThh:mm:ss``) as a UTC datetime."""
    t = text.strip().rstrip("Z")
    m = re.match(r"^(\d{4})-(\d{3})T(.*)$", t)
    if m:  # day-of-year form
        base = datetime.strptime(f"{m.group(1)}-{m.group(2)}", "%Y-%j")
        t = f"{base:%Y-%m-%d}T{m.group(3)}"
    date, _, clock = t.partition("T")
    hms, _, frac = clock.partition(".")
    frac = (frac + "000000")[:6] if frac else "000000"
    try:
        return datetime.strptime(f"{date}T{hms}.{frac}", "%Y-%m-%dT%H:%M:%S.%f").replace(
            tzinfo=timezone.utc)
    except ValueError as exc:
        raise CdmError(f"bad epoch {text!r}") from exc


def _clean(line: str) -> str:
    # strip a BOM / zero-width / control characters that sometimes precede the keyword
    return line.strip().lstrip("\ufeff\u200b\u200e\u200f\x00").strip()


def parse_cdm(text: str) -> Cdm:
    """Parse a KVN CDM (CCSDS 508.0-B-1)."""
    header, relative = CdmSection(), CdmSection()
    objects: list[CdmObject] = []
    warnings: list[str] = []
    current: CdmSection = header
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _clean(raw)
        if not line:
            continue
        if line.upper().startswith("COMMENT") and (len(line) == 7 or line[7] in " \t"):
            current.entries.append(Entry("COMMENT", line[7:].strip()))
            continue
        m = _LINE_RE.match(line)
        if not m:
            raise CdmError(f"line {lineno}: not a KVN 'KEY = value' line: {raw!r}")
        key, rest = m.group(1).upper(), m.group(2)
        unit = None
        um = _UNIT_RE.match(rest)
        if um:
            rest, unit = um.group(1).strip(), um.group(2).strip()
        if key == "OBJECT":
            current = CdmObject()
            objects.append(current)
        elif current is header and key not in HEADER_KEYS:
            current = relative
        if key.startswith("RELATIVE_VELOCITY_") and unit == "m":
            warnings.append(f"{key} labelled [m]; read as [m/s]")
            unit = "m/s"
        current.entries.append(Entry(key, rest, unit))
    if "CCSDS_CDM_VERS" not in header:
        raise CdmError("not a KVN CDM: no CCSDS_CDM_VERS")
    if len(objects) != 2:
        raise CdmError(f"expected OBJECT1 and OBJECT2 sections, found {len(objects)}")
    names = [o.name.upper() for o in objects]
    if names != ["OBJECT1", "OBJECT2"]:
        raise CdmError(f"object sections must be OBJECT1 then OBJECT2, got {names}")
    return Cdm(header, relative, objects, warnings)


def write_cdm(cdm: Cdm, key_width: int = 36) -> str:
    """KVN text of ``cdm`` (entries in their stored order, one ``KEY = value [unit]`` a line)."""
    for req in ("CCSDS_CDM_VERS",):
        if req not in cdm.header:
            raise CdmError(f"header lacks {req}")
    if [o.name.upper() for o in cdm.objects] != ["OBJECT1", "OBJECT2"]:
        raise CdmError("a CDM needs OBJECT1 and OBJECT2 sections, in that order")
    lines = []
    for sec in (cdm.header, cdm.relative, *cdm.objects):
        for e in sec.entries:
            if e.key == "COMMENT":
                lines.append(f"COMMENT {e.value}".rstrip())
                continue
            if "\n" in e.value or "[" in e.value:
                raise CdmError(f"{e.key}: value {e.value!r} cannot be written in KVN")
            s = f"{e.key:<{key_width}} = {e.value}"
            if e.unit is not None:
                s += f" [{e.unit}]"
            lines.append(s)
    return "\n".join(lines) + "\n"


def new_cdm(*, tca: str, originator: str, message_id: str, creation_date: str,
            state1_km, cov1_rtn, state2_km, cov2_rtn, hbr_m: float | None = None,
            object1: dict | None = None, object2: dict | None = None,
            relative: dict | None = None, ref_frame: str = "EME2000") -> Cdm:
    """Build a CDM from numbers (states in km, km/s in ``ref_frame``; RTN covariances in m-units).

    MISS_DISTANCE, RELATIVE_SPEED and the RTN relative position/velocity (in OBJECT1's RTN
    frame, secondary minus primary, as CCSDS defines them) are computed from the states.
    ``object1``/``object2``/``relative``: extra keywords (``{key: value}`` or
    ``{key: (value, unit)}``) appended to those sections.
    """
    from sda.orbit.pc import rtn_basis

    header = CdmSection()
    header.set("CCSDS_CDM_VERS", "1.0")
    header.set("CREATION_DATE", creation_date)
    header.set("ORIGINATOR", originator)
    header.set("MESSAGE_ID", message_id)
    s1 = np.asarray(state1_km, float)
    s2 = np.asarray(state2_km, float)
    dr = (s2[:3] - s1[:3]) * 1000.0
    dv = (s2[3:] - s1[3:]) * 1000.0
    M = rtn_basis(s1[:3], s1[3:])
    rel = CdmSection()
    rel.set("TCA", tca)
    rel.set("MISS_DISTANCE", float(np.linalg.norm(dr)), "m")
    rel.set("RELATIVE_SPEED", float(np.linalg.norm(dv)), "m/s")
    for a, val in zip("RTN", M.T @ dr):
        rel.set(f"RELATIVE_POSITION_{a}", float(val), "m")
    for a, val in zip("RTN", M.T @ dv):
        rel.set(f"RELATIVE_VELOCITY_{a}", float(val), "m/s")

    def extra(sec: CdmSection, items: dict | None):
        for k, v in (items or {}).items():
            if isinstance(v, tuple):
                sec.set(k, v[0], v[1])
            else:
                sec.set(k, v)

    extra(rel, relative)
    objs = []
    for n, (state, cov, items) in enumerate(((s1, cov1_rtn, object1), (s2, cov2_rtn, object2)), 1):
        o = CdmObject()
        o.set("OBJECT", f"OBJECT{n}")
        o.set("OBJECT_DESIGNATOR", (items or {}).get("OBJECT_DESIGNATOR", f"{n:05d}"))
        o.set("CATALOG_NAME", "SATCAT")
        o.set("OBJECT_NAME", (items or {}).get("OBJECT_NAME", f"OBJECT{n}"))
        o.set("INTERNATIONAL_DESIGNATOR", (items or {}).get("INTERNATIONAL_DESIGNATOR", "UNKNOWN"))
        o.set("EPHEMERIS_NAME", "NONE")
        o.set("COVARIANCE_METHOD", "CALCULATED")
        o.set("MANEUVERABLE", "N/A")
        o.set("REF_FRAME", ref_frame)
        extra(o, {k: v for k, v in (items or {}).items()
                  if k not in ("OBJECT_DESIGNATOR", "OBJECT_NAME", "INTERNATIONAL_DESIGNATOR")})
        o.set_state_km(state)
        o.set_cov_rtn(cov)
        objs.append(o)
    cdm = Cdm(header, rel, objs)
    if hbr_m is not None:
        cdm.set_hbr_m(hbr_m)
    return cdm


def cdm_inertial_states(cdm: Cdm) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                            np.ndarray, np.ndarray, np.ndarray]:
    """(r1, v1, C1, r2, v2, C2): inertial states [m, m/s] and 6x6 inertial covariances, each
    object's RTN covariance rotated with that object's own state (CARA ``RIC2ECI.m``)."""
    out = []
    for o in cdm.objects:
        frame = (o.ref_frame or "").upper()
        if frame not in _INERTIAL_FRAMES:
            raise CdmError(f"{o.name}: REF_FRAME {o.ref_frame!r} not supported "
                           f"(need an inertial frame: {sorted(_INERTIAL_FRAMES)})")
        r, v = o.position_m, o.velocity_ms
        out += [r, v, rtn_to_inertial(o.cov_rtn, r, v)]
    return tuple(out)  # type: ignore[return-value]


def pc_from_cdm(cdm: Cdm, hbr_m: float | None = None, *, check_validity: bool = True,
                **kwargs) -> Pc2DResult:
    """2-D Pc (:func:`sda.orbit.pc.pc2d_foster`) from the states and covariances as written in the CDM
    (CARA's "Pc2D_NoAdj": no re-search of the TCA). ``hbr_m`` overrides the CDM's HBR comment."""
    hbr = hbr_m if hbr_m is not None else cdm.hbr_m
    if hbr is None:
        raise CdmError("no hard-body radius in the CDM (COMMENT HBR = ...); pass hbr_m")
    r1, v1, C1, r2, v2, C2 = cdm_inertial_states(cdm)
    return pc2d_foster(r1, v1, C1, r2, v2, C2, hbr, check_validity=check_validity, **kwargs)
