"""What a catalogue that only correlates cannot see: manoeuvres and objects that are in no catalogue.

All off by default; each is a setting of :class:`sda.sim.simulate.SimConfig` (and the CLI):

* ``manoeuvre_share``: that share of the bodies manoeuvre (chosen per catalogue number, so the same
  body manoeuvres whatever else is simulated). A LEO, MEO or HEO one makes impulsive burns at
  ``manoeuvre_rate`` per day (Poisson times over the run), each of 0.05-2 m/s (log-uniform) along-track
  (60 %), cross-track (25 %) or radial (15 %), either sign. A GEO one keeps station: east-west burns
  (along-track, 0.05-0.5 m/s) at ``manoeuvre_rate`` per day and north-south burns (cross-track, 1-2 m/s)
  at a tenth of it;
* ``uncatalogued_share``: that share of the observed bodies is left out of the catalogue file the
  pipeline loads (the sensors still see them);
* ``launch``: a fresh launch of :data:`LAUNCH_SIZE` objects (99911...) deployed one to four hours
  before the run from one upper stage into a 550 km, 53 deg orbit, a few kilometres apart along-track
  and drifting apart at 0.1-1 m/s of separation: seen by the sensors, in no catalogue.

The truth lists every burn (time, delta-v on the body's radial / along-track / cross-track axes,
m/s), the uncatalogued bodies and the launch (``_truth/<sim_id>.events.json``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import numpy as np

from sda.orbit import frames
from sda.orbit.catalog import synthetic
from sda.sim.common import hash_int

LAUNCH_FIRST_ID, LAUNCH_SIZE = 99911, 6
DV_RANGE_MS = (0.05, 2.0)
GEO_EW_RANGE_MS, GEO_NS_RANGE_MS = (0.05, 0.5), (1.0, 2.0)


@dataclasses.dataclass(frozen=True)
class Burn:
    """An impulsive manoeuvre: ``dv_rtn_ms`` on the body's radial, along-track, cross-track axes at ``t_unix``."""

    norad_id: int
    t_unix: float
    dv_rtn_ms: tuple[float, float, float]
    kind: str  # manoeuvre | station-keeping east-west | station-keeping north-south

    def as_json(self) -> dict:
        return {"norad_id": self.norad_id, "time": dt.datetime.fromtimestamp(self.t_unix, dt.timezone.utc)
                .isoformat(timespec="milliseconds").replace("+00:00", "Z"), "t_unix": round(self.t_unix, 3),
                "dv_rtn_ms": [round(x, 4) + 0.0 for x in self.dv_rtn_ms],
                "dv_ms": round(math.hypot(*self.dv_rtn_ms), 4), "kind": self.kind}


def _chosen(what: str, seed: int, norad_id: int, share: float) -> bool:
    return share > 0 and (hash_int(what, seed, norad_id) % 1_000_000) < share * 1_000_000


def draw_burns(norad_ids, regimes, start: float, end: float, share: float, rate_per_day: float,
               seed: int) -> list[Burn]:
    """The burns of the manoeuvring bodies over ``[start, end)`` (module docstring), sorted by time."""
    burns: list[Burn] = []
    days = (end - start) / 86400.0
    for norad, regime in zip(norad_ids, regimes):
        if not _chosen("manoeuvre", seed, norad, share):
            continue
        rng = np.random.default_rng([int(seed), 7, int(norad)])
        if regime == "GEO":
            plans = [("station-keeping east-west", rate_per_day, GEO_EW_RANGE_MS, (0.0, 1.0, 0.0)),
                     ("station-keeping north-south", rate_per_day / 10.0, GEO_NS_RANGE_MS, (0.0, 0.0, 1.0))]
        else:
            plans = [("manoeuvre", rate_per_day, DV_RANGE_MS, None)]
        for kind, rate, (lo, hi), axis in plans:
            for _ in range(int(rng.poisson(rate * days))):
                t = float(rng.uniform(start, end))
                size = math.exp(rng.uniform(math.log(lo), math.log(hi))) * (1.0 if rng.random() < 0.5 else -1.0)
                direction = axis or [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)][
                    int(rng.choice(3, p=[0.15, 0.60, 0.25]))]
                burns.append(Burn(int(norad), t, tuple(size * c for c in direction), kind))
    return sorted(burns, key=lambda b: (b.t_unix, b.norad_id))


def uncatalogued(norad_ids, share: float, seed: int) -> set[int]:
    """The bodies left out of the catalogue: ``share`` of them, chosen per catalogue number."""
    return {int(n) for n in norad_ids if _chosen("uncatalogued", seed, n, share)}


def launch_entries(start: dt.datetime, seed: int) -> list[tuple[str, str, str]]:
    """A fresh launch's objects as element sets (what the truth starts them from; no catalogue has them):
    deployed 1-4 h before ``start`` from one orbit, each a few km behind the last, with mean motions
    0.1-1 m/s of separation apart."""
    rng = np.random.default_rng([int(seed), 8])
    deploy = start - dt.timedelta(hours=float(rng.uniform(1.0, 4.0)))
    epoch_jd = frames.UNIX_EPOCH_JD + deploy.timestamp() / 86400.0
    a_km = synthetic.RE_WGS72 + 550.0
    raan, anomaly = float(rng.uniform(0, 360)), float(rng.uniform(0, 360))
    speed = math.sqrt(synthetic.MU_WGS72 / a_km) * 1000.0  # m/s
    out = []
    for k in range(LAUNCH_SIZE):
        dv = float(rng.uniform(0.1, 1.0)) * (k + 1) / LAUNCH_SIZE
        da = 2.0 * a_km * dv / speed  # km: a separation burn along-track raises the orbit
        sat = synthetic.make_satrec(LAUNCH_FIRST_ID + k, epoch_jd, a_km=a_km + da, ecc=2.0e-4, incl_deg=53.0,
                                 raan_deg=raan, argp_deg=0.0, mean_anom_deg=anomaly - 0.03 * k, bstar=1.0e-4,
                                 intldesg="26999" + "ABCDEFGH"[k])
        line1, line2 = synthetic.tle_lines(sat)
        out.append((f"LAUNCH OBJECT {chr(65 + k)}", line1, line2))
    return out
