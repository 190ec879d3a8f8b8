"""The catalogue out: CCSDS OMM (mean elements, KVN and XML) and OEM (ephemerides with covariance).

What is exported comes from an :class:`OrbitSource`, which implements two methods: ``element_sets``
(what an OMM says) and ``ephemeris`` (states and, where one exists, covariance at given times). Here
:class:`TleSource` -- the newest element set per object of ``gold.catalog`` (SGP4 mean elements in TEME),
its covariance the screening's own growth model (:mod:`sda.orbit.uncertainty`, diagonal in RTN);
:class:`sda.orbit.fusion.source.FusedSource` puts the fused orbits in front of it. What a source says about
where an orbit comes from goes into the message as COMMENT lines.

An OEM declares how to interpolate between its states: LAGRANGE of :data:`INTERPOLATION_DEGREE` 7 (eight
neighbouring states), which reproduces the source's own propagation between states of a 60 s step
(``sda export``'s default) to well under a millimetre in LEO, and within 1 m up to steps of about
:data:`MAX_STEP_1M_S` seconds (tests/include/pipeline/test_ndm_export.py).

Every message is written as KVN text here and then read, validated and (for XML) re-written by
``ccsds-ndm`` (CCSDS 502.0-B-3): a file this module writes is one the parser accepts. The OMM's
values are the TLE's own columns as written (no conversion through floating point): an OMM read back
gives the same numbers, and SGP4 initialised from it gives the same element set.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Protocol

import numpy as np

ORIGINATOR = "SDA-FUSION"
INTERPOLATION = "LAGRANGE"
INTERPOLATION_DEGREE = 7
#: the largest OEM step (s) at which a LEO orbit's declared interpolation stays within 1 m of it at mid-step
MAX_STEP_1M_S = 180.0


@dataclasses.dataclass(frozen=True)
class ElementSet:
    """One object's SGP4 element set as the OMM states it (text as in the TLE, decimal points restored)."""
    norad_id: int
    name: str
    object_id: str  # international designator, YYYY-NNNP
    epoch: str  # ISO-8601 UTC, microseconds
    fields: dict[str, str]  # OMM keyword -> value text
    comments: tuple[str, ...] = ()  # where the element set comes from


@dataclasses.dataclass(frozen=True)
class Ephemeris:
    """States (TEME, km and km/s) at ``times`` (aware UTC) and, where one exists, 6x6 RTN covariances (km, km/s)."""
    norad_id: int
    name: str
    object_id: str
    times: list[dt.datetime]
    r_km: np.ndarray  # [n, 3]
    v_km_s: np.ndarray  # [n, 3]
    cov_rtn: np.ndarray | None  # [n, 6, 6] or None
    comments: tuple[str, ...] = ()  # where the states come from


class OrbitSource(Protocol):
    def element_sets(self) -> list[ElementSet]: ...

    def ephemeris(self, norad_id: int, times: Sequence[dt.datetime]) -> Ephemeris: ...


# --- TLE columns -> OMM values -------------------------------------------------------------------------

def _implied(text: str) -> str:
    """A TLE field with an assumed decimal point and exponent (`` 34123-3``) -> ``0.34123e-3`` text."""
    text = text.strip()
    if not text:
        return "0"
    sign = "-" if text[0] == "-" else ""
    body = text.lstrip("+-")
    mantissa, exponent = body[:-2], body[-2:]
    return f"{sign}0.{mantissa}e{int(exponent)}"


def _decimal(text: str) -> str:
    """`` .00001234`` / ``-.00001234`` -> ``0.00001234`` / ``-0.00001234``."""
    text = text.strip()
    sign = "-" if text.startswith("-") else ""
    body = text.lstrip("+-")
    return sign + ("0" + body if body.startswith(".") else body)


def tle_epoch(line1: str) -> dt.datetime:
    year = int(line1[18:20])
    year += 1900 if year >= 57 else 2000
    day = float(line1[20:32])
    micros = round((day - 1.0) * 86_400_000_000)
    return dt.datetime(year, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=micros)


