"""CCSDS TDM measurements (bronze ``tdm_messages``, see :mod:`sda.transforms.tdm_read`) -> the envelope's wire values.

normalize's half. :func:`interpret` is plain Python: one bronze payload (a segment's data lines at one
epoch, with the segment's metadata) -> the wire values of one observation, in the units of the
project's own formats (km, deg, hours, km/s) and with the kind of envelope it fills, or the reason it
cannot be represented. :func:`parse` runs it on Spark (``mapInArrow``) in the parsed-record contract
of :mod:`sda.transforms.wire`. Conventions (CCSDS 503.0-B-2):

* TIME_SYSTEM: UTC, TAI, GPS and TT; an epoch in TAI, GPS or TT is converted to UTC with TAI - UTC
  from ERFA's leap-second table (:func:`sda.orbit.times.utc_ns_from_scale`; GPS = TAI - 19 s,
  TT = TAI + 32.184 s). Any other (UT1, TDB, TCB, MET, SCLK, ...) is refused, naming it.
* PATH: one-way ``a,b`` (the receiver ``b`` measured; ``a`` is the object) or two-way ``a,b,a``
  (``a`` transmitted and received). Relayed or multi-leg paths, PATH_1/PATH_2 (single differences)
  and a missing PATH are refused.
* PARTICIPANT_n: the measuring participant is a registry sensor, by its ``sensor_id`` or another name
  the registry knows it by (:func:`sda.orbit.sensors.sensor_aliases`: ``AN/FPS-85``, ``Cape Cod``, ...);
  a name it does not know is kept as written and refused by normalize's registry check. The other is
  the tracked object: a NORAD catalogue number (``25544``, ``NORAD 25544`` or ``NORAD-25544``), or a
  name or international designator (``1998-067A``) the catalogue knows (``objects``, from gold
  ``catalog``: :func:`object_aliases`), else refused; a name two catalogue objects share is refused
  as ambiguous. Names compare as :func:`sda.orbit.sensors.name_key` (case and punctuation aside).
* ANGLE_TYPE AZEL: ANGLE_1 azimuth, ANGLE_2 elevation (deg) with RANGE at the same epoch -> a radar
  observation (DOPPLER_INSTANTANEOUS, when present, its range-rate in km/s). RADEC: ANGLE_1 right
  ascension, ANGLE_2 declination (deg) -> an optical observation; REFERENCE_FRAME EME2000, ICRF or
  GCRF (ICRF's axes; the 23 mas frame bias to EME2000 is below the optical noise) is rotated to the
  pipeline's TEME of date (IAU 2006/2000A, no EOP: :mod:`sda.orbit.inertial`), TEME is taken as it
  is, any other (TOD, the ITRFs, ...) is refused, naming it.
  XEYN, XSYE, angles without a range under AZEL, a range or Doppler without angles, and range or
  Doppler under RADEC (the optical envelope has no range) are refused.
* RANGE_UNITS km (the default): the sensor-object range. ``s``: the light time along the whole
  path, so the range is c t / 2 on a two-way path and c t on a one-way one. The standard leaves it to
  the interface control document whether a two-way range in seconds is the round-trip light time or
  half of it (CCSDS 503.0-B-1 section 3.5.2.6, as amended in 2010; kept in 503.0-B-2's RANGE); the
  round trip is implemented, as the keyword's name and the TDMs of the DSN read. ``RU``, range units,
  is the ranging system's own unit: its length follows the transmit frequency (for the DSN, the uplink
  band and the frequency ramped over the light time) and the standard defines no conversion, so a
  range in RU is refused per measurement, saying so. RANGE_MODULUS greater than 0 and under
  100,000 km leaves the range ambiguous: refused.
* Light time: the envelope's event time is the instant the measurement models take it as
  (``settings.light_time``, :mod:`sda.orbit.estimation.measurements`). Without light time modelled, a
  radar measurement is the geometry at one instant, the reflection: a two-way measurement time-tagged at
  RECEIVE (the default TIMETAG_REF) is moved to epoch - range/c, one tagged at TRANSMIT to epoch +
  range/c. With it modelled (``light_time``), the event time is the reception, as the project's own radar
  format reports it: RECEIVE kept, TRANSMIT moved to epoch + 2 range/c. Optical epochs are kept as
  written (the exposure: the models put the object one light time before it when ``light_time``).
* CORRECTION_RANGE / _ANGLE_1 / _ANGLE_2 / _DOPPLER with CORRECTIONS_APPLIED = NO are added to the
  values (the standard's sign: "to be added"); with YES they were applied already. Non-zero
  TRANSMIT_DELAY_n / RECEIVE_DELAY_n on a range and DATA_QUALITY = DEGRADED are refused. Other data
  keywords (DOPPLER_INTEGRATED -- an average over an interval, not the envelope's instantaneous
  range-rate --, frequencies, MAG, RCS, clock, meteorology, ...) stay in bronze and are not carried;
  a measurement with none of the keywords above is refused.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sda.orbit import inertial, times
from sda.orbit.sensors import name_key, sensor_aliases

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

C_KM_S = 299_792.458
MAX_RANGE_KM = 100_000.0  # the envelope's physical limit (sda.transforms.envelope.MAX_RANGE_KM)
EPOCH_RE = re.compile(r"^(\d{4})-(?:(\d{2})-(\d{2})|(\d{3}))T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9})\d*)?Z?$")
NORAD_RE = re.compile(r"^(?:NORAD[ _-]?)?(\d{1,9})$", re.IGNORECASE)
MEASURED = ("RANGE", "ANGLE_1", "ANGLE_2", "DOPPLER_INSTANTANEOUS")
INERTIAL_FRAMES = ("EME2000", "ICRF", "GCRF")
TIME_SYSTEMS = ("UTC", *times.SCALE_MINUS_TAI_NS)
WIRE = ("range_km", "az_deg", "el_deg", "rr_km_s", "ra_hours", "dec_deg")


class Refused(ValueError):
    """A measurement the envelope cannot represent, with why."""


def epoch_ns(text: str) -> int:
    """A TDM epoch (``YYYY-MM-DDThh:mm:ss[.f]`` or day-of-year ``YYYY-DDDThh:mm:ss[.f]``, UTC) -> unix
    nanoseconds (digits beyond nanoseconds are dropped)."""
    m = EPOCH_RE.match(text.strip())
    if not m:
        raise Refused(f"epoch {text!r} is not a CCSDS time")
    year, month, day, doy, hh, mi, ss, frac = m.groups()
    try:
        if doy is not None:
            date = dt.date(int(year), 1, 1) + dt.timedelta(days=int(doy) - 1)
            if date.year != int(year):
                raise ValueError("day of year out of range")
        else:
            date = dt.date(int(year), int(month), int(day))
        if int(hh) > 23 or int(mi) > 59 or int(ss) > 59:
            raise ValueError("time of day out of range (a leap second is not supported)")
    except ValueError as exc:
        raise Refused(f"epoch {text!r}: {exc}") from None
    days = (date - dt.date(1970, 1, 1)).days
    seconds = days * 86400 + int(hh) * 3600 + int(mi) * 60 + int(ss)
    return seconds * 1_000_000_000 + int((frac or "0").ljust(9, "0"))


def _number(keyword: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise Refused(f"{keyword} value {text!r} is not a number") from None
    if not math.isfinite(value):
        raise Refused(f"{keyword} value {text!r} is not finite")
    return value


def _meta_number(meta: dict[str, str], key: str) -> float:
    return _number(key, meta[key]) if meta.get(key, "").strip() else 0.0


_sensor_aliases = functools.cache(sensor_aliases)  # the embedded registry's, once per process


def object_aliases(catalog: Iterable[tuple[int, str | None, str | None]]) -> dict[str, int | None]:
    """Catalogue rows (NORAD number, name, TLE line 1) -> :func:`~sda.orbit.sensors.name_key` of each
    name and international designator (line 1 columns 10-17, ``98067A`` -> ``1998-067A``) -> the
    NORAD number; a key two objects share -> None (ambiguous)."""
    out: dict[str, int | None] = {}
    for norad, name, line1 in catalog:
        keys = [name_key(name)] if name else []
        designator = (line1 or "")[9:17].strip()
        if re.fullmatch(r"\d{5}[A-Z]{1,3}", designator):
            year = int(designator[:2])
            keys.append(name_key(f"{1900 + year if year >= 57 else 2000 + year}-{designator[2:]}"))
        for key in filter(None, keys):
            out[key] = int(norad) if out.get(key, int(norad)) == int(norad) else None
    return out


def _object_number(meta: dict[str, str], n: int, objects: Mapping[str, int | None]) -> int:
    name = meta[f"PARTICIPANT_{n}"].strip()
    m = NORAD_RE.match(name)
    if m:
        return int(m.group(1))
    key = name_key(name)
    if key in objects and objects[key] is None:
        raise Refused(f"PARTICIPANT_{n} {name!r} (the tracked object) names more than one catalogue object")
    if key not in objects:
        raise Refused(f"PARTICIPANT_{n} {name!r} (the tracked object) is not a NORAD catalogue number, nor a name "
                      "or international designator the catalogue knows")
    return int(objects[key])


def roles(meta: dict[str, str], objects: Mapping[str, int | None] | None = None) -> tuple[str, int, int]:
    """(sensor id -- the participant's name as written where the registry knows no such name --, object
    NORAD number, number of legs) from PARTICIPANT_n and PATH; ``objects``: :func:`object_aliases`."""
    if "PATH_1" in meta or "PATH_2" in meta:
        raise Refused(f"MODE {meta.get('MODE', 'SINGLE_DIFF')} with PATH_1/PATH_2 (differenced data) is not supported")
    if not meta.get("PATH"):
        raise Refused("no PATH: which participant measured is not declared")
    try:
        path = [int(p) for p in meta["PATH"].split(",")]
    except ValueError:
        raise Refused(f"PATH {meta['PATH']!r} is not a list of participant numbers") from None
    if len(path) == 2 and path[0] != path[1]:
        obj, sensor = path
    elif len(path) == 3 and path[0] == path[2] and path[0] != path[1]:
        sensor, obj = path[0], path[1]
    else:
        raise Refused(f"PATH {meta['PATH']}: only one-way (a,b) and two-way (a,b,a) paths are supported, "
                      "not relays or more legs")
    names = {n: meta.get(f"PARTICIPANT_{n}", "").strip() for n in (sensor, obj)}
    for n, name in names.items():
        if not name:
            raise Refused(f"PATH {meta['PATH']} names participant {n}, but PARTICIPANT_{n} is not given")
    norad = _object_number(meta, obj, objects or {})
    return _sensor_aliases().get(name_key(names[sensor])) or names[sensor], norad, len(path) - 1


def _check_conventions(meta: dict[str, str], values: dict[str, float]) -> None:
    system = meta.get("TIME_SYSTEM", "").strip().upper()
    if system not in TIME_SYSTEMS:
        raise Refused(f"TIME_SYSTEM {system or '(none)'} is not supported: {', '.join(TIME_SYSTEMS)} are")
    if meta.get("DATA_QUALITY", "").strip().upper() == "DEGRADED":
        raise Refused("DATA_QUALITY DEGRADED: the sender marks these data as degraded")
    if "RANGE" in values:
        for key in sorted(meta):
            if re.fullmatch(r"(TRANSMIT|RECEIVE)_DELAY_\d", key) and _meta_number(meta, key) != 0.0:
                raise Refused(f"{key} = {meta[key]} s: station delays are not applied to ranges here")


def _gather(lines: list[list]) -> dict[str, float]:
    values: dict[str, float] = {}
    ignored = []
    for _, keyword, _, text in lines:
        if keyword not in MEASURED:  # DOPPLER_INTEGRATED too: the envelope's range-rate is instantaneous
            ignored.append(keyword)
            continue
        if keyword in values:
            raise Refused(f"two {keyword} values at one epoch")
        values[keyword] = _number(keyword, text)
    if not values:
        raise Refused(f"no measurement the observation envelope carries (keywords: {', '.join(sorted(set(ignored)))})")
    return values


def _corrected(meta: dict[str, str], values: dict[str, float]) -> dict[str, float]:
    if meta.get("CORRECTIONS_APPLIED", "").strip().upper() != "NO":
        return values
    names = {"RANGE": "CORRECTION_RANGE", "ANGLE_1": "CORRECTION_ANGLE_1", "ANGLE_2": "CORRECTION_ANGLE_2",
             "DOPPLER_INSTANTANEOUS": "CORRECTION_DOPPLER"}
    return {k: v + _meta_number(meta, names[k]) for k, v in values.items()}


def range_km(meta: dict[str, str], value: float, legs: int) -> float:
    """A RANGE value in RANGE_UNITS -> the sensor-object range (km)."""
    units = (meta.get("RANGE_UNITS") or "km").strip()
    if units == "km":
        km, modulus = value, _meta_number(meta, "RANGE_MODULUS")
    elif units == "s":
        km, modulus = C_KM_S * value / legs, C_KM_S * _meta_number(meta, "RANGE_MODULUS") / legs
    elif units == "RU":
        raise Refused("RANGE_UNITS RU is not supported: range units are the ranging system's own, their length "
                      "follows the transmit frequency, and the standard defines no conversion to km")
    else:
        raise Refused(f"RANGE_UNITS {units} is not supported: km and s are")
    if 0.0 < modulus < MAX_RANGE_KM:
        raise Refused(f"RANGE_MODULUS {meta['RANGE_MODULUS']} {units}: the range is ambiguous modulo {modulus:.3f} km")
    return km


def _radar(meta: dict[str, str], v: dict[str, float], legs: int, epoch: int,
           light_time: bool = False) -> tuple[dict[str, float], int]:
    if "RANGE" not in v:
        raise Refused("AZEL angles without a RANGE at the same epoch: the envelope has no angles-only az/el")
    if "ANGLE_1" not in v or "ANGLE_2" not in v:
        raise Refused("RANGE without both ANGLE_1 and ANGLE_2 at the same epoch: the envelope has no range-only "
                      "measurement")
    rng = range_km(meta, v["RANGE"], legs)
    out = {"range_km": rng, "az_deg": v["ANGLE_1"] % 360.0, "el_deg": v["ANGLE_2"],
           "rr_km_s": v.get("DOPPLER_INSTANTANEOUS")}
    if legs == 2:  # the reflection (reception with light_time): half the round trip before reception
        tag = (meta.get("TIMETAG_REF") or "RECEIVE").strip().upper()
        shift = round(rng / C_KM_S * 1e9)
        if light_time:
            epoch = epoch if tag == "RECEIVE" else epoch + 2 * shift
        else:
            epoch = epoch - shift if tag == "RECEIVE" else epoch + shift
    return out, epoch


def teme_from_inertial(ra_deg: float, dec_deg: float, epoch: int, inverse: bool = False) -> tuple[float, float]:
    """EME2000 right ascension and declination (deg) -> TEME of date (deg) at unix ns ``epoch``
    (``inverse``: TEME of date -> EME2000). :mod:`sda.orbit.inertial`: no process-wide state, so the
    simulator writing a file and a Spark worker reading it rotate alike whatever ran before."""
    return inertial.rotate_radec(ra_deg, dec_deg, epoch, inverse)


def _optical(meta: dict[str, str], v: dict[str, float], epoch: int) -> dict[str, float]:
    if "RANGE" in v or "DOPPLER_INSTANTANEOUS" in v:
        raise Refused("RANGE or DOPPLER_INSTANTANEOUS with RADEC angles: the optical envelope has no range")
    if "ANGLE_1" not in v or "ANGLE_2" not in v:
        raise Refused("RADEC needs both ANGLE_1 and ANGLE_2 at the same epoch")
    frame = (meta.get("REFERENCE_FRAME") or "").strip().upper()
    ra, dec = v["ANGLE_1"] % 360.0, v["ANGLE_2"]
    if frame not in (*INERTIAL_FRAMES, "TEME"):
        raise Refused(f"RADEC in REFERENCE_FRAME {frame or '(none)'}: supported are EME2000, ICRF, GCRF and TEME")
    if frame != "TEME":
        ra, dec = teme_from_inertial(ra, dec, epoch)
    return {"ra_hours": ra / 15.0, "dec_deg": dec}


def _utc_epoch(meta: dict[str, str], text: str) -> int:
    """A data line's epoch in the segment's TIME_SYSTEM -> UTC unix ns."""
    epoch, system = epoch_ns(text), meta.get("TIME_SYSTEM", "").strip().upper()
    if system == "UTC":
        return epoch
    try:
        return times.utc_ns_from_scale(epoch, system)
    except ValueError as exc:
        raise Refused(f"epoch {text!r} in {system}: {exc}") from None


def _measurement(meta: dict[str, str], lines: list[list], legs: int,
                 light_time: bool = False) -> tuple[dict[str, Any], str, int]:
    """(wire values, envelope kind, epoch in unix ns) of one measurement's data lines on a path of ``legs``
    legs, or :class:`Refused`."""
    values = _gather(lines)
    _check_conventions(meta, values)
    values = _corrected(meta, values)
    epoch = _utc_epoch(meta, lines[0][2])
    angle_type = (meta.get("ANGLE_TYPE") or "").strip().upper()
    angles = {"ANGLE_1", "ANGLE_2"} & values.keys()
    if angle_type == "RADEC":
        return _optical(meta, values, epoch), "optical", epoch
    if angle_type == "AZEL" or not (angle_type or angles):
        wire_values, epoch = _radar(meta, values, legs, epoch, light_time)
        return wire_values, "radar", epoch
    if not angle_type:
        raise Refused("ANGLE_1/ANGLE_2 without an ANGLE_TYPE")
    raise Refused(f"ANGLE_TYPE {angle_type} is not supported: AZEL and RADEC are")


def interpret(payload: str, objects: Mapping[str, int | None] | None = None,
              light_time: bool = False) -> dict[str, Any]:
    """One bronze TDM payload -> ``sensor_id``, ``sensor_kind`` (radar | optical; ``tdm`` when refused),
    ``norad_id``, ``event_time`` (aware UTC datetime, microseconds), the wire values and ``parse_error``.
    ``objects``: the catalogue's names (:func:`object_aliases`) a tracked object may be given by; ``light_time``:
    whether the models take light time into account (the event time is then the reception; module docstring)."""
    out: dict[str, Any] = {"sensor_id": None, "sensor_kind": "tdm", "norad_id": None, "event_time": None,
                           **dict.fromkeys(WIRE), "parse_error": None}
    try:
        record = json.loads(payload)
        meta, lines = record["metadata"], record["lines"]
        where = f"TDM line {int(lines[0][0]) + 1}"
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        out["parse_error"] = f"unparseable TDM record ({type(exc).__name__}: {exc})"
        return out
    try:
        out["sensor_id"], out["norad_id"], legs = roles(meta, objects)
        wire_values, kind, epoch = _measurement(meta, lines, legs, light_time)
    except Refused as exc:
        out["parse_error"] = f"{where}: {exc}"
        return out
    except (ValueError, KeyError, TypeError, IndexError, ArithmeticError) as exc:  # never fail the Spark task
        out["parse_error"] = f"{where}: unparseable TDM record ({type(exc).__name__}: {exc})"
        return out
    micros = (epoch + 500) // 1000
    out.update(wire_values, sensor_kind=kind,
               event_time=dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=micros))
    return out


_LINEAGE = ("bronze_id", "source_file", "record_no", "payload", "ingest_time", "ingest_batch")


def _interpret_batches(batches, objects: Mapping[str, int | None] | None = None, light_time: bool = False):
    import pyarrow as pa

    for batch in batches:
        cols = {name: batch.column(name) for name in _LINEAGE}
        rows = [interpret(p, objects, light_time) for p in cols["payload"].to_pylist()]
        out = {name: cols[name] for name in _LINEAGE}
        out["item_no"] = pa.nulls(len(rows), pa.int64())
        out["sensor_kind"] = pa.array([r["sensor_kind"] for r in rows], pa.string())
        out["sensor_id"] = pa.array([r["sensor_id"] for r in rows], pa.string())
        out["event_time"] = pa.array([r["event_time"] for r in rows], pa.timestamp("us", tz="UTC"))
        for name in WIRE:
            out[name] = pa.array([r[name] for r in rows], pa.float64())
        out["parse_error"] = pa.array([r["parse_error"] for r in rows], pa.string())
        yield pa.RecordBatch.from_pydict(out)


def parse(bronze: "DataFrame", objects: Mapping[str, int | None] | None = None,
          light_time: bool = False) -> "DataFrame":
    """``tdm_messages`` rows -> one parsed measurement each (lineage, ``item_no`` null, the kind of
    envelope it fills, ``sensor_id``, ``event_time``, wire values, ``parse_error``); ``objects``: the
    catalogue's names (:func:`object_aliases`), shipped with the function to the workers."""
    schema = ("bronze_id string, source_file string, record_no long, payload string, ingest_time timestamp, "
              "ingest_batch long, item_no long, sensor_kind string, sensor_id string, event_time timestamp, "
              + ", ".join(f"{name} double" for name in WIRE) + ", parse_error string")
    return bronze.select(*_LINEAGE).mapInArrow(
        functools.partial(_interpret_batches, objects=dict(objects or {}), light_time=light_time), schema)
