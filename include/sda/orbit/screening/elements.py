"""Element sets for the screening: SGP4 ``Satrec`` objects from TLE lines, and TLE lines from mean
elements (synthetic catalogues of tests and benchmarks)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable

from sgp4.api import WGS72, Satrec

from sda.orbit.frames import MU_KM3_S2, R_EARTH_KM


def satrecs_from_lines(line1: Iterable[str], line2: Iterable[str]) -> list[Satrec]:
    return [Satrec.twoline2rv(l1, l2, WGS72) for l1, l2 in zip(line1, line2)]


def tle_from_elements(norad_id: int, epoch: dt.datetime, altitude_km: float, ecc: float, inc_deg: float,
                      raan_deg: float, argp_deg: float, mean_anomaly_deg: float,
                      bstar: float = 0.0) -> tuple[str, str]:
    """TLE lines for mean elements (semi-major axis given as ``altitude_km`` above the equatorial
    radius), through ``sgp4init`` and ``sgp4.exporter`` -- what the catalogue stores."""
    from sgp4 import exporter

    a_km = R_EARTH_KM + altitude_km
    n_rad_min = math.sqrt(MU_KM3_S2 / a_km**3) * 60.0
    epoch_days = (epoch - dt.datetime(1949, 12, 31, tzinfo=dt.timezone.utc)).total_seconds() / 86400.0
    sat = Satrec()
    def wrap(deg: float) -> float:  # the TLE format wants angles in [0, 360)
        return math.radians(deg % 360.0)

    sat.sgp4init(WGS72, "i", int(norad_id), epoch_days, bstar, 0.0, 0.0, ecc, wrap(argp_deg),
                 math.radians(inc_deg), wrap(mean_anomaly_deg), n_rad_min, wrap(raan_deg))
    return exporter.export_tle(sat)
