"""Ground truth: what every record in the landing files is, and the truth / summary files."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections import defaultdict
from pathlib import Path

from sda.sim import dynamics
from sda.sim.common import DISORDERS, RATE_NAMES, iso_ms, iso_utc, parse_time
from sda.sim.weather import Weather


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
    error_rtn_m: tuple[float, float, float] | None = None  # true - catalogue at event_ms (--tle-age-days)

    @property
    def key(self) -> str:
        base = f"{self.file}#{self.record_no}"
        return base if self.det_index is None else f"{base}#{self.det_index}"

    def as_json(self) -> dict:
        error = self.error_rtn_m
        if error is None and self.duplicate_of is not None:
            error = self.duplicate_of.error_rtn_m  # a copy measures the same object at (nearly) the same time
        extra = {} if error is None else {"error_rtn_m": list(error)}
        return {
            "key": self.key, "kind": self.kind, "sensor_id": self.sensor_id, "file": self.file,
            "record_no": self.record_no, "det_index": self.det_index,
            "event_time": iso_ms(self.event_ms) if self.event_ms is not None else None,
            "norad_id": self.norad_id, "disorder": self.disorder,
            "duplicate_of": self.duplicate_of.key if self.duplicate_of is not None else None,
            **extra,
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


def write_truth(cfg, landing: Path, sim_id: str, truth_rows: list[Truth], files, catalog_file: Path, catalog_sha: str,
                injected, n_objects: int, errors=None, same_body: dict[int, tuple[int, ...]] | None = None,
                true_orbits=None, hidden: list[int] | None = None,
                ) -> tuple[Path, Path, dict[str, dict[str, int]], dict | None]:
    """Write ``_truth/<sim_id>.jsonl`` and ``_truth/<sim_id>.summary.json`` (and with element-set
    ``errors`` ``_truth/<sim_id>.orbits.jsonl``); return (truth file, summary file, counts, injected).
    ``same_body``: the catalogue numbers of each body published under several (a docked stack), by the
    number it is observed as; a row of such a body gets them as ``same_body``. ``true_orbits``
    (:class:`sda.sim.objects.TrueOrbits`) goes to ``_truth/<sim_id>.ephemeris.npz`` and
    ``_truth/<sim_id>.bodies.json`` (:func:`load_ephemeris` reads them back, extended on demand); its
    burns and the ``hidden`` bodies (observed, not catalogued) to ``_truth/<sim_id>.events.json``."""
    same_body = same_body or {}
    truth_rows.sort(key=lambda t: (t.file, t.record_no, -1 if t.det_index is None else t.det_index))
    truth_dir = landing / "_truth"
    truth_dir.mkdir(parents=True, exist_ok=True)
    truth_file = truth_dir / f"{sim_id}.jsonl"

    def row(t: Truth) -> dict:
        out = t.as_json()
        if out["norad_id"] in same_body:
            out["same_body"] = list(same_body[out["norad_id"]])
        return out

    truth_file.write_text("".join(json.dumps(row(t), sort_keys=False) + "\n" for t in truth_rows))
    counts: dict[str, dict[str, int]] = {}
    for t in truth_rows:
        counts.setdefault(t.kind, {d: 0 for d in DISORDERS})[t.disorder] += 1
    file_counts: dict[str, int] = defaultdict(int)
    for f in files:
        file_counts[f.kind] += 1
    inj = None
    if injected is not None:
        internal = ("tle", "satrecs", "true_gcrf_start", "params", "designed_teme")
        inj = {k: v for k, v in injected.items() if k not in internal}
    summary = {
        "sim_id": sim_id, "start": iso_utc(cfg.start), "end": iso_utc(cfg.end), "seed": cfg.seed,
        "catalog_file": str(catalog_file), "catalog_sha256": catalog_sha, "objects": n_objects,
        "rates": {name: getattr(cfg, name) for name in RATE_NAMES + ("reorder_rate",)},
        "records": len(truth_rows), "counts": counts, "files": dict(sorted(file_counts.items())),
        "same_body": {str(k): list(v) for k, v in sorted(same_body.items())},
        "truth_file": f"_truth/{truth_file.name}", "injected": inj, "config": config_json(cfg),
    }
    if errors is not None:
        orbits_file = truth_dir / f"{sim_id}.orbits.jsonl"
        orbits_file.write_text("".join(json.dumps(o) + "\n" for o in errors.orbits))
        summary["tle_error"] = {"age_days": list(errors.age_days), "objects": len(errors.orbits),
                                "orbits_file": f"_truth/{orbits_file.name}"}
    if true_orbits is not None:
        summary["truth"] = _write_true_orbits(truth_dir, sim_id, true_orbits)
    if hidden or (true_orbits is not None and true_orbits.burns):
        events_file = truth_dir / f"{sim_id}.events.json"
        burns = [] if true_orbits is None else [b.as_json() for b in true_orbits.burns]
        events_file.write_text(json.dumps({"manoeuvres": burns, "uncatalogued": list(hidden or [])}, indent=1) + "\n")
        summary["events"] = {"file": f"_truth/{events_file.name}", "manoeuvres": len(burns),
                             "uncatalogued": len(hidden or [])}
    summary_file = truth_dir / f"{sim_id}.summary.json"
    summary_file.write_text(json.dumps(summary, indent=2) + "\n")
    return truth_file, summary_file, counts, inj


def config_json(cfg) -> dict:
    """A simulation's configuration as JSON (what regenerates it; :func:`sda.sim.feed.world_config` reads it)."""
    out = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if isinstance(value, dt.datetime):
            value = iso_utc(value)
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def _write_true_orbits(truth_dir: Path, sim_id: str, true_orbits) -> dict:
    eph = true_orbits.ephemeris
    eph_file, bodies_file = truth_dir / f"{sim_id}.ephemeris.npz", truth_dir / f"{sim_id}.bodies.json"
    eph.save(eph_file, last_gcrf=true_orbits.last_gcrf)
    bodies_file.write_text(json.dumps(true_orbits.rows(), indent=0) + "\n")
    return {"model": dynamics.MODEL, "step_s": eph.step, "start": iso_ms(int(round(eph.t0 * 1000))),
            "end": iso_ms(int(round(eph.t_end * 1000))), "frame": "TEME (km, km/s) as sda.orbit.frames",
            "ephemeris_file": f"_truth/{eph_file.name}", "bodies_file": f"_truth/{bodies_file.name}"}


