"""The harsher skies (``sda simulate --sky harsh|storm``): what real sensors add to the geometry, drawn per sensor
and recorded in the truth, and the space weather and tumbling debris the truth's drag sees (:mod:`sda.sim.weather`,
:class:`sda.sim.dynamics.BodyParams`); the kinder sky (``--sky kind``) has none of it but light time, which every
sky's radar and optical measurements carry (:func:`sda.sim.observe._as_measured`). The harsher sky is the default
of the CLI, of :class:`~sda.sim.simulate.SimConfig` and so of the tests.

Per sensor, drawn once from the seed and the sensor id (:func:`draw`), so one sensor errs the same way in every
simulation of a seed and in every block of a continued one (:mod:`sda.sim.feed`):

* **biases that drift slowly**: each a constant plus a sinusoid of period 1-3 days (a mount or a calibration
  that wanders): radar range (sigma 15 m, drift up to 10 m) and azimuth/elevation (sigma 0.006 deg, drift
  0.004 deg); optical right ascension/declination (sigma 1.0 arcsec, drift 0.7 arcsec); a time tag (radar sigma
  1 ms, optical 5 ms, ISL 0.2 ms: the sensor measures at ``t + bias`` and reports ``t``);
* **true noise other than the registry's**: the registry's sigma times a factor drawn log-normally (sigma 0.3:
  about a third of the sensors over 1.35x or under 0.74x), with a **heavy tail** (Student's t with 4 degrees of
  freedom, scaled to the same variance: 1.6 % of the errors beyond 3 sigma where a Gaussian has 0.27 %);
* **light time** (in the kinder sky too), as sensors report it: a radar range is the distance to where the object
  was when the pulse met it (one light time before reception; the state moved back along its two-body arc), with
  angles towards the same place; an optical sensor's astrometric angles (against the star catalogue, so no
  aberration) point where the object was one light time before the exposure.

Everything here comes from its own random stream (seed, 9): the kinder sky's draws, and so its files, are
unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from sda.orbit import frames
from sda.sim.common import MU, hash_int, stream_seed
from sda.sim.weather import Weather, file_name, issue_times

SKIES = ("kind", "harsh", "storm")
TAIL_DOF = 4.0
NOISE_SPREAD = 0.3  # log-normal sigma of true noise / registry noise

# (bias sigma, drift amplitude) per kind and quantity: radar range m, radar angles deg, optical angles arcsec,
# time tags ms
RADAR_RANGE_M, RADAR_ANGLE_DEG, OPTICAL_ARCSEC = (15.0, 10.0), (0.006, 0.004), (1.0, 0.7)
TIME_MS = {"radar": 1.0, "optical": 5.0, "isl": 0.2}


@dataclasses.dataclass(frozen=True)
class Drifting:
    """A bias: ``offset + amplitude * sin(2 pi t / period + phase)``."""

    offset: float
    amplitude: float
    period_s: float
    phase: float

    def at(self, unix_s) -> np.ndarray:
        return self.offset + self.amplitude * np.sin(2.0 * np.pi * np.asarray(unix_s, float) / self.period_s
                                                     + self.phase)

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class SensorErrors:
    """One sensor's errors: its biases (radar: range m, az and el deg; optical: ra and dec arcsec; all: time
    tag ms), its true noise over the registry's, and the tail of its noise (Student's t dof)."""

    sensor_id: str
    kind: str
    biases: dict[str, Drifting]
    noise_scale: float
    tail_dof: float = TAIL_DOF

    def bias(self, name: str, unix_s) -> np.ndarray:
        b = self.biases.get(name)
        return np.zeros_like(np.asarray(unix_s, float)) if b is None else b.at(unix_s)

    def as_json(self) -> dict:
        return {"kind": self.kind, "noise_scale": self.noise_scale, "tail_dof": self.tail_dof,
                "biases": {k: b.as_json() for k, b in self.biases.items()}}


def _drifting(rng, sigma: float, drift: float) -> Drifting:
    return Drifting(float(rng.normal(0.0, sigma)), float(rng.uniform(0.0, drift)),
                    float(rng.uniform(1.0, 3.0) * 86400.0), float(rng.uniform(0.0, 2.0 * np.pi)))


def draw(sensors, seed: int) -> dict[str, SensorErrors]:
    """Every sensor's errors, each from a stream of (seed, 9, the sensor id)."""
    out = {}
    for s in sensors:
        rng = np.random.default_rng([int(seed), 9, hash_int("sky", s.sensor_id) % (2**31)])
        biases = {"time_ms": _drifting(rng, TIME_MS.get(s.kind, 1.0), TIME_MS.get(s.kind, 1.0) / 2.0)}
        if s.kind == "radar":
            biases.update(range_m=_drifting(rng, *RADAR_RANGE_M), az_deg=_drifting(rng, *RADAR_ANGLE_DEG),
                          el_deg=_drifting(rng, *RADAR_ANGLE_DEG))
        elif s.kind == "optical":
            biases.update(ra_arcsec=_drifting(rng, *OPTICAL_ARCSEC), dec_arcsec=_drifting(rng, *OPTICAL_ARCSEC))
        scale = float(math.exp(rng.normal(0.0, NOISE_SPREAD)))
        out[s.sensor_id] = SensorErrors(s.sensor_id, s.kind, biases, scale)
    return out


def heavy_noise(rng, shape, dof: float = TAIL_DOF) -> np.ndarray:
    """Student's t samples scaled to unit variance."""
    return rng.standard_t(dof, size=shape) * math.sqrt((dof - 2.0) / dof)


def light_time_position(r_km: np.ndarray, v_kms: np.ndarray, site_km: np.ndarray) -> np.ndarray:
    """Where an object at ``r_km`` moving at ``v_kms`` (now) was one light time (to ``site_km``) ago
    (:func:`sda.orbit.frames.light_time_position`, with the simulator's gravitational parameter)."""
    return frames.light_time_position(r_km, v_kms, site_km, MU)


class Sky:
    """A harsher sky of one simulation: the sensors' errors, the stream their noise is drawn from, and the space
    weather (:mod:`sda.sim.weather`)."""

    def __init__(self, sensors, cfg):
        self.errors = draw(sensors, cfg.seed)
        self.rng = np.random.default_rng(stream_seed(cfg, 9))
        self.weather = Weather.of(cfg)

    def as_json(self) -> dict:
        return {"model": "harsh", "tail_dof": TAIL_DOF, "noise_spread": NOISE_SPREAD,
                "light_time": True, "sensors": {k: e.as_json() for k, e in sorted(self.errors.items())}}

    def record(self, cfg, summary_file: Path, files_to: Path, cap_mtime: bool = True) -> list[str]:
        """The sky in the truth summary (``sky``, ``space_weather``: never read by the pipeline) and the space-weather
        files issued over ``(cfg.start, cfg.end]`` landed under ``files_to``, each file's modification time its
        issue time (capped at now with ``cap_mtime``); returns the files' paths relative to ``files_to``."""
        t0, t1 = cfg.start.timestamp(), cfg.end.timestamp()
        summary = json.loads(summary_file.read_text())
        summary["sky"] = self.as_json()
        summary["space_weather"] = self.weather.as_json(t0, t1)
        summary_file.write_text(json.dumps(summary, indent=2) + "\n")
        written = []
        for issued in issue_times(t0, t1):
            rel = file_name(issued)
            path = Path(files_to) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(self.weather.cssi(issued))
            when = min(issued, time.time()) if cap_mtime else issued
            os.utime(tmp, (when, when))
            os.replace(tmp, path)
            written.append(rel)
        return written