def object_id(line1: str) -> str:
    """The TLE's international designator (``98067A``) as the OMM's OBJECT_ID (``1998-067A``)."""
    text = line1[9:17].strip()
    if len(text) < 5 or not text[:5].isdigit():
        return "UNKNOWN"
    year = int(text[:2])
    return f"{1900 + year if year >= 57 else 2000 + year}-{text[2:5]}{text[5:]}"


def element_set(norad_id: int, name: str, line1: str, line2: str) -> ElementSet:
    """A TLE -> the OMM's mean elements and TLE parameters (CCSDS 502.0-B-3 table 4-4), text kept."""
    fields = {
        "MEAN_MOTION": line2[52:63].strip(),
        "ECCENTRICITY": "0." + line2[26:33].strip(),
        "INCLINATION": line2[8:16].strip(),
        "RA_OF_ASC_NODE": line2[17:25].strip(),
        "ARG_OF_PERICENTER": line2[34:42].strip(),
        "MEAN_ANOMALY": line2[43:51].strip(),
        "EPHEMERIS_TYPE": line1[62].strip() or "0",
        "CLASSIFICATION_TYPE": line1[7].strip() or "U",
        "NORAD_CAT_ID": str(norad_id),
        "ELEMENT_SET_NO": str(int(line1[64:68].strip() or 0)),
        "REV_AT_EPOCH": str(int(line2[63:68].strip() or 0)),
        "BSTAR": _implied(line1[53:61]),
        "MEAN_MOTION_DOT": _decimal(line1[33:43]),
        "MEAN_MOTION_DDOT": _implied(line1[44:52]),
    }
    epoch = tle_epoch(line1).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return ElementSet(norad_id, name or str(norad_id), object_id(line1), epoch, fields)


def _header(kind: str, created: dt.datetime) -> list[str]:
    return [f"CCSDS_{kind}_VERS = {'3.0' if kind == 'OMM' else '2.0'}",
            f"CREATION_DATE = {created.astimezone(dt.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S')}",
            f"ORIGINATOR = {ORIGINATOR}"]


def omm_kvn(es: ElementSet, created: dt.datetime) -> str:
    header = _header("OMM", created)  # the comments in the header: KVN has no marker for the OMM's metadata
    lines = header[:1] + [f"COMMENT {c}" for c in es.comments] + header[1:] + [
        f"OBJECT_NAME = {es.name}", f"OBJECT_ID = {es.object_id}", "CENTER_NAME = EARTH", "REF_FRAME = TEME",
        "TIME_SYSTEM = UTC", "MEAN_ELEMENT_THEORY = SGP4", f"EPOCH = {es.epoch}",
    ]
    lines += [f"{key} = {value}" for key, value in es.fields.items()]
    return "\n".join(lines) + "\n"


def write_omm(es: ElementSet, fmt: str, created: dt.datetime) -> str:
    """One object's OMM, ``fmt`` kvn or xml, validated by ccsds-ndm (raises ValueError if it refuses)."""
    import ccsds_ndm

    text = omm_kvn(es, created)
    message = ccsds_ndm.Omm.from_str(text, "kvn")  # the parser's check of what is written
    message.validate()
    return text if fmt == "kvn" else message.to_str("xml")


# --- OEM ------------------------------------------------------------------------------------------------

def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")


def _number(x: float) -> str:
    return repr(float(x))


