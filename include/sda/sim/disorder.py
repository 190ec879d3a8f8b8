"""Disorder: re-deliveries, re-processed near-duplicates, late, malformed, impossible and unknown-sensor records."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np

from sda.orbit.sensors import Sensor
from sda.sim.common import CHUNK_MS, iso_ms, parse_time
from sda.sim.formats import LandingFile, encode
from sda.sim.truth import Record, Truth

UNKNOWN_IDS = {"radar": "ZZ-RADAR-9", "optical": "ZZ-OPTICAL-4", "isl": "ISL-99"}


def apply_disorder(cfg, sensors: dict[str, Sensor], base, rng) -> list[LandingFile]:
    """The landing files of every sensor's clean records (``base``: (kind, sensor id) -> chunk -> records)
    with the configured disorder applied. The random draws happen in a fixed order (sensor by sensor, chunk
    by chunk, then the unknown-sensor files, then the reordering), so one seed gives the same files."""
    files: list[LandingFile] = []
    unknown: dict[tuple[str, int], list[Record]] = defaultdict(list)
    for (kind, sensor_id), by_chunk in sorted(base.items()):
        files.extend(_sensor_files(cfg, kind, sensor_id, sensors[sensor_id], by_chunk, unknown, rng))
    files.extend(_unknown_sensor_files(unknown, rng))
    _swap_neighbours(files, cfg.reorder_rate, rng)
    _date_late_files(files)
    return files


def _sensor_files(cfg, kind: str, sensor_id: str, sensor: Sensor, by_chunk: dict[int, list[Record]],
                  unknown: dict[tuple[str, int], list[Record]], rng) -> list[LandingFile]:
    """One sensor's files: its re-delivery files, its regular files in chunk order, its late file (mtime
    still unset). Records picked for an unknown sensor's copy are added to ``unknown``."""
    regular: dict[int, LandingFile] = {}
    late: list[Record] = []
    redeliver: dict[int, list[Record]] = {}
    for chunk_ms in sorted(by_chunk):
        recs = by_chunk[chunk_ms]
        for rec in recs:  # impossible values first (they never get copied)
            if rng.random() < cfg.impossible_rate:
                _make_impossible(rec, rng)
        kept, held_back = _hold_back_late(recs, cfg.late_rate, rng)
        late += held_back
        out, dups, unknowns = _with_copies(cfg, kept, sensor, rng)
        if dups:
            redeliver[chunk_ms] = dups
        if unknowns:
            unknown[(kind, chunk_ms)].extend(unknowns)
        _insert_malformed(out, kind, sensor_id, kept, cfg.malformed_rate, rng)
        if out:
            mtime = chunk_ms + CHUNK_MS + int(rng.integers(30_000, 420_000))
            regular[chunk_ms] = LandingFile(kind, sensor_id, chunk_ms, 0, out, mtime)
    files = _redeliveries(kind, sensor_id, redeliver, regular, rng)
    files.extend(regular[c] for c in sorted(regular))
    if late:
        late.sort(key=lambda r: r.event_ms)
        files.append(LandingFile(kind, sensor_id, late[0].chunk_ms, 2, late, -1))  # mtime set last
    return files


def _hold_back_late(recs: list[Record], late_rate: float, rng) -> tuple[list[Record], list[Record]]:
    """A chunk's records split into those delivered on time and those held back for the sensor's late file
    (their still clean truths marked ``late``)."""
    kept: list[Record] = []
    late: list[Record] = []
    for rec in recs:
        if rng.random() < late_rate:
            for t in rec.truths:
                if t.disorder == "none":
                    t.disorder = "late"
            late.append(rec)
        else:
            kept.append(rec)
    return kept, late


def _with_copies(cfg, kept: list[Record], sensor: Sensor, rng) -> tuple[list[Record], list[Record], list[Record]]:
    """A regular file's records: ``kept`` with re-processed near-duplicates placed after (or up to two
    records before) their original. Also the clean records to re-deliver and to copy as an unknown sensor's."""
    out: list[Record] = []
    redeliver: list[Record] = []
    unknown: list[Record] = []
    for rec in kept:
        out.append(rec)
        if rng.random() < cfg.reprocess_rate:
            for extra in _reprocessed(rec, sensor, rng):
                at = len(out) - int(rng.integers(0, min(3, len(out)))) if rng.random() < 0.3 else len(out)
                out.insert(at, extra)
        clean = not rec.has_impossible
        if clean and rng.random() < cfg.dup_rate:
            redeliver.append(rec)
        if clean and rng.random() < cfg.unknown_sensor_rate:
            unknown.append(rec)
    return out, redeliver, unknown


