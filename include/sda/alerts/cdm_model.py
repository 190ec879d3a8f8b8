"""The CDM as data (CCSDS 508.0-B-1, KVN): ordered entries in sections, with typed accessors.

A CDM is kept as ordered ``KEY = value [unit]`` entries (``COMMENT`` lines included) in three
kinds of section: the header (CCSDS_CDM_VERS .. MESSAGE_ID), the relative metadata (TCA,
MISS_DISTANCE, RELATIVE_*, COLLISION_PROBABILITY, ...) and the two object sections (each
starting ``OBJECT = OBJECT1`` / ``OBJECT2``: metadata, OD parameters, state vector X..Z_DOT in
km and km/s, RTN covariance CR_R .. CNDOT_NDOT in m^2, m^2/s, m^2/s^2). Values are stored as
the text written in the message, so numbers survive a round trip through :mod:`sda.alerts.cdm`
(which parses and writes the KVN text) bit for bit; the accessors here convert on demand.
CARA's hard-body radius, which CDMs carry in a COMMENT, is read (:meth:`Cdm.hbr_m`) and written
(:meth:`Cdm.set_hbr_m`) here too, and so are CARA's density-forecast terms of an object (:meth:`CdmObject.dcp`,
:meth:`CdmObject.set_dcp`), three COMMENT lines of its data section::

    COMMENT DCP Density Forecast Uncertainty = 2.013152860000000099e-01
    COMMENT DCP Sensitivity Vector RTN Pos = 1.74477955875023e+00 2.18251614005765e+04 1.00762227338813e+00 [m]
    COMMENT DCP Sensitivity Vector RTN Vel = -2.42720312855865e+01 1.37173405803000e-02 9.99178935500000e-04 [m/sec]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from sda.orbit.pair_covariance import Dcp

__all__ = [
    "CdmError",
    "Entry",
    "CdmSection",
    "CdmObject",
    "Cdm",
    "COV_KEYS",
    "STATE_KEYS",
    "parse_epoch",
    "Dcp",
]

STATE_KEYS = ("X", "Y", "Z", "X_DOT", "Y_DOT", "Z_DOT")
_AXES = ("R", "T", "N", "RDOT", "TDOT", "NDOT")
#: Lower-triangle RTN covariance keywords in CCSDS order, with their (row, col) indices.
COV_KEYS: tuple[tuple[str, int, int], ...] = tuple(
    (f"C{_AXES[i]}_{_AXES[j]}", i, j) for i in range(6) for j in range(i + 1)
)
_COV_UNITS = {0: "m**2", 1: "m**2/s", 2: "m**2/s**2"}

_HBR_RE = re.compile(
    r"^(?:HBR|EFFECTIVE_HBR|Operator\s+Hard\s+Body\s+Radius)\s*=?\s*"
    r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?:\[\s*([A-Za-z]+)\s*\])?\s*$",
    re.IGNORECASE,
)


_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_DCP_SIGMA_RE = re.compile(rf"^DCP\s+Density\s+Forecast\s+Uncertainty\s*=\s*({_NUMBER})\s*$", re.IGNORECASE)
_DCP_VECTOR_RE = re.compile(rf"^DCP\s+Sensitivity\s+Vector\s+RTN\s+(Pos|Vel)\s*=\s*({_NUMBER})\s+({_NUMBER})\s+"
                            rf"({_NUMBER})\s*(?:\[\s*([A-Za-z/]+)\s*\])?\s*$", re.IGNORECASE)
_DCP_UNITS = {"pos": ("m",), "vel": ("m/sec", "m/s")}


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

    @property
    def dcp(self) -> Dcp | None:
        """CARA's density-forecast terms of the object (module docstring): the relative 1-sigma density forecast
        error and the sensitivity vector on the R/T/N axes of the object's state (m, m/s); None when the section
        has none. An incomplete set (one or two of the three lines) is an error, as in CARA's reader."""
        sigma, parts = None, {}
        for text in self.comments:
            text = text.strip()
            m = _DCP_SIGMA_RE.match(text)
            if m:
                sigma = _to_float(m.group(1))
                continue
            m = _DCP_VECTOR_RE.match(text)
            if m:
                kind, unit = m.group(1).lower(), (m.group(5) or _DCP_UNITS[m.group(1).lower()][0]).lower()
                if unit not in _DCP_UNITS[kind]:
                    raise CdmError(f"{self.name}: DCP sensitivity {kind} in [{unit}], expected {_DCP_UNITS[kind]}")
                parts[kind] = [_to_float(m.group(i)) for i in (2, 3, 4)]
        found = (sigma is not None, "pos" in parts, "vel" in parts)
        if not any(found):
            return None
        if not all(found):
            raise CdmError(f"{self.name}: incomplete set of DCP values (density uncertainty, RTN Pos, RTN Vel)")
        return Dcp(sigma, np.r_[parts["pos"], parts["vel"]])

    def set_dcp(self, dcp: Dcp, before: str = "X") -> None:
        """Write ``dcp`` as CARA's three COMMENT lines, just before ``before`` (the state vector's X)."""
        g = [_fmt_value(float(x)) for x in dcp.rtn]
        lines = [f"DCP Density Forecast Uncertainty = {_fmt_value(float(dcp.sigma))}",
                 f"DCP Sensitivity Vector RTN Pos = {' '.join(g[:3])} [m]",
                 f"DCP Sensitivity Vector RTN Vel = {' '.join(g[3:])} [m/sec]"]
        self.entries = [e for e in self.entries if not (e.key == "COMMENT" and (
            _DCP_SIGMA_RE.match(e.value.strip()) or _DCP_VECTOR_RE.match(e.value.strip())))]
        i = self._find(before)
        i = len(self.entries) if i is None else i
        self.entries[i:i] = [Entry("COMMENT", text) for text in lines]

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
