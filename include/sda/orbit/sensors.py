"""The sensor registry: real ground sites (public coordinates) and ISL relays, with noise levels.

The embedded ``data/sensors.csv`` is the default. :func:`load_sensors` also reads the RESONAATE
site file format (``name,type,lat,lon,...,el_mask``) so a user can simulate another network.

Sensors known by other names: :func:`sensor_aliases` (a CCSDS TDM names its participants as its
sender does): each sensor's id and registry ``name``, and the designations in ``data/sensor_aliases.csv``.

The noise levels, as the correlation gate and the estimator weight measurements by them:
:func:`sensor_sigmas` (per sensor, SI), :func:`observation_sigmas` (per observation, the registry's
value for its sensor, else :data:`DEFAULT_SIGMAS` of its kind).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd


@dataclasses.dataclass(frozen=True)
class Sensor:
    sensor_id: str
    kind: str  # radar | optical | isl
    name: str
    lat_deg: float | None = None
    lon_deg: float | None = None
    alt_m: float | None = None
    min_el_deg: float = 0.0
    az_min_deg: float = 0.0
    az_max_deg: float = 360.0
    max_range_km: float | None = None
    sigma_range_m: float | None = None
    sigma_angle_deg: float | None = None
    sigma_range_rate_ms: float | None = None
    sigma_pos_m: float | None = None
    sigma_vel_ms: float | None = None

    def in_field_of_regard(self, az_rad: np.ndarray, el_rad: np.ndarray,
                           rng_km: np.ndarray | None = None) -> np.ndarray:
        """True where a direction (and range) is inside the site's masks."""
        eps = 1e-9  # degrees: radians round-trip, so a sector edge must not hinge on the last bit
        az = np.mod(np.rad2deg(az_rad), 360.0)
        width = self.az_max_deg - self.az_min_deg
        if width >= 360.0 - eps or (width == 0 and self.az_max_deg == 360.0):
            az_ok = np.ones(np.shape(az), dtype=bool)
        else:
            # offset of each azimuth from the sector start, going clockwise (east) through north if needed
            span = np.mod(self.az_max_deg - self.az_min_deg, 360.0)
            az_ok = np.mod(az - self.az_min_deg + eps, 360.0) <= span + 2 * eps
        ok = az_ok & (np.rad2deg(el_rad) >= self.min_el_deg)
        if rng_km is not None and self.max_range_km:
            ok &= rng_km <= self.max_range_km
        return ok


def _opt_float(text: str | None) -> float | None:
    text = (text or "").strip()
    return float(text) if text else None


def _from_registry_row(row: dict[str, str]) -> Sensor:
    kwargs = {}
    for field in dataclasses.fields(Sensor):
        raw = row.get(field.name)
        if field.name in ("sensor_id", "kind", "name"):
            kwargs[field.name] = raw.strip()
        else:
            value = _opt_float(raw)
            if value is not None:
                kwargs[field.name] = value
    return Sensor(**kwargs)


def _from_resonaate_row(row: dict[str, str]) -> Sensor:
    kind = "optical" if row["type"].strip() == "optical" else "radar"
    sensor_id = re.sub(r"[^A-Z0-9]+", "-", row["name"].upper()).strip("-")
    az_mask = json.loads(row.get("az_mask") or "[0, 360]")
    el_mask = json.loads(row.get("el_mask") or "[0, 90]")
    scale = 1.0
    sigma_angle = (_opt_float(row.get("HYPOTHESIS_sigma_az_deg_if_x100"))
                   or (_opt_float(row.get("sigma_az_arcsec")) or 1.0) / 3600.0)
    sigma_range = _opt_float(row.get("HYPOTHESIS_sigma_range_m_if_x1000")) or _opt_float(row.get("sigma_range_m"))
    return Sensor(
        sensor_id=sensor_id,
        kind=kind,
        name=row["name"].strip(),
        lat_deg=float(row["lat"]),
        lon_deg=float(row["lon"]),
        alt_m=0.0,
        min_el_deg=max(float(el_mask[0]), 20.0 if kind == "optical" else float(el_mask[0])),
        az_min_deg=float(az_mask[0]),
        az_max_deg=float(az_mask[1]) if az_mask[1] < 359.9 else 360.0,
        max_range_km=5000.0 if kind == "radar" else None,
        sigma_range_m=sigma_range * scale if kind == "radar" and sigma_range else None,
        sigma_angle_deg=sigma_angle,
        sigma_range_rate_ms=2.0 if kind == "radar" else None,
    )


