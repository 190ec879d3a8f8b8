"""Sensor simulator: radar, optical and ISL files in the landing zone, with realistic disorder and a
ground-truth file that says what every record is.

Usage::

    python -m sda.simulate --start 2026-11-21T06:00:00Z --end 2026-11-21T06:30:00Z \\
        [--landing DIR] [--catalog FILE | --objects 300] [--catalog-out FILE] [--max-objects N] \\
        [--sensors FILE] [--seed 1] [--clean | --dup-rate R --reprocess-rate R --late-rate R \\
        --malformed-rate R --impossible-rate R --unknown-sensor-rate R --reorder-rate R] \\
        [--inject-conjunction [--tca ISO] [--miss-m 150]] [--radar-cadence 10]

Geometry comes from :mod:`sda.frames` (SGP4 in TEME, GMST rotation to ECEF, WGS-84 sites); every
object is propagated on the union time grid of a 5-minute chunk and moved to each record's exact
event time (a few ms later) by a second-order Taylor step (error < 1 cm).

Files (``<chunk>`` is the UTC start of the 5-minute chunk of the events, ``YYYYmmddTHHMMSSZ``):

* ``radar/<SENSOR>_<chunk>_<n>.jsonl``: n=0 the regular delivery, 1 a re-delivery file (only when
  no later regular file of that sensor exists), 2 the sensor's late file (all its late frames).
  One frame per line; frames with no detection are not sent (frame numbers then skip).
* ``optical/<STATION>_<chunk>.csv`` (regular), ``..._<chunk>_1.csv`` / ``..._<chunk>_2.csv`` (as above);
  line 0 is :data:`sda.schemas.OPTICAL_HEADER`.
* ``isl/<SRC>_<chunk>.bcn`` (regular), ``..._1.bcn`` / ``..._2.bcn``.
* Unknown-sensor records are in their own files, named after the unknown sensor.

Truth, ``_truth/<sim_id>.jsonl`` (outside the kind directories), one JSON object per radar
detection / optical row / beacon / malformed line, sorted by (file, record_no, det_index)::

    {"key": "radar/EGLIN_20261121T060000Z_0.jsonl#3#1", "kind": "radar", "sensor_id": "EGLIN",
     "file": "radar/EGLIN_20261121T060000Z_0.jsonl", "record_no": 3, "det_index": 1,
     "event_time": "2026-11-21T06:00:30.004Z", "norad_id": 70012, "disorder": "none",
     "duplicate_of": null}

``record_no`` is the 0-based line number in the file (the optical header is line 0, so data rows
start at 1); ``det_index`` the detection's index in the radar frame's ``dets`` (null for optical,
ISL and malformed lines); ``key`` is ``file#record_no`` plus ``#det_index`` for radar detections;
``duplicate_of`` the ``key`` of the original for ``redelivery`` (verbatim copy in a later file) and
``reprocessed`` (same sensor, event time shifted <= 50 ms, values jittered < 0.1 sigma) records.
``norad_id`` is null for malformed and unknown-sensor records. ``disorder`` is one of
none | redelivery | reprocessed | malformed | impossible | unknown_sensor | late.

``_truth/<sim_id>.summary.json`` has counts per kind and disorder, the catalogue file used (and its
sha256), the files written and the injected conjunction (ids, TCA, designed and achieved miss).

Same arguments and seed give byte-identical files. File modification times are set from the event
times (regular files: chunk end + 30..420 s, so neighbouring files are not always in event order;
re-delivery files later; late files last) and capped at the current time.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from sgp4.api import WGS72, Satrec

from sda import catgen, frames
from sda.catalog import CatalogEntry, latest_by_object, load_catalog, parse_tle_text
from sda.schemas import LANDING_SUFFIX, OPTICAL_HEADER
from sda.sensors import Sensor, load_sensors

CHUNK_MS = 300_000
MAX_SPAN = dt.timedelta(days=7)
DISORDERS = ("none", "redelivery", "reprocessed", "malformed", "impossible", "unknown_sensor", "late")
RATE_NAMES = ("dup_rate", "reprocess_rate", "late_rate", "malformed_rate", "impossible_rate", "unknown_sensor_rate")
UNKNOWN_IDS = {"radar": "ZZ-RADAR-9", "optical": "ZZ-OPTICAL-4", "isl": "ISL-99"}
PRIMARY_ID, SECONDARY_ID = 99901, 99902
MU = catgen.MU_WGS72
OPTICAL_EXPOSURE_S = 2.0
ISL_FRACTION = 0.10


# --- configuration ----------------------------------------------------------------------------------

@dataclasses.dataclass
class SimConfig:
    start: dt.datetime
    end: dt.datetime
    landing: Path | None = None  # default: Settings().landing
    catalog: Path | None = None  # default: generate with sda.catgen
    catalog_out: Path | None = None  # default: Settings().catalog_file
    objects: int = 300
    max_objects: int | None = None
    sensors: Path | None = None
    seed: int = 1
    dup_rate: float = 0.02
    reprocess_rate: float = 0.02
    late_rate: float = 0.02
    malformed_rate: float = 0.02
    impossible_rate: float = 0.02
    unknown_sensor_rate: float = 0.02
    reorder_rate: float = 0.05
    inject_conjunction: bool = False
    tca: dt.datetime | None = None  # default: start + 2 h
    miss_m: float = 150.0
    radar_cadence_s: float = 10.0
    optical_cadence_s: float = 30.0
    isl_cadence_s: float = 60.0

    def validate(self) -> None:
        for name in ("start", "end") + (("tca",) if self.tca else ()):
            value = getattr(self, name)
            if value.tzinfo is None:
                setattr(self, name, value.replace(tzinfo=dt.timezone.utc))
        if self.end <= self.start:
            raise ValueError(f"--end {_iso(self.end)} must be after --start {_iso(self.start)}")
        if self.end - self.start > MAX_SPAN:
            raise ValueError(f"--start..--end spans {self.end - self.start}; at most {MAX_SPAN.days} days")
        for name in RATE_NAMES + ("reorder_rate",):
            value = getattr(self, name)
            if not 0.0 <= value <= 0.5:
                raise ValueError(f"--{name.replace('_', '-')} {value}: expected a fraction in [0, 0.5]")
        if not 1 <= self.objects <= catgen.MAX_ID - catgen.FIRST_ID + 1:
            raise ValueError(f"--objects {self.objects}: expected 1..{catgen.MAX_ID - catgen.FIRST_ID + 1}")
        if self.max_objects is not None and self.max_objects < 1:
            raise ValueError(f"--max-objects {self.max_objects}: expected at least 1")
        if not 0.0 < self.miss_m <= 5000.0:
            raise ValueError(f"--miss-m {self.miss_m}: expected a distance in (0, 5000] m")
        for name in ("radar_cadence_s", "optical_cadence_s", "isl_cadence_s"):
            value = getattr(self, name)
            if not 0.1 <= value <= 3600.0:
                raise ValueError(f"{name}={value}: expected 0.1..3600 s")
        if self.tca is not None and abs(self.tca - self.start) > MAX_SPAN:
            raise ValueError(f"--tca {_iso(self.tca)} is more than {MAX_SPAN.days} days from --start")


@dataclasses.dataclass
class SimulationResult:
    sim_id: str
    landing: Path
    truth_file: Path
    summary_file: Path
    catalog_file: Path
    files: list[str]  # relative to the landing root
    counts: dict[str, dict[str, int]]
    injected: dict | None


# --- small helpers -------------------------------------------------------------------------------------

def _iso(value: dt.datetime) -> str:
    return value.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")


def iso_ms(t_ms: int) -> str:
    """Unix ms -> ``2026-11-21T06:00:01.250Z``."""
    sec, ms = divmod(int(t_ms), 1000)
    return dt.datetime.fromtimestamp(sec, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms:03d}Z"


def iso_us(t_ms: int) -> str:
    """Unix ms -> ``2026-11-21T06:00:01.250000Z`` (the optical archive's timestamp form)."""
    sec, ms = divmod(int(t_ms), 1000)
    return dt.datetime.fromtimestamp(sec, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms:03d}000Z"


def chunk_label(chunk_ms: int) -> str:
    return dt.datetime.fromtimestamp(chunk_ms // 1000, dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _hash_int(*parts) -> int:
    return int(hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()[:12], 16)


def parse_time(text: str) -> dt.datetime:
    """ISO-8601 -> aware UTC datetime (``Z`` accepted; naive means UTC)."""
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO-8601 time such as 2026-11-21T06:00:00Z") from None
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)


# --- records and truth ----------------------------------------------------------------------------------

@dataclasses.dataclass(eq=False)
class Truth:
    kind: str
    sensor_id: str
    event_ms: int | None
    norad_id: int | None
    disorder: str
    det_index: int | None = None
    duplicate_of: "Truth | None" = None
    file: str | None = None
    record_no: int | None = None

    @property
    def key(self) -> str:
        base = f"{self.file}#{self.record_no}"
        return base if self.det_index is None else f"{base}#{self.det_index}"

    def as_json(self) -> dict:
        return {
            "key": self.key, "kind": self.kind, "sensor_id": self.sensor_id, "file": self.file,
            "record_no": self.record_no, "det_index": self.det_index,
            "event_time": iso_ms(self.event_ms) if self.event_ms is not None else None,
            "norad_id": self.norad_id, "disorder": self.disorder,
            "duplicate_of": self.duplicate_of.key if self.duplicate_of is not None else None,
        }


@dataclasses.dataclass(eq=False)
class Record:
    """One line of a landing file: the bytes and the truth rows it carries."""

    kind: str
    sensor_id: str
    chunk_ms: int
    event_ms: int
    payload: bytes
    truths: list[Truth]
    data: dict | None = None  # structured content (for re-processing), None for malformed lines

    @property
    def has_impossible(self) -> bool:
        return any(t.disorder == "impossible" for t in self.truths)


# --- catalogue and conjunction ---------------------------------------------------------------------------

def rv_to_elements(r, v, mu: float = MU) -> dict:
    """Osculating Keplerian elements (degrees) from a position/velocity (km, km/s)."""
    r, v = np.asarray(r, float), np.asarray(v, float)
    rn, vn2 = np.linalg.norm(r), float(v @ v)
    h = np.cross(r, v)
    hn = np.linalg.norm(h)
    h_hat = h / hn
    node = np.cross([0.0, 0.0, 1.0], h)
    node_hat = node / np.linalg.norm(node)
    e_vec = ((vn2 - mu / rn) * r - (r @ v) * v) / mu
    ecc = float(np.linalg.norm(e_vec))
    a = 1.0 / (2.0 / rn - vn2 / mu)
    incl = math.acos(max(-1.0, min(1.0, h_hat[2])))
    raan = math.atan2(node_hat[1], node_hat[0])
    u = math.atan2(np.cross(node_hat, r) @ h_hat, node_hat @ r)  # argument of latitude
    argp = math.atan2(np.cross(node_hat, e_vec) @ h_hat, node_hat @ e_vec) if ecc > 1e-12 else 0.0
    nu = u - argp
    ecc_anom = 2.0 * math.atan2(math.sqrt(1.0 - ecc) * math.sin(nu / 2.0), math.sqrt(1.0 + ecc) * math.cos(nu / 2.0))
    mean_anom = ecc_anom - ecc * math.sin(ecc_anom)
    return dict(a_km=a, ecc=ecc, incl_deg=math.degrees(incl), raan_deg=math.degrees(raan) % 360.0,
                argp_deg=math.degrees(argp) % 360.0, mean_anom_deg=math.degrees(mean_anom) % 360.0)


def _roundtrip(sat: Satrec) -> tuple[Satrec, str, str]:
    line1, line2 = catgen.tle_lines(sat)
    return Satrec.twoline2rv(line1, line2, WGS72), line1, line2


def _sgp4_at(sat: Satrec, unix_s: float) -> tuple[np.ndarray, np.ndarray]:
    jd, fr = frames.unix_to_jd(unix_s)
    err, r, v = sat.sgp4(float(jd), float(fr))
    if err:
        raise RuntimeError(f"SGP4 error {err} for object {sat.satnum}")
    return np.array(r), np.array(v)


def closest_approach(sat1: Satrec, sat2: Satrec, around_unix: float, half_window_s: float = 60.0) -> tuple[float, float]:
    """(unix time, distance m) of the closest approach near ``around_unix``: 10 ms scan, then golden section."""
    ts = around_unix + np.arange(-half_window_s, half_window_s + 1e-9, 0.01)
    _, r, _ = frames.propagate([sat1, sat2], ts)
    d = np.linalg.norm(r[0] - r[1], axis=-1)
    i = int(np.nanargmin(d))
    lo, hi = ts[max(i - 1, 0)], ts[min(i + 1, len(ts) - 1)]

    def dist(t):
        return float(np.linalg.norm(_sgp4_at(sat1, t)[0] - _sgp4_at(sat2, t)[0]))

    g = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(40):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if dist(a) < dist(b):
            hi = b
        else:
            lo = a
    t = (lo + hi) / 2.0
    return t, dist(t) * 1000.0


def design_conjunction(tca: dt.datetime, miss_m: float, seed: int) -> dict:
    """Two objects whose SGP4 positions at ``tca`` are ``miss_m`` apart (radially) on crossing orbits.

    The primary is a circular 780 km, 98.5 deg orbit with epoch = TCA. The secondary's wanted state
    at TCA is the primary's position plus ``miss_m`` along the radial direction, with the primary's
    velocity turned about that radial by ~80-100 deg (so the relative velocity is perpendicular to the
    miss vector: TCA is at TCA). Its elements come from that state (osculating -> used as mean), and the
    input state is corrected by the SGP4 error at TCA until the error is below 1 m; every iteration
    goes through the exported TLE so what lands in the catalogue is what was designed.
    """
    rng = np.random.default_rng([seed, 2])
    tca_unix = tca.timestamp()
    epoch_jd = frames.UNIX_EPOCH_JD + tca_unix / 86400.0
    prim = catgen.make_satrec(
        PRIMARY_ID, epoch_jd, a_km=catgen.RE_WGS72 + 780.0, ecc=1.0e-4, incl_deg=98.5,
        raan_deg=float(rng.uniform(0, 360)), argp_deg=90.0, mean_anom_deg=float(rng.uniform(-60, 60)),
        bstar=5.0e-5, intldesg="99001A",
    )
    prim, p1, p2 = _roundtrip(prim)
    r1, v1 = _sgp4_at(prim, tca_unix)
    up = r1 / np.linalg.norm(r1)
    angle = math.radians(float(rng.uniform(80.0, 100.0)) * (1 if rng.random() < 0.5 else -1))
    # Rodrigues rotation of v1 about the radial unit vector
    v2_target = v1 * math.cos(angle) + np.cross(up, v1) * math.sin(angle) + up * (up @ v1) * (1 - math.cos(angle))
    r2_target = r1 + up * miss_m / 1000.0
    r_in, v_in = r2_target.copy(), v2_target.copy()
    best = None
    for _ in range(40):
        el = rv_to_elements(r_in, v_in)
        sec = catgen.make_satrec(SECONDARY_ID, epoch_jd, bstar=5.0e-5, intldesg="99001B", **el)
        sec, s1, s2 = _roundtrip(sec)
        r2, v2 = _sgp4_at(sec, tca_unix)
        dr, dv = r2 - r2_target, v2 - v2_target
        err = float(np.linalg.norm(dr))
        if best is None or err < best[0]:
            best = (err, sec, s1, s2)
        if err < 1.0e-3:
            break
        r_in, v_in = r_in - dr, v_in - dv
    err, sec, s1, s2 = best
    t_ca, achieved = closest_approach(prim, sec, tca_unix)
    rel_speed = float(np.linalg.norm(_sgp4_at(prim, t_ca)[1] - _sgp4_at(sec, t_ca)[1]) * 1000.0)
    return {
        "primary": PRIMARY_ID, "secondary": SECONDARY_ID, "tca": _iso(tca), "designed_miss_m": miss_m,
        "state_error_m": round(err * 1000.0, 3), "achieved_tca": iso_ms(int(round(t_ca * 1000))),
        "achieved_miss_m": round(achieved, 3), "rel_speed_ms": round(rel_speed, 1),
        "tle": [("CONJ-PRIMARY", p1, p2), ("CONJ-SECONDARY", s1, s2)],
        "satrecs": (prim, sec),
    }


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- measurement generation -------------------------------------------------------------------------------

class _Objects:
    def __init__(self, entries: list[CatalogEntry]):
        self.norad = np.array([e.norad_id for e in entries], dtype=np.int64)
        self.names = [e.name for e in entries]
        self.sats = [e.satrec for e in entries]
        # a deterministic radar cross-section / optical area per object
        self.rcs_db = np.array([(_hash_int("rcs", n) % 2000) / 100.0 - 10.0 for n in self.norad])
        for i, name in enumerate(self.names):
            if "DEB" in name.upper():
                self.rcs_db[i] -= 8.0
        self.area_m2 = 10.0 ** (self.rcs_db / 10.0)


def _state_at(R, V, idx, dt_s):
    """Second-order step from grid states R/V [n, g, 3] at grid columns ``idx`` by ``dt_s`` [n, k]."""
    r0, v0 = R[:, idx], V[:, idx]
    dt_ = dt_s[..., None]
    rn = np.linalg.norm(r0, axis=-1, keepdims=True)
    acc = -MU * r0 / rn**3
    return r0 + v0 * dt_ + 0.5 * acc * dt_**2, v0 + acc * dt_


def _grid(lo_ms: int, hi_ms: int, step_ms: int) -> np.ndarray:
    first = -(-lo_ms // step_ms) * step_ms
    return np.arange(first, hi_ms, step_ms, dtype=np.int64)


def _radar_records(objs, sensor, s_idx, chunk_ms, frame_ms, R, V, valid, col, rng, counters) -> list[Record]:
    n, k = len(objs.norad), len(frame_ms)
    if k == 0 or n == 0:
        return []
    off_ms = (1 + (np.arange(n) * 7 + s_idx * 3) % 12).astype(np.int64)
    t_ms = frame_ms[None, :] + off_ms[:, None]
    t_s = t_ms / 1000.0
    r, v = _state_at(R, V, col, (t_ms - frame_ms[None, :]) / 1000.0)
    r_e, v_e = frames.teme_to_ecef(r, v, t_s)
    rng_km, az, el, rr = frames.razel(r_e, v_e, sensor.lat_deg, sensor.lon_deg, sensor.alt_m)
    ok = valid[:, col] & np.isfinite(rng_km)
    vis = ok & sensor.in_field_of_regard(np.where(ok, az, 0.0), np.where(ok, el, -1.0), np.where(ok, rng_km, np.inf))
    noise = rng.standard_normal((5, n, k))
    sig_r = (sensor.sigma_range_m or 20.0) / 1000.0
    sig_a = sensor.sigma_angle_deg or 0.015
    sig_rr = (sensor.sigma_range_rate_ms or 2.0) / 1000.0
    m_rng = rng_km + sig_r * noise[0]
    m_az = np.mod(np.rad2deg(az) + sig_a * noise[1], 360.0)
    m_el = np.minimum(np.rad2deg(el) + sig_a * noise[2], 90.0)
    m_rr = rr + sig_rr * noise[3]
    snr = 20.0 + objs.rcs_db[:, None] - 40.0 * np.log10(np.maximum(rng_km, 1.0) / 1000.0) + noise[4]
    records = []
    for kk in range(k):
        idx = np.flatnonzero(vis[:, kk])
        counters[sensor.sensor_id] = counters.get(sensor.sensor_id, -1) + 1
        frame_no = counters[sensor.sensor_id]
        if idx.size == 0:
            continue
        idx = idx[np.lexsort((objs.norad[idx], t_ms[idx, kk]))]
        dets, truths = [], []
        for d, j in enumerate(idx):
            dets.append({
                "t": iso_ms(t_ms[j, kk]), "range_km": round(float(m_rng[j, kk]), 3),
                "az_deg": round(float(m_az[j, kk]), 5), "el_deg": round(float(m_el[j, kk]), 5),
                "rr_km_s": round(float(m_rr[j, kk]), 5), "snr_db": round(float(snr[j, kk]), 1),
            })
            truths.append(Truth("radar", sensor.sensor_id, int(t_ms[j, kk]), int(objs.norad[j]), "none", d))
        sent_ms = int(frame_ms[kk]) + 500 + int(rng.integers(0, 2500))
        frame = {"sensor": sensor.sensor_id, "frame": frame_no, "sent": iso_ms(sent_ms), "dets": dets}
        records.append(Record("radar", sensor.sensor_id, chunk_ms, int(frame_ms[kk]), b"", truths, frame))
    return records


def _optical_records(objs, sensor, chunk_ms, base_ms, R, V, valid, col, rng) -> list[Record]:
    n, k = len(objs.norad), len(base_ms)
    if k == 0 or n == 0:
        return []
    off_ms = (20 + (np.arange(n) * 37) % 900).astype(np.int64)
    t_ms = base_ms[None, :] + off_ms[:, None]
    t_s = t_ms / 1000.0
    r, v = _state_at(R, V, col, (t_ms - base_ms[None, :]) / 1000.0)
    ok = valid[:, col] & np.all(np.isfinite(r), axis=-1)
    r = np.where(ok[..., None], r, 1.0e5)
    v = np.where(ok[..., None], v, 0.0)
    dark = np.rad2deg(frames.sun_elevation(sensor.lat_deg, sensor.lon_deg, sensor.alt_m, t_s)) < -12.0
    if not dark.any():
        return []
    r_e, v_e = frames.teme_to_ecef(r, v, t_s)
    rng_km, az, el, _ = frames.razel(r_e, v_e, sensor.lat_deg, sensor.lon_deg, sensor.alt_m)
    sunlit = ~frames.in_earth_shadow(r, t_s)
    vis = ok & dark & sunlit & sensor.in_field_of_regard(az, el, rng_km)
    ra, dec = frames.radec(r, sensor.lat_deg, sensor.lon_deg, sensor.alt_m, t_s)
    noise = rng.standard_normal((3, n, k))
    sig = sensor.sigma_angle_deg or 0.00028
    m_dec = np.rad2deg(dec) + sig * noise[1]
    m_ra_deg = np.mod(np.rad2deg(ra) + sig * noise[0] / np.maximum(np.cos(dec), 1e-3), 360.0)
    # diffuse-sphere brightness: m = m_sun - 2.5 log10(albedo * area * F(phase) / range^2)
    rho = r - frames.site_teme(sensor.lat_deg, sensor.lon_deg, sensor.alt_m, t_s)
    rho_hat = rho / np.linalg.norm(rho, axis=-1, keepdims=True)
    sun = frames.sun_direction(t_s)
    beta = np.arccos(np.clip(np.sum(sun * -rho_hat, axis=-1), -1.0, 1.0))
    phase = 2.0 / (3.0 * np.pi**2) * ((np.pi - beta) * np.cos(beta) + np.sin(beta))
    flux = 0.2 * objs.area_m2[:, None] * np.maximum(phase, 1e-6) / (rng_km * 1000.0) ** 2
    vmag = -26.74 - 2.5 * np.log10(flux) + 0.1 * noise[2]
    records = []
    jj, kk = np.nonzero(vis)
    order = np.lexsort((objs.norad[jj], t_ms[jj, kk]))
    for j, c in zip(jj[order], kk[order]):
        row = {"station": sensor.sensor_id, "t_ms": int(t_ms[j, c]), "ra_hours": float(m_ra_deg[j, c] / 15.0),
               "dec_deg": float(m_dec[j, c]), "vmag": float(vmag[j, c]), "exposure_s": OPTICAL_EXPOSURE_S}
        truth = Truth("optical", sensor.sensor_id, int(t_ms[j, c]), int(objs.norad[j]), "none")
        records.append(Record("optical", sensor.sensor_id, chunk_ms, int(t_ms[j, c]), b"", [truth], row))
    return records


def _isl_records(objs, isl_sensors, assign, chunk_ms, base_ms, R, V, valid, col, rng, seqs) -> list[Record]:
    n, k = len(objs.norad), len(base_ms)
    if k == 0 or n == 0 or not isl_sensors:
        return []
    off_ms = (5 + (np.arange(n) * 13) % 500).astype(np.int64)
    t_ms = base_ms[None, :] + off_ms[:, None]
    r, v = _state_at(R, V, col, (t_ms - base_ms[None, :]) / 1000.0)
    noise = rng.standard_normal((6, n, k))
    ok = valid[:, col] & np.all(np.isfinite(r), axis=-1) & (assign[:, None] >= 0)
    out: list[Record] = []
    for s_idx, sensor in enumerate(isl_sensors):
        sp, sv = sensor.sigma_pos_m or 50.0, sensor.sigma_vel_ms or 0.05
        jj, kk = np.nonzero(ok & (assign[:, None] == s_idx))
        order = np.lexsort((objs.norad[jj], t_ms[jj, kk]))
        for j, c in zip(jj[order], kk[order]):
            pos = r[j, c] * 1000.0 + sp * noise[0:3, j, c]
            vel = v[j, c] * 1000.0 + sv * noise[3:6, j, c]
            seqs[sensor.sensor_id] = seqs.get(sensor.sensor_id, -1) + 1
            msg = {"src": sensor.sensor_id, "seq": seqs[sensor.sensor_id], "t_ms": int(t_ms[j, c]),
                   "pos": pos.tolist(), "vel": vel.tolist()}
            truth = Truth("isl", sensor.sensor_id, int(t_ms[j, c]), int(objs.norad[j]), "none")
            out.append(Record("isl", sensor.sensor_id, chunk_ms, int(t_ms[j, c]), b"", [truth], msg))
    out.sort(key=lambda rec: (rec.event_ms, rec.sensor_id, rec.data["seq"]))
    return out


# --- serialisation ------------------------------------------------------------------------------------------

def _encode(rec: Record) -> bytes:
    d = rec.data
    if rec.kind == "radar":
        return json.dumps(d, separators=(",", ":")).encode()
    if rec.kind == "optical":
        return (f"{d['station']},{iso_us(d['t_ms'])},{d['ra_hours']:.7f},{d['dec_deg']:.6f},"
                f"{d['vmag']:.1f},{d['exposure_s']:.1f}").encode()
    x, y, z = d["pos"]
    vx, vy, vz = d["vel"]
    return (f"BCN|src={d['src']}|seq={d['seq']}|t_ms={d['t_ms']}|x_m={x:.1f}|y_m={y:.1f}|z_m={z:.1f}"
            f"|vx_ms={vx:.3f}|vy_ms={vy:.3f}|vz_ms={vz:.3f}").encode()


def _make_impossible(rec: Record, rng) -> None:
    """Turn one measurement of ``rec`` physically impossible (in place) and mark its truth."""
    d = rec.data
    if rec.kind == "radar":
        i = int(rng.integers(0, len(d["dets"])))
        det = d["dets"][i]
        choice = int(rng.integers(0, 3))
        if choice == 0:
            det["range_km"] = -abs(det["range_km"])
        elif choice == 1:
            det["el_deg"] = round(90.0 + float(rng.uniform(1.0, 60.0)), 5)
        else:
            det["rr_km_s"] = round(float(rng.uniform(12.5, 40.0)) * (1 if rng.random() < 0.5 else -1), 5)
        rec.truths[i].disorder = "impossible"
    elif rec.kind == "optical":
        d["dec_deg"] = float(rng.uniform(90.5, 130.0)) * (1 if rng.random() < 0.5 else -1)
        rec.truths[0].disorder = "impossible"
    else:
        pos = np.array(d["pos"])
        d["pos"] = (pos / np.linalg.norm(pos) * float(rng.uniform(0.0, 6.0e6))).tolist()  # inside the Earth
        rec.truths[0].disorder = "impossible"


def _reprocessed(rec: Record, sensor: Sensor | None, rng) -> list[Record]:
    """Near-duplicates of a record's clean measurements: same sensor, time +-50 ms, values jittered."""
    out = []
    d = rec.data
    shift = int(rng.integers(1, 51)) * (1 if rng.random() < 0.5 else -1)
    if rec.kind == "radar":
        i = int(rng.integers(0, len(d["dets"])))
        if rec.truths[i].disorder != "none":
            return []
        det = dict(d["dets"][i])
        t_ms = rec.truths[i].event_ms + shift
        sig_r = (sensor.sigma_range_m or 20.0) / 1000.0
        sig_a = sensor.sigma_angle_deg or 0.015
        sig_rr = (sensor.sigma_range_rate_ms or 2.0) / 1000.0
        j = 0.1 * rng.uniform(-1.0, 1.0, 4)
        det.update(t=iso_ms(t_ms), range_km=round(det["range_km"] + j[0] * sig_r, 2),
                   az_deg=round((det["az_deg"] + j[1] * sig_a) % 360.0, 4),
                   el_deg=round(min(det["el_deg"] + j[2] * sig_a, 90.0), 4), rr_km_s=round(det["rr_km_s"] + j[3] * sig_rr, 4))
        sent = parse_time(d["sent"]).timestamp() * 1000 + int(rng.integers(5000, 60000))
        frame = {"sensor": d["sensor"], "frame": d["frame"], "sent": iso_ms(int(round(sent))), "dets": [det]}
        truth = Truth("radar", rec.sensor_id, t_ms, rec.truths[i].norad_id, "reprocessed", 0, rec.truths[i])
        out.append(Record("radar", rec.sensor_id, rec.chunk_ms, rec.event_ms, b"", [truth], frame))
    elif rec.truths[0].disorder == "none":
        new = dict(d)
        new["t_ms"] = d["t_ms"] + shift
        j = 0.1 * rng.uniform(-1.0, 1.0, 6)
        if rec.kind == "optical":
            sig = sensor.sigma_angle_deg or 0.00028
            new["ra_hours"] = (d["ra_hours"] + j[0] * sig / 15.0) % 24.0
            new["dec_deg"] = max(-90.0, min(90.0, d["dec_deg"] + j[1] * sig))
        else:
            sp, sv = sensor.sigma_pos_m or 50.0, sensor.sigma_vel_ms or 0.05
            new["pos"] = (np.array(d["pos"]) + j[:3] * sp).tolist()
            new["vel"] = (np.array(d["vel"]) + j[3:] * sv).tolist()
        truth = Truth(rec.kind, rec.sensor_id, new["t_ms"], rec.truths[0].norad_id, "reprocessed", None, rec.truths[0])
        out.append(Record(rec.kind, rec.sensor_id, rec.chunk_ms, new["t_ms"], b"", [truth], new))
    return out


def _malformed(kind: str, sensor_id: str, source: Record, rng) -> Record:
    """A broken line derived from ``source`` (truncated, wrong type, wrong columns, bad bytes)."""
    text = _encode(source)
    choice = int(rng.integers(0, 3))
    if choice == 2:  # invalid UTF-8
        payload = b"\xff\xfe" + text[: max(4, len(text) // 3)] + b"\xc3\x28\x80\xfa"
    elif kind == "radar":
        if choice == 0:  # truncated JSON
            payload = text[: int(rng.integers(5, max(6, len(text) - 3)))]
        else:  # non-numeric fields
            frame = json.loads(text)
            det = dict(frame["dets"][0])
            det["range_km"] = f"{det['range_km']}km"
            det["el_deg"] = "n/a"
            frame["dets"] = [det]
            payload = json.dumps(frame, separators=(",", ":")).encode()
    elif kind == "optical":
        cols = text.decode().split(",")
        if choice == 0:  # wrong column count
            payload = ",".join(cols[:4]).encode() if rng.random() < 0.5 else (",".join(cols) + ",extra,1").encode()
        else:  # non-numeric
            cols[2] = cols[2].replace(".", "h", 1)
            cols[3] = "dec?"
            payload = ",".join(cols).encode()
    else:
        if choice == 0:  # truncated / garbage beacon
            payload = text[: int(rng.integers(8, max(9, len(text) // 2)))] if rng.random() < 0.5 else b"BCN|~~NO CARRIER~~|%$#@!"
        else:  # non-numeric values
            parts = text.decode().split("|")
            parts[3] = "t_ms=" + parts[3].split("=", 1)[1][:6] + "x9"
            parts[4] = "x_m=NaNish"
            payload = "|".join(parts).encode()
    payload = payload.replace(b"\n", b" ").replace(b"\r", b" ")
    truth = Truth(kind, sensor_id, source.event_ms, None, "malformed")
    return Record(kind, sensor_id, source.chunk_ms, source.event_ms, payload, [truth], None)


# --- the simulation -------------------------------------------------------------------------------------------

def _load_objects(cfg: SimConfig, settings) -> tuple[list[CatalogEntry], Path, dict | None]:
    injected = None
    if cfg.catalog is not None:
        entries, _rejected = load_catalog(cfg.catalog)
        entries = [e for e in latest_by_object(entries) if e.norad_id not in (PRIMARY_ID, SECONDARY_ID) or not cfg.inject_conjunction]
        if not entries:
            raise ValueError(f"catalogue {cfg.catalog} has no usable element sets")
        base_text = Path(cfg.catalog).read_text(encoding="utf-8", errors="replace")
        generated = False
    else:
        base_text = catgen.generate_catalog(cfg.objects, cfg.start, cfg.seed)
        entries, _ = parse_tle_text(base_text)
        generated = True
    if cfg.max_objects is not None and len(entries) > cfg.max_objects:
        pick = np.sort(np.random.default_rng([cfg.seed, 3]).choice(len(entries), cfg.max_objects, replace=False))
        entries = [entries[i] for i in pick]
    catalog_file = Path(cfg.catalog) if cfg.catalog is not None else None
    if cfg.inject_conjunction:
        tca = cfg.tca or cfg.start + dt.timedelta(hours=2)
        injected = design_conjunction(tca, cfg.miss_m, cfg.seed)
        extra = catgen.format_tle(injected["tle"])
        new_entries, _ = parse_tle_text(extra)
        entries = entries + new_entries
        base_text = base_text if base_text.endswith("\n") or not base_text else base_text + "\n"
        if cfg.catalog is not None and not base_text.lstrip().startswith(("1 ", "2 ")) and "\n1 " not in base_text:
            # an OMM catalogue: write the combined catalogue as TLE text
            full, _ = load_catalog(cfg.catalog)
            base_text = "".join(f"{e.name}\n{e.line1}\n{e.line2}\n" for e in latest_by_object(full))
        base_text += extra
    if generated or injected is not None:
        catalog_file = Path(cfg.catalog_out) if cfg.catalog_out else settings.catalog_file
        catalog_file.parent.mkdir(parents=True, exist_ok=True)
        catalog_file.write_text(base_text)
    elif cfg.catalog_out:
        Path(cfg.catalog_out).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg.catalog_out).write_text(base_text)
    return entries, catalog_file, injected


def _sim_id(cfg: SimConfig, catalog_sha: str) -> str:
    parts = [_iso(cfg.start), _iso(cfg.end), cfg.seed, catalog_sha, cfg.max_objects, cfg.inject_conjunction,
             _iso(cfg.tca) if cfg.tca else "", cfg.miss_m, cfg.radar_cadence_s, cfg.optical_cadence_s, cfg.isl_cadence_s]
    parts += [getattr(cfg, name) for name in RATE_NAMES + ("reorder_rate",)]
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:10]
    return f"sim_{cfg.start.strftime('%Y%m%dT%H%M%SZ')}_{digest}"


def simulate(cfg: SimConfig) -> SimulationResult:
    """Run the simulator; see the module docstring for what is written where."""
    from sda.settings import load_settings

    cfg.validate()
    settings = load_settings()
    landing = Path(cfg.landing) if cfg.landing else settings.landing
    sensors = load_sensors(cfg.sensors)
    radars = [s for s in sensors.values() if s.kind == "radar"]
    opticals = [s for s in sensors.values() if s.kind == "optical"]
    isls = [s for s in sorted(sensors.values(), key=lambda s: s.sensor_id) if s.kind == "isl"]
    entries, catalog_file, injected = _load_objects(cfg, settings)
    catalog_sha = _sha256_file(catalog_file)
    objs = _Objects(entries)
    n = len(objs.norad)

    # a deterministic ~10 % of the objects report through the ISL relays
    assign = np.full(n, -1, dtype=np.int64)
    if isls:
        for j, norad in enumerate(objs.norad):
            if _hash_int("isl", cfg.seed, norad) % 1000 < ISL_FRACTION * 1000:
                assign[j] = _hash_int("isl-src", norad) % len(isls)
        if n and not (assign >= 0).any():
            assign[0] = 0

    rng = np.random.default_rng([cfg.seed, 1])
    start_ms = int(round(cfg.start.timestamp() * 1000))
    end_ms = int(round(cfg.end.timestamp() * 1000))
    radar_step, opt_step, isl_step = (int(round(x * 1000)) for x in (cfg.radar_cadence_s, cfg.optical_cadence_s, cfg.isl_cadence_s))
    base: dict[tuple[str, str], dict[int, list[Record]]] = defaultdict(dict)
    frame_counters: dict[str, int] = {}
    isl_seqs: dict[str, int] = {}
    chunk0 = (start_ms // CHUNK_MS) * CHUNK_MS
    for chunk_ms in range(chunk0, end_ms, CHUNK_MS):
        lo, hi = max(start_ms, chunk_ms), min(end_ms, chunk_ms + CHUNK_MS)
        g_radar, g_opt, g_isl = _grid(lo, hi, radar_step), _grid(lo, hi, opt_step), _grid(lo, hi, isl_step)
        grid = np.unique(np.concatenate([g_radar, g_opt, g_isl]))
        if grid.size == 0:
            continue
        err, R, V = frames.propagate(objs.sats, grid / 1000.0)
        valid = err == 0
        col = {int(t): i for i, t in enumerate(grid)}
        c_radar = np.array([col[int(t)] for t in g_radar], dtype=np.int64)
        c_opt = np.array([col[int(t)] for t in g_opt], dtype=np.int64)
        c_isl = np.array([col[int(t)] for t in g_isl], dtype=np.int64)
        for s_idx, sensor in enumerate(radars):
            recs = _radar_records(objs, sensor, s_idx, chunk_ms, g_radar, R, V, valid, c_radar, rng, frame_counters)
            if recs:
                base[("radar", sensor.sensor_id)][chunk_ms] = recs
        for sensor in opticals:
            recs = _optical_records(objs, sensor, chunk_ms, g_opt, R, V, valid, c_opt, rng)
            if recs:
                base[("optical", sensor.sensor_id)][chunk_ms] = recs
        recs = _isl_records(objs, isls, assign, chunk_ms, g_isl, R, V, valid, c_isl, rng, isl_seqs)
        for rec in recs:
            base[("isl", rec.sensor_id)].setdefault(chunk_ms, []).append(rec)

    files = _apply_disorder(cfg, sensors, base, np.random.default_rng([cfg.seed, 4]))
    return _write(cfg, landing, files, catalog_file, catalog_sha, injected, n, end_ms)


@dataclasses.dataclass(eq=False)
class _File:
    kind: str
    sensor_id: str
    chunk_ms: int
    variant: int  # 0 regular, 1 re-delivery, 2 late
    records: list[Record]
    mtime_ms: int

    @property
    def relpath(self) -> str:
        suffix = LANDING_SUFFIX[self.kind]
        label = chunk_label(self.chunk_ms)
        if self.kind == "radar":
            return f"radar/{self.sensor_id}_{label}_{self.variant}{suffix}"
        tail = "" if self.variant == 0 else f"_{self.variant}"
        return f"{self.kind}/{self.sensor_id}_{label}{tail}{suffix}"


def _apply_disorder(cfg: SimConfig, sensors: dict[str, Sensor], base, rng) -> list[_File]:
    files: list[_File] = []
    unknown: dict[tuple[str, int], list[Record]] = defaultdict(list)
    unknown_seq = 0
    for (kind, sensor_id), by_chunk in sorted(base.items()):
        sensor = sensors[sensor_id]
        chunks = sorted(by_chunk)
        regular: dict[int, _File] = {}
        late: list[Record] = []
        redeliver: dict[int, list[Record]] = defaultdict(list)
        for chunk_ms in chunks:
            recs = by_chunk[chunk_ms]
            for rec in recs:  # impossible values first (they never get copied)
                if rng.random() < cfg.impossible_rate:
                    _make_impossible(rec, rng)
            kept: list[Record] = []
            for rec in recs:
                if rng.random() < cfg.late_rate:
                    for t in rec.truths:
                        if t.disorder == "none":
                            t.disorder = "late"
                    late.append(rec)
                else:
                    kept.append(rec)
            out: list[Record] = []
            for rec in kept:
                out.append(rec)
                if rng.random() < cfg.reprocess_rate:
                    for extra in _reprocessed(rec, sensor, rng):
                        out.insert(len(out) - int(rng.integers(0, min(3, len(out)))) if rng.random() < 0.3 else len(out), extra)
                clean = not rec.has_impossible
                if clean and rng.random() < cfg.dup_rate:
                    redeliver[chunk_ms].append(rec)
                if clean and rng.random() < cfg.unknown_sensor_rate:
                    unknown[(kind, chunk_ms)].append(rec)
            n_bad = int(rng.binomial(len(kept), cfg.malformed_rate)) if kept and cfg.malformed_rate > 0 else 0
            for _ in range(n_bad):
                src = kept[int(rng.integers(0, len(kept)))]
                out.insert(int(rng.integers(0, len(out) + 1)), _malformed(kind, sensor_id, src, rng))
            if out:
                mtime = chunk_ms + CHUNK_MS + int(rng.integers(30_000, 420_000))
                regular[chunk_ms] = _File(kind, sensor_id, chunk_ms, 0, out, mtime)
        # re-deliveries: verbatim copies appended to the sensor's next regular file, else their own file
        for chunk_ms in sorted(redeliver):
            copies = []
            for rec in redeliver[chunk_ms]:
                truths = [Truth(t.kind, t.sensor_id, t.event_ms, t.norad_id, "redelivery", t.det_index, t) for t in rec.truths]
                copies.append(Record(kind, sensor_id, chunk_ms, rec.event_ms, b"", truths, rec.data))
            later = [c for c in sorted(regular) if c > chunk_ms]
            if later:
                target = regular[later[0]].records
                for copy in copies:
                    target.insert(int(rng.integers(0, len(target) + 1)), copy)
            else:
                mtime = chunk_ms + CHUNK_MS + int(rng.integers(600_000, 1_500_000))
                files.append(_File(kind, sensor_id, chunk_ms, 1, copies, mtime))
        files.extend(regular[c] for c in sorted(regular))
        if late:
            late.sort(key=lambda r: r.event_ms)
            files.append(_File(kind, sensor_id, late[0].chunk_ms, 2, late, -1))  # mtime set below
    # unknown sensors: copies with another sensor id, in files of their own
    for (kind, chunk_ms), recs in sorted(unknown.items()):
        uid = UNKNOWN_IDS[kind]
        copies = []
        for rec in recs:
            data = json.loads(json.dumps(rec.data))
            if kind == "radar":
                data["sensor"] = uid
            elif kind == "optical":
                data["station"] = uid
            else:
                data["src"] = uid
                data["seq"] = unknown_seq
                unknown_seq += 1
            truths = [Truth(t.kind, uid, t.event_ms, None, "unknown_sensor", t.det_index) for t in rec.truths]
            copies.append(Record(kind, uid, chunk_ms, rec.event_ms, b"", truths, data))
        files.append(_File(kind, uid, chunk_ms, 0, copies, chunk_ms + CHUNK_MS + int(rng.integers(30_000, 420_000))))
    # out-of-order records within files
    for f in files:
        for i in range(len(f.records) - 1):
            if rng.random() < cfg.reorder_rate:
                f.records[i], f.records[i + 1] = f.records[i + 1], f.records[i]
    latest = max((f.mtime_ms for f in files), default=0)
    for f in files:
        if f.mtime_ms < 0:
            f.mtime_ms = latest + 600_000
    return files


def _write(cfg, landing: Path, files: list[_File], catalog_file: Path, catalog_sha: str, injected, n_objects: int, end_ms: int) -> SimulationResult:
    sim_id = _sim_id(cfg, catalog_sha)
    truth_rows: list[Truth] = []
    now_ms = int(time.time() * 1000)
    files.sort(key=lambda f: f.relpath)
    for f in files:
        first = 1 if f.kind == "optical" else 0
        lines = [OPTICAL_HEADER.encode()] if f.kind == "optical" else []
        for i, rec in enumerate(f.records):
            for t in rec.truths:
                t.file, t.record_no = f.relpath, first + i
                truth_rows.append(t)
            lines.append(rec.payload if rec.data is None else _encode(rec))
        path = landing / f.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\n".join(lines) + b"\n")
        mtime = min(f.mtime_ms, now_ms) / 1000.0
        os.utime(path, (mtime, mtime))
    truth_rows.sort(key=lambda t: (t.file, t.record_no, -1 if t.det_index is None else t.det_index))
    truth_dir = landing / "_truth"
    truth_dir.mkdir(parents=True, exist_ok=True)
    truth_file = truth_dir / f"{sim_id}.jsonl"
    truth_file.write_text("".join(json.dumps(t.as_json(), sort_keys=False) + "\n" for t in truth_rows))
    counts: dict[str, dict[str, int]] = {}
    for t in truth_rows:
        counts.setdefault(t.kind, {d: 0 for d in DISORDERS})[t.disorder] += 1
    file_counts: dict[str, int] = defaultdict(int)
    for f in files:
        file_counts[f.kind] += 1
    inj = None
    if injected is not None:
        inj = {k: v for k, v in injected.items() if k not in ("tle", "satrecs")}
    summary = {
        "sim_id": sim_id, "start": _iso(cfg.start), "end": _iso(cfg.end), "seed": cfg.seed,
        "catalog_file": str(catalog_file), "catalog_sha256": catalog_sha, "objects": n_objects,
        "rates": {name: getattr(cfg, name) for name in RATE_NAMES + ("reorder_rate",)},
        "records": len(truth_rows), "counts": counts, "files": dict(sorted(file_counts.items())),
        "truth_file": f"_truth/{truth_file.name}", "injected": inj,
    }
    summary_file = truth_dir / f"{sim_id}.summary.json"
    summary_file.write_text(json.dumps(summary, indent=2) + "\n")
    return SimulationResult(sim_id, landing, truth_file, summary_file, catalog_file, [f.relpath for f in files], counts, inj)


# --- command line ----------------------------------------------------------------------------------------------

def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 0.5:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a fraction in [0, 0.5]")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected at least 1")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive number")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sda.simulate",
                                description="Write simulated radar/optical/ISL sensor files (with disorder and truth) to the landing zone.")
    p.add_argument("--start", type=parse_time, required=True, help="first event time, ISO-8601 UTC")
    p.add_argument("--end", type=parse_time, required=True, help="end of the events (exclusive), at most 7 days after --start")
    p.add_argument("--landing", type=Path, help="landing directory (default: the settings' landing)")
    p.add_argument("--catalog", type=Path, help="TLE/OMM catalogue to observe (default: generate one with sda.catgen)")
    p.add_argument("--catalog-out", type=Path, help="where the catalogue used is written (default: the settings' catalog_file)")
    p.add_argument("--objects", type=_positive_int, default=300, help="generated catalogue size (default 300)")
    p.add_argument("--max-objects", type=_positive_int, help="observe a deterministic subsample of the catalogue")
    p.add_argument("--sensors", type=Path, help="sensor registry CSV (default: the embedded registry)")
    p.add_argument("--seed", type=int, default=1)
    for name in RATE_NAMES:
        p.add_argument("--" + name.replace("_", "-"), type=_rate, default=0.02, help="fraction (default 0.02)")
    p.add_argument("--reorder-rate", type=_rate, default=0.05, help="chance of swapping neighbouring lines (default 0.05)")
    p.add_argument("--clean", action="store_true", help="no disorder at all (every rate 0)")
    p.add_argument("--inject-conjunction", action="store_true", help="add objects 99901/99902 on a near-collision course")
    p.add_argument("--tca", type=parse_time, help="time of closest approach (default: start + 2 h)")
    p.add_argument("--miss-m", type=_positive_float, default=150.0, help="designed miss distance, m (default 150)")
    p.add_argument("--radar-cadence", type=_positive_float, default=10.0, help="seconds between radar frames (default 10)")
    return p


def config_from_args(argv: list[str] | None = None) -> SimConfig:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.catalog is not None and not args.catalog.is_file():
        parser.error(f"--catalog {args.catalog}: no such file")
    if args.sensors is not None and not args.sensors.is_file():
        parser.error(f"--sensors {args.sensors}: no such file")
    if args.tca is not None and not args.inject_conjunction:
        parser.error("--tca needs --inject-conjunction")
    cfg = SimConfig(
        start=args.start, end=args.end, landing=args.landing, catalog=args.catalog, catalog_out=args.catalog_out,
        objects=args.objects, max_objects=args.max_objects, sensors=args.sensors, seed=args.seed,
        reorder_rate=0.0 if args.clean else args.reorder_rate, inject_conjunction=args.inject_conjunction,
        tca=args.tca, miss_m=args.miss_m, radar_cadence_s=args.radar_cadence,
        **{name: 0.0 if args.clean else getattr(args, name) for name in RATE_NAMES},
    )
    try:
        cfg.validate()
    except ValueError as exc:
        parser.error(str(exc))
    return cfg


def main(argv: list[str] | None = None) -> int:
    cfg = config_from_args(argv)
    started = time.monotonic()
    result = simulate(cfg)
    total = sum(sum(c.values()) for c in result.counts.values())
    print(f"{result.sim_id}: {len(result.files)} files, {total} records into {result.landing} "
          f"in {time.monotonic() - started:.1f} s; catalogue {result.catalog_file}; truth {result.truth_file}")
    for kind, counts in sorted(result.counts.items()):
        print(f"  {kind:8s} " + " ".join(f"{k}={v}" for k, v in counts.items() if v))
    if result.injected:
        inj = result.injected
        print(f"  conjunction {inj['primary']}/{inj['secondary']} TCA {inj['achieved_tca']} miss {inj['achieved_miss_m']:.1f} m "
              f"(designed {inj['designed_miss_m']:.1f} m)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
