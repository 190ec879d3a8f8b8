"""CCSDS Conjunction Data Message (CDM, CCSDS 508.0-B-1) in KVN form: parse, write, build, and its Pc.

The message itself (sections of ordered ``KEY = value [unit]`` entries, typed accessors) is
:mod:`sda.alerts.cdm_model`; this module turns KVN text into it and back, so
``parse_cdm(write_cdm(cdm)) == cdm`` holds exactly; :func:`new_cdm` builds one from numbers and
:func:`pc_from_cdm` hands the states and covariances it carries to :mod:`sda.orbit.pc`.

Quirks tolerated:
* CARA's hard-body radius in a COMMENT (``COMMENT HBR = 15 [m]``, ``COMMENT HBR   = 20.0``,
  ``COMMENT EFFECTIVE_HBR = ...``, ``COMMENT Operator Hard Body Radius = ...``), in the
  relative metadata or in an object section, as CARA's ``read_cdm.m`` accepts.
* RELATIVE_VELOCITY_R/T/N labelled ``[m]`` (CARA's synthetic CDMs): read as m/s, unit
  rewritten to ``m/s`` and a note added to ``Cdm.warnings``.
* a byte-order mark / stray invisible character before a keyword, blank lines, CRLF.

Frames (:func:`pc_from_cdm`): states in an inertial REF_FRAME (EME2000, GCRF, ICRF; what
:func:`sda.alerts.outbox.build_cdm` writes) are used as written. ITRF states are taken to TEME
(:func:`sda.orbit.frames.ecef_to_teme`: PEF at UT1 = UTC, polar motion neglected, the same rotation for both
objects) and their covariances, on the R/T/N axes of the ITRF state as the standard defines them, are carried
to the R/T/N axes of the TEME state through the full linear map (Earth rotation's ``w x r`` term included),
and so are their DCP sensitivity vectors.

Cross-correlation (:func:`pc_from_cdm`): when both object sections carry CARA's density-forecast terms
(``COMMENT DCP ...``, :meth:`sda.alerts.cdm_model.CdmObject.dcp`), the Pc is on the pair's covariance, the
shared density error subtracted (:mod:`sda.orbit.pair_covariance`, CARA's ``Pc_CovXCorr.m``); with one
section's terms only, none (as CARA).
"""

from __future__ import annotations

import re

import numpy as np

from sda.alerts.cdm_model import Cdm, CdmError, CdmObject, CdmSection, Entry
from sda.orbit import frames
from sda.orbit.pair_covariance import Dcp, pc2d_pair
from sda.orbit.pc import Pc2DResult, inertial_to_rtn, rtn_basis, rtn_to_inertial

__all__ = [
    "parse_cdm",
    "write_cdm",
    "pc_from_cdm",
    "new_cdm",
]

HEADER_KEYS = ("CCSDS_CDM_VERS", "CREATION_DATE", "ORIGINATOR", "MESSAGE_FOR", "MESSAGE_ID")
#: the frames whose states :func:`pc_from_cdm` takes as inertial
_INERTIAL_FRAMES = {"EME2000", "GCRF", "ICRF", "J2000"}

_LINE_RE = re.compile(r"^([A-Za-z0-9_]+)\s*=\s*(.*?)\s*$")
_UNIT_RE = re.compile(r"^(.*?)\s*\[([^\[\]]*)\]$")


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


def _inertial(o: CdmObject, unix_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, Dcp | None]:
    """(r m, v m/s, RTN covariance, DCP on those RTN axes) of an object section in an inertial frame
    (module docstring)."""
    frame = (o.ref_frame or "").upper()
    dcp = o.dcp
    if frame in _INERTIAL_FRAMES:
        return o.position_m, o.velocity_ms, o.cov_rtn, dcp
    if frame != "ITRF":
        raise CdmError(f"{o.name}: REF_FRAME {o.ref_frame!r} not supported "
                       f"(need ITRF or an inertial frame: {sorted(_INERTIAL_FRAMES)})")
    s = o.state_km
    r, v = frames.ecef_to_teme(s[:3], s[3:], unix_s)
    r, v = r * 1000.0, v * 1000.0
    unit = np.eye(6)  # the map ITRF -> TEME is linear in (r, v): its matrix column by column
    jac = np.vstack([np.r_[frames.ecef_to_teme(u[:3], u[3:], unix_s)] for u in unit]).T
    cart = jac @ rtn_to_inertial(o.cov_rtn, o.position_m, o.velocity_ms) @ jac.T
    if dcp is not None:
        g = jac @ np.kron(np.eye(2), rtn_basis(o.position_m, o.velocity_ms)) @ dcp.rtn
        dcp = Dcp(dcp.sigma, np.kron(np.eye(2), rtn_basis(r, v)).T @ g)
    return r, v, inertial_to_rtn(cart, r, v), dcp


def pc_from_cdm(cdm: Cdm, hbr_m: float | None = None, *, check_validity: bool = True,
                cross_correlation: bool = True, **kwargs) -> Pc2DResult:
    """2-D Pc (:func:`sda.orbit.pair_covariance.pc2d_pair`) from the states, RTN covariances and DCP terms as
    written in the CDM (CARA's "Pc2D_NoAdj": no re-search of the TCA; with both objects' DCP terms and
    ``cross_correlation``, CARA's covariance cross-correlation correction). ``hbr_m`` overrides the CDM's HBR
    comment. States in an inertial REF_FRAME or in ITRF (module docstring)."""
    hbr = hbr_m if hbr_m is not None else cdm.hbr_m
    if hbr is None:
        raise CdmError("no hard-body radius in the CDM (COMMENT HBR = ...); pass hbr_m")
    t = cdm.tca.timestamp()
    (r1, v1, cov1, dcp1), (r2, v2, cov2, dcp2) = (_inertial(o, t) for o in cdm.objects)
    if not cross_correlation:
        dcp1 = dcp2 = None
    return pc2d_pair(r1, v1, cov1, r2, v2, cov2, hbr, dcp1, dcp2, check_validity=check_validity, **kwargs)