def load_sensors(path: str | Path | None = None) -> dict[str, Sensor]:
    """Sensors by id, from the embedded registry or a CSV in registry or RESONAATE format."""
    if path is None:
        text = resources.files("sda").joinpath("data/sensors.csv").read_text()
    else:
        text = Path(path).read_text()
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise ValueError(f"no sensors in {path or 'the embedded registry'}")
    parse = _from_registry_row if "sensor_id" in rows[0] else _from_resonaate_row
    sensors: dict[str, Sensor] = {}
    for row in rows:
        sensor = parse(row)
        sensors.setdefault(sensor.sensor_id, sensor)  # RESONAATE lists some sites once per face
    return sensors


def name_key(name: str) -> str:
    """A name as compared with the names a registry or catalogue knows: upper case, each run of
    characters other than letters and digits one blank (``Cape Cod`` = ``CAPE-COD`` = ``cape_cod``)."""
    return re.sub(r"[^A-Z0-9]+", " ", str(name).upper()).strip()


def sensor_aliases(sensors: Mapping[str, Sensor] | None = None) -> dict[str, str | None]:
    """:func:`name_key` of every name a sensor is known by -> its ``sensor_id``: the ids and ``name`` of
    ``sensors`` (None: the embedded registry) and the embedded ``data/sensor_aliases.csv`` rows of
    sensors it holds. A name two sensors share maps to None (ambiguous: not resolved)."""
    sensors = load_sensors() if sensors is None else sensors
    text = resources.files("sda").joinpath("data/sensor_aliases.csv").read_text()
    pairs = [(s.sensor_id, s.sensor_id) for s in sensors.values()] + [(s.name, s.sensor_id) for s in sensors.values()]
    pairs += [(row["alias"], row["sensor_id"].strip()) for row in csv.DictReader(text.splitlines())
              if row["sensor_id"].strip() in sensors]
    out: dict[str, str | None] = {}
    for name, sensor_id in pairs:
        key = name_key(name)
        if key:
            out[key] = sensor_id if out.get(key, sensor_id) == sensor_id else None
    return out


# Sensor noise used when the registry has no value for an observation's sensor.
DEFAULT_SIGMAS = {
    "radar": {"sigma_range_m": 30.0, "sigma_angle_rad": math.radians(0.0154), "sigma_range_rate_ms": 2.0},
    "optical": {"sigma_angle_rad": math.radians(1.0 / 3600.0)},
    "isl": {"sigma_pos_m": 50.0},
}
SIGMA_COLUMNS = ("sigma_range_m", "sigma_angle_rad", "sigma_range_rate_ms", "sigma_pos_m")

_EMBEDDED: dict[str, dict[str, float]] | None = None  # sensor_sigmas(None), read once


def sensor_sigmas(sensors: Mapping[str, Sensor] | None) -> dict[str, dict[str, float]]:
    """``{sensor_id: {sigma column: value}}`` (SI: m, rad, m/s) from a registry of
    :class:`sda.orbit.sensors.Sensor` (None: the embedded registry); blanks are left out."""
    global _EMBEDDED
    if sensors is None:
        if _EMBEDDED is None:
            _EMBEDDED = sensor_sigmas(load_sensors())
        return _EMBEDDED
    out: dict[str, dict[str, float]] = {}
    for sid, s in sensors.items():
        values = {
            "sigma_range_m": s.sigma_range_m,
            "sigma_angle_rad": None if s.sigma_angle_deg is None else math.radians(s.sigma_angle_deg),
            "sigma_range_rate_ms": s.sigma_range_rate_ms,
            "sigma_pos_m": s.sigma_pos_m,
        }
        out[sid] = {k: float(v) for k, v in values.items() if v is not None}
    return out


def observation_sigmas(obs: pd.DataFrame, sigmas: Mapping[str, Mapping[str, float]]) -> dict[str, np.ndarray]:
    """Per observation, each sensor sigma: the registry's value for its sensor, else its kind's default."""
    # looked up once per distinct sensor and kind (a group holds a handful), then spread by code
    sensor_codes, sensor_list = pd.factorize(obs["sensor_id"] if "sensor_id" in obs else pd.Series([None] * len(obs)))
    kind_codes, kind_list = pd.factorize(obs["sensor_kind"])
    out = {}
    for c in SIGMA_COLUMNS:
        registry = np.append([sigmas.get(sid, {}).get(c, np.nan) for sid in sensor_list], np.nan)[sensor_codes]
        default = np.append([DEFAULT_SIGMAS.get(k, {}).get(c, np.nan) for k in kind_list], np.nan)[kind_codes]
        out[c] = np.where(np.isnan(registry), default, registry).astype(float)
    return out
