"""Wire formats: radar JSON lines, optical CSV rows, ISL beacons, and the landing files that hold them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import time
from pathlib import Path

from sda.lake.schemas import LANDING_SUFFIX
from sda.lake.wire_formats import FORMAT_VERSION, OPTICAL_HEADER, OPTICAL_VERSION_PREFIX, VERSION_FIELD
from sda.sim.common import chunk_label, iso_us
from sda.sim.truth import Record, Truth


def encode(rec: Record) -> bytes:
    d = rec.data
    if rec.kind == "radar":
        return json.dumps({VERSION_FIELD: FORMAT_VERSION, **d}, separators=(",", ":")).encode()
    if rec.kind == "optical":
        return (f"{d['station']},{iso_us(d['t_ms'])},{d['ra_hours']:.7f},{d['dec_deg']:.6f},"
                f"{d['vmag']:.1f},{d['exposure_s']:.1f}").encode()
    x, y, z = d["pos"]
    vx, vy, vz = d["vel"]
    return (f"BCN|{VERSION_FIELD}={FORMAT_VERSION}|src={d['src']}|seq={d['seq']}|t_ms={d['t_ms']}"
            f"|x_m={x:.1f}|y_m={y:.1f}|z_m={z:.1f}|vx_ms={vx:.3f}|vy_ms={vy:.3f}|vz_ms={vz:.3f}").encode()


def file_time(name: str) -> dt.datetime:
    """The time a simulated landing file's name carries: a sensor file's 5-minute chunk
    (``<SENSOR>_YYYYmmddTHHMMSSZ...``, :attr:`LandingFile.relpath`), a space-weather file's issue
    (``SW-YYYYmmddTHHMMZ.txt``, :func:`sda.sim.weather.file_name`)."""
    sensor = re.search(r"_(\d{8}T\d{6}Z)", name)
    if sensor:
        return dt.datetime.strptime(sensor.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
    weather = re.search(r"SW-(\d{8}T\d{4}Z)", name)
    if weather:
        return dt.datetime.strptime(weather.group(1), "%Y%m%dT%H%MZ").replace(tzinfo=dt.timezone.utc)
    raise ValueError(f"{name}: no time in the name of a simulated landing file")


@dataclasses.dataclass(eq=False)
class LandingFile:
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


def write_landing(landing: Path, files: list[LandingFile], tdm: bool = False,
                  cap_mtime: bool = True) -> tuple[list[Truth], list[str]]:
    """Write the files (sorted by path, their mtimes the delivery times, capped at now unless not
    ``cap_mtime``); return their truth rows in file order and the
    paths written (relative to ``landing``). ``tdm``: radar and optical files as CCSDS TDM under ``tdm/``
    (:mod:`sda.sim.tdm`; truth rows keep the native file and line numbers; a file with no well-formed
    record is not written)."""
    from sda.sim import tdm as tdm_format

    truth_rows: list[Truth] = []
    written: list[str] = []
    now_ms = int(time.time() * 1000)
    files.sort(key=lambda f: f.relpath)
    for f in files:
        # an optical file: its version, then its header, then a row per record
        preamble = [f"{OPTICAL_VERSION_PREFIX}{FORMAT_VERSION}".encode(), OPTICAL_HEADER.encode()]
        lines = preamble if f.kind == "optical" else []
        first = len(lines)
        for i, rec in enumerate(f.records):
            for t in rec.truths:
                t.file, t.record_no = f.relpath, first + i
                truth_rows.append(t)
            lines.append(rec.payload if rec.data is None else encode(rec))
        path, data = landing / f.relpath, b"\n".join(lines) + b"\n"
        if tdm and f.kind in tdm_format.TDM_KINDS:
            path = landing / tdm_format.relpath(f.relpath)
            data = tdm_format.tdm_text(f.kind, f.records, f.mtime_ms)
            if data is None:  # no well-formed record: no file
                continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        mtime = (min(f.mtime_ms, now_ms) if cap_mtime else f.mtime_ms) / 1000.0
        os.utime(path, (mtime, mtime))
        written.append(path.relative_to(landing).as_posix())
    return truth_rows, written