def load_ephemeris(summary_file: Path, until_unix: float | None = None, norad_ids=None) -> dynamics.Ephemeris:
    """The true ephemeris a simulation wrote (``summary_file`` its ``_truth/<sim_id>.summary.json``),
    extended with the same force model and each body's recorded parameters to cover ``until_unix``
    (e.g. the end of the screening horizon) when that is past its end; with ``norad_ids``, of those bodies
    only (those the truth has), which costs less to extend."""
    eph, last, bodies = load_truth_files(summary_file)
    rows = list(range(len(eph.norad)))
    if norad_ids is not None:
        wanted = {int(n) for n in norad_ids}
        rows = [i for i, n in enumerate(eph.norad) if int(n) in wanted]
        eph, last = eph.subset(rows), last[rows]
    if until_unix is None or until_unix <= eph.t_end - (dynamics.LAGRANGE_POINTS // 2) * eph.step:
        return eph
    return dynamics.extend(eph, last, body_params([bodies[i] for i in rows]), until_unix, weather_of(summary_file))[0]


def load_truth_files(summary_file: Path) -> tuple:
    """A simulation's true ephemeris, its last grid states (GCRF) and its bodies' rows (:meth:`TrueOrbits.rows`)."""
    summary_file = Path(summary_file)
    info = json.loads(summary_file.read_text())["truth"]
    root = summary_file.parent.parent
    eph, last = dynamics.Ephemeris.load(root / info["ephemeris_file"], "last_gcrf")
    return eph, last, json.loads((root / info["bodies_file"]).read_text())


def body_params(bodies: list[dict]) -> list[dynamics.BodyParams]:
    """The force parameters of bodies' rows."""
    return [dynamics.BodyParams(b["cd"], b["cr"], b["area_to_mass_m2_kg"], tuple(tuple(t) for t in b.get("tumble", ())))
            for b in bodies]


def weather_of(summary_file: Path) -> Weather | None:
    """The space weather a simulation's truth was integrated in (None: the kinder sky's)."""
    info = json.loads(Path(summary_file).read_text()).get("space_weather")
    if not info:
        return None
    onset = info.get("storm_onset")
    return Weather(int(info["seed"]), None if onset is None else parse_time(onset).timestamp())
