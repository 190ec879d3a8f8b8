"""The simulator's ``--format tdm``: radar and optical landing files written as CCSDS TDM (KVN) instead.

The same measurements as the project's own formats, so the pipeline must give the same silver
observations (sda.transforms.tdm's conventions, read backwards):

* radar: a segment per (sensor, object) run of detections, PATH 1,2,1, RANGE in km, AZEL, the
  DOPPLER_INSTANTANEOUS range-rate, time-tagged at RECEIVE: the detection time, which is the reception already
  in every sky (the geometry one light time earlier), and which normalize keeps when the stages model light time;
* optical: a segment per (station, object), PATH 2,1, RADEC in REFERENCE_FRAME EME2000 (the
  simulator's TEME-of-date angles rotated; normalize rotates them back, to ~1e-13 deg), angles in
  degrees, the epoch as the row's time.

The object is the simulator's truth (its NORAD number as PARTICIPANT_2). Malformed records (the
simulator's injected garbage) have no TDM form and are left out; ISL beacons stay in their format.
"""

from __future__ import annotations

import datetime as dt

from sda.sim.common import iso_us
from sda.transforms.tdm import epoch_ns, teme_from_inertial

TDM_KINDS = ("radar", "optical")


def _epoch_text(ns: int) -> str:
    t = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=ns // 1_000_000_000)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{ns % 1_000_000_000:09d}"


def _segment(sensor: str, norad: int | None, radar: bool, lines: list[str]) -> list[str]:
    meta = [f"PARTICIPANT_1 = {sensor}", f"PARTICIPANT_2 = {norad if norad is not None else 'UNKNOWN'}",
            "MODE = SEQUENTIAL"]
    meta += (["PATH = 1,2,1", "TIMETAG_REF = RECEIVE", "RANGE_UNITS = km", "ANGLE_TYPE = AZEL"] if radar
             else ["PATH = 2,1", "ANGLE_TYPE = RADEC", "REFERENCE_FRAME = EME2000"])
    return ["META_START", "TIME_SYSTEM = UTC", *meta, "META_STOP", "DATA_START", *lines, "DATA_STOP"]


def _radar_lines(det: dict) -> tuple[str, list[str]]:
    # float(): a re-processed copy's values are numpy floats, whose repr is "np.float64(...)"; a Python
    # float's repr is the shortest text that reads back to it (what the radar JSON carries too)
    values = [("RANGE", float(det["range_km"])), ("ANGLE_1", float(det["az_deg"])), ("ANGLE_2", float(det["el_deg"])),
              ("DOPPLER_INSTANTANEOUS", float(det["rr_km_s"]))]
    epoch = _epoch_text(epoch_ns(det["t"].replace("Z", "")))
    return epoch, [f"{key} = {epoch} {value!r}" for key, value in values]


def _optical_lines(row: dict) -> tuple[str, list[str]]:
    epoch = iso_us(row["t_ms"]).replace("Z", "")
    # the values the CSV carries (7 and 6 decimals), rotated from TEME of date to EME2000
    ra, dec = teme_from_inertial(float(f"{row['ra_hours']:.7f}") * 15.0, float(f"{row['dec_deg']:.6f}"),
                                 int(row["t_ms"]) * 1_000_000, inverse=True)
    return epoch, [f"ANGLE_1 = {epoch} {float(ra)!r}", f"ANGLE_2 = {epoch} {float(dec)!r}"]


def measurements(records) -> list[tuple[str, int | None, str, list[str]]]:
    """(sensor, NORAD number, epoch, data lines) per well-formed measurement of ``records``, in order."""
    out = []
    for rec in records:
        if rec.data is None:
            continue
        if rec.kind == "radar":
            for i, det in enumerate(rec.data["dets"]):
                truth = next((t for t in rec.truths if t.det_index == i), None)
                out.append((rec.data["sensor"], truth.norad_id if truth else None, *_radar_lines(det)))
        else:
            truth = rec.truths[0] if rec.truths else None
            out.append((rec.data["station"], truth.norad_id if truth else None, *_optical_lines(rec.data)))
    return out


def tdm_text(kind: str, records, created_ms: int) -> bytes | None:
    """A radar or optical landing file's records as one TDM (KVN); None when none is well-formed."""
    items = measurements(records)
    if not items:
        return None
    lines = ["CCSDS_TDM_VERS = 2.0", f"CREATION_DATE = {iso_us(created_ms).replace('Z', '')}",
             "ORIGINATOR = SDA-FUSION-SIM"]
    run: list[str] = []
    key: tuple | None = None
    seen: set[str] = set()
    for sensor, norad, epoch, data in items:
        # a new segment for another (sensor, object), and for an epoch the segment already has
        if (sensor, norad) != key or epoch in seen:
            if run:
                lines += _segment(key[0], key[1], kind == "radar", run)
            run, key, seen = [], (sensor, norad), set()
        run += data
        seen.add(epoch)
    lines += _segment(key[0], key[1], kind == "radar", run)
    return ("\n".join(lines) + "\n").encode()


def relpath(native_relpath: str) -> str:
    """``radar/EGLIN_x_0.jsonl`` -> ``tdm/radar_EGLIN_x_0.kvn``."""
    kind, name = native_relpath.split("/", 1)
    return f"tdm/{kind}_{name.rsplit('.', 1)[0]}.kvn"