def _insert_malformed(out: list[Record], kind: str, sensor_id: str, kept: list[Record], rate: float, rng) -> None:
    """Broken lines derived from ``kept`` records, inserted at random places of ``out`` (in place)."""
    n_bad = int(rng.binomial(len(kept), rate)) if kept and rate > 0 else 0
    for _ in range(n_bad):
        src = kept[int(rng.integers(0, len(kept)))]
        out.insert(int(rng.integers(0, len(out) + 1)), _malformed(kind, sensor_id, src, rng))


def _redeliveries(kind: str, sensor_id: str, redeliver: dict[int, list[Record]], regular: dict[int, LandingFile],
                  rng) -> list[LandingFile]:
    """Re-deliveries: verbatim copies appended to the sensor's next regular file, else their own file (returned)."""
    files: list[LandingFile] = []
    for chunk_ms in sorted(redeliver):
        copies = []
        for rec in redeliver[chunk_ms]:
            truths = [Truth(t.kind, t.sensor_id, t.event_ms, t.norad_id, "redelivery", t.det_index, t)
                      for t in rec.truths]
            copies.append(Record(kind, sensor_id, chunk_ms, rec.event_ms, b"", truths, rec.data))
        later = [c for c in sorted(regular) if c > chunk_ms]
        if later:
            target = regular[later[0]].records
            for copy in copies:
                target.insert(int(rng.integers(0, len(target) + 1)), copy)
        else:
            mtime = chunk_ms + CHUNK_MS + int(rng.integers(600_000, 1_500_000))
            files.append(LandingFile(kind, sensor_id, chunk_ms, 1, copies, mtime))
    return files


def _unknown_sensor_files(unknown: dict[tuple[str, int], list[Record]], rng) -> list[LandingFile]:
    """Unknown sensors: copies with another sensor id, in files of their own (one per kind and chunk)."""
    files: list[LandingFile] = []
    unknown_seq = 0
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
        mtime = chunk_ms + CHUNK_MS + int(rng.integers(30_000, 420_000))
        files.append(LandingFile(kind, uid, chunk_ms, 0, copies, mtime))
    return files


def _swap_neighbours(files: list[LandingFile], reorder_rate: float, rng) -> None:
    """Out-of-order records within files: neighbouring lines swapped (in place)."""
    for f in files:
        for i in range(len(f.records) - 1):
            if rng.random() < reorder_rate:
                f.records[i], f.records[i + 1] = f.records[i + 1], f.records[i]


def _date_late_files(files: list[LandingFile]) -> None:
    """The late files (mtime still unset) arrive last: 10 minutes after the newest other file."""
    latest = max((f.mtime_ms for f in files), default=0)
    for f in files:
        if f.mtime_ms < 0:
            f.mtime_ms = latest + 600_000


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
                   el_deg=round(min(det["el_deg"] + j[2] * sig_a, 90.0), 4),
                   rr_km_s=round(det["rr_km_s"] + j[3] * sig_rr, 4))
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
    text = encode(source)
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
            if rng.random() < 0.5:
                payload = text[: int(rng.integers(8, max(9, len(text) // 2)))]
            else:
                payload = b"BCN|~~NO CARRIER~~|%$#@!"
        else:  # non-numeric values
            parts = text.decode().split("|")
            parts[3] = "t_ms=" + parts[3].split("=", 1)[1][:6] + "x9"
            parts[4] = "x_m=NaNish"
            payload = "|".join(parts).encode()
    payload = payload.replace(b"\n", b" ").replace(b"\r", b" ")
    truth = Truth(kind, sensor_id, source.event_ms, None, "malformed")
    return Record(kind, sensor_id, source.chunk_ms, source.event_ms, payload, [truth], None)