def oem_kvn(eph: Ephemeris, created: dt.datetime) -> str:
    """An OEM (one segment): states in TEME, covariance (where given) in RTN, km and km/s; interpolation
    LAGRANGE of degree :data:`INTERPOLATION_DEGREE` (lower when there are fewer states)."""
    degree = min(INTERPOLATION_DEGREE, len(eph.times) - 1)
    lines = _header("OEM", created) + ["META_START"] + [f"COMMENT {c}" for c in eph.comments] + [
        f"OBJECT_NAME = {eph.name}", f"OBJECT_ID = {eph.object_id}", "CENTER_NAME = EARTH",
        "REF_FRAME = TEME", "TIME_SYSTEM = UTC", f"START_TIME = {_iso(eph.times[0])}",
        f"STOP_TIME = {_iso(eph.times[-1])}",
    ]
    if degree >= 1:
        lines += [f"INTERPOLATION = {INTERPOLATION}", f"INTERPOLATION_DEGREE = {degree}"]
    lines.append("META_STOP")
    for t, r, v in zip(eph.times, eph.r_km, eph.v_km_s):
        lines.append(" ".join([_iso(t), *(_number(x) for x in (*r, *v))]))
    if eph.cov_rtn is not None:
        lines.append("COVARIANCE_START")
        for t, cov in zip(eph.times, eph.cov_rtn):
            lines += [f"EPOCH = {_iso(t)}", "COV_REF_FRAME = RTN"]
            lines += [" ".join(_number(cov[i, j]) for j in range(i + 1)) for i in range(6)]
        lines.append("COVARIANCE_STOP")
    return "\n".join(lines) + "\n"


def write_oem(eph: Ephemeris, fmt: str, created: dt.datetime) -> str:
    import ccsds_ndm

    text = oem_kvn(eph, created)
    message = ccsds_ndm.Oem.from_str(text, "kvn")
    message.validate()
    return text if fmt == "kvn" else message.to_str("xml")


# --- the catalogue's element sets -------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class CatalogRow:
    norad_id: int
    name: str | None
    line1: str
    line2: str
    perigee_km: float
    apogee_km: float


class TleSource:
    """The newest element set per object (``rows``, e.g. from gold.catalog), propagated with SGP4; the
    covariance is the screening's growth model from the element set's epoch (:mod:`sda.orbit.uncertainty`)."""

    def __init__(self, rows: Sequence[CatalogRow]):
        self.rows = {r.norad_id: r for r in rows}

    def element_sets(self) -> list[ElementSet]:
        return [dataclasses.replace(element_set(r.norad_id, r.name or "", r.line1, r.line2),
                                    comments=("element set: the catalogue's newest for this object",))
                for _, r in sorted(self.rows.items())]

    def ephemeris(self, norad_id: int, times: Sequence[dt.datetime]) -> Ephemeris:
        from sgp4.api import Satrec

        from sda.orbit import uncertainty

        row = self.rows[norad_id]
        sat = Satrec.twoline2rv(row.line1, row.line2)
        r, v = [], []
        for t in times:
            jd, fr = _julian(t)
            err, ri, vi = sat.sgp4(jd, fr)
            if err:
                raise ValueError(f"SGP4 error {err} for {norad_id} at {_iso(t)}")
            r.append(ri)
            v.append(vi)
        r_km, v_km = np.array(r), np.array(v)
        ref = uncertainty.tle_reference(tle_epoch(row.line1), row.perigee_km, row.apogee_km)
        scale = np.array([1e-3] * 3 + [1e-3] * 3)  # m, m/s -> km, km/s
        cov = np.array([uncertainty.covariance_rtn6(ref, t, ri * 1000.0) * np.outer(scale, scale)
                        for t, ri in zip(times, r_km)])
        es = element_set(norad_id, row.name or "", row.line1, row.line2)
        return Ephemeris(norad_id, es.name, es.object_id, list(times), r_km, v_km, cov, (
            f"states: SGP4 on the catalogue's element set of epoch {es.epoch}; covariance: the screening's "
            "growth model from that epoch (sda.orbit.uncertainty), diagonal in RTN",))


def _julian(t: dt.datetime) -> tuple[float, float]:
    from sgp4.api import jday

    t = t.astimezone(dt.timezone.utc)
    return jday(t.year, t.month, t.day, t.hour, t.minute, t.second + t.microsecond / 1e6)


def times_between(start: dt.datetime, stop: dt.datetime, step_s: float) -> list[dt.datetime]:
    if not step_s > 0 or stop < start:
        raise ValueError("need start <= stop and a positive step")
    n = int((stop - start).total_seconds() // step_s)
    return [start + dt.timedelta(seconds=i * step_s) for i in range(n + 1)]
