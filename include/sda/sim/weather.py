"""The harsher sky's space weather (``--sky harsh|storm``): what the truth's drag sees, and the files operators get.

**What the truth's thermosphere does.** The kinder sky's drag is NRLMSISE-00 driven by brahe's packaged
space-weather record, which for the simulated dates is a forecast: one Ap a day. In the harsher skies the
geomagnetic activity varies every three hours (:meth:`Weather.ap`):

* **within the day**: each 3-hour ap is the forecast's daily Ap times ``exp(0.5 z)``, ``z`` a moving average
  of unit normal draws of this and the two previous intervals (weights 1, 0.7, 0.5, normalised), rounded to
  the ap scale (:data:`AP_SCALE`), so the quiet days' ap wanders between about half and twice the forecast;
* **a geomagnetic storm** (``--sky storm``): from its onset (:attr:`Weather.storm_onset`, on a 3-hour
  boundary) the ap follows :data:`STORM_AP` -- Kp 6- rising to 8+ within six hours, at 7- or more for twelve
  hours, back to quiet a day and a half later.

The density answers the ap three hours late (the thermosphere's lag behind the magnetosphere): the drag of a
body whose perigee is ``h`` km is NRLMSISE-00's (on the forecast's indices) times
``((ap(t - 3 h) + 20) / (Ap_forecast(t) + 20)) ** gamma(h)``, ``gamma = 0.001 h - 0.02`` (0.2-0.9): a fit to
NRLMSISE-00's own density response to daily Ap at 300, 450 and 700 km (daily Ap 12-300 against 5; within about
10 %). At 450 km a storm's ap of 207-236 raises the density 2.5-2.8 times; at 300 km 1.9 times. Drag in the truth
is piecewise constant over :data:`SEGMENT_S` (:func:`sda.sim.dynamics.integrate` restarts the integration at
each boundary with the new factor), so the density follows the 3-hourly indices without an integration per
3-hour value.

**What the pipeline gets** (:meth:`Weather.cssi`): space-weather files as CelesTrak publishes them (the CSSI
format of SW-Last5Years.txt), issued every three hours and landed under ``<landing>/space_weather/``: every
3-hour Kp and ap whose interval has ended by the issue time is observed, the rest of the issue day and the
next 45 days are the forecast (brahe's packaged record: the forecast the truth's baseline is). A storm
is in the files only from the first issue after its onset. F10.7 and its 81-day averages are the
forecast's (the truth uses those too). The truth's density factors and ap are recorded in the truth summary;
the pipeline never reads them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math

import numpy as np

SLOT_S = 10_800.0  # the indices' 3-hour intervals
SEGMENT_S = 1_800.0  # drag is constant over these in the truth (sda.sim.dynamics.integrate)
LAG_S = 10_800.0  # the density follows the ap of three hours before
AP_SCALE = (0, 2, 3, 4, 5, 6, 7, 9, 12, 15, 18, 22, 27, 32, 39, 48, 56, 67, 80, 94, 111, 132, 154, 179, 207,
            236, 300, 400)  # ap of Kp 0o, 0+, 1-, 1o, ... 9o (the Bartels table)
STORM_AP = (67, 154, 207, 236, 207, 154, 111, 80, 56, 39, 27, 18)  # a storm's ap, 3-hourly from its onset
WITHIN_DAY_SIGMA = 0.5
MA_WEIGHTS = (1.0, 0.7, 0.5)
DAYS_BACK, DAYS_AHEAD = 30, 45  # a landed file's observed and daily-predicted days
MJD_UNIX0 = 40587.0  # MJD of 1970-01-01
BARTELS_2636, MJD_BARTELS_2636 = 2636, 61366.0  # Bartels rotation 2636 began 2026-11-22; rotations are 27 days


def kp10(ap: float) -> int:
    """The CSSI Kp field (tenths, thirds rounded: 0, 3, 7, 10, 13, ...) of an ap on the Bartels scale."""
    k = int(np.searchsorted(AP_SCALE, ap, side="right")) - 1
    return int(round(10.0 * k / 3.0))


def gamma(perigee_km: float) -> float:
    """How strongly the density at ``perigee_km`` answers the ap (module docstring)."""
    return float(min(0.9, max(0.2, 0.001 * perigee_km - 0.02)))


@functools.cache
def _forecast():
    from sda.orbit.estimation.brahe_setup import brahe

    return brahe().FileSpaceWeatherProvider.from_default_file()


def mjd(unix_s: float) -> float:
    return MJD_UNIX0 + unix_s / 86400.0


@dataclasses.dataclass(frozen=True)
class Weather:
    """A harsher sky's space weather: its own stream (seed, 11) and the storm's onset (unix s), if any."""

    seed: int
    storm_onset: float | None = None

    @staticmethod
    def of(cfg) -> "Weather | None":
        """The weather of a simulation's configuration (None in the kinder sky)."""
        sky = getattr(cfg, "sky", "kind")
        if sky == "kind":
            return None
        return Weather(int(cfg.seed), storm_onset(cfg) if sky == "storm" else None)

    def forecast_ap(self, unix_s: float) -> float:
        return _forecast_ap(math.floor(mjd(unix_s)))

    def ap(self, slot: int) -> int:
        """The true ap of 3-hour interval ``slot`` (its start is ``slot * SLOT_S`` unix seconds)."""
        return _ap(self.seed, self.storm_onset, slot)

    def factor(self, unix_s: float, perigee_km: float) -> float:
        """The truth's density over NRLMSISE-00's on the forecast, at ``unix_s`` for a perigee of ``perigee_km``."""
        ap = self.ap(int(math.floor((unix_s - LAG_S) / SLOT_S)))
        return float(((ap + 20.0) / (self.forecast_ap(unix_s) + 20.0)) ** gamma(perigee_km))

    def as_json(self, t0: float, t1: float) -> dict:
        slots = range(int(math.floor(t0 / SLOT_S)), int(math.ceil(t1 / SLOT_S)))
        return {"model": "NRLMSISE-00 on the forecast x ((ap(t - 3 h) + 20) / (Ap_forecast + 20)) ** gamma(perigee)",
                "seed": self.seed, "storm_onset": None if self.storm_onset is None else _iso(self.storm_onset),
                "ap": {_iso(s * SLOT_S): self.ap(s) for s in slots},
                "density_factor_450km": {_iso(s * SLOT_S + SEGMENT_S / 2): round(self.factor(s * SLOT_S + SEGMENT_S / 2,
                                                                                          450.0), 3) for s in slots}}

    def cssi(self, issued: float) -> str:
        """The space-weather file issued at ``issued`` (unix s), in CelesTrak's CSSI format (module docstring)."""
        day0 = math.floor(issued / 86400.0)
        observed = [self._row(d, issued) for d in range(day0 - DAYS_BACK, day0)]
        predicted = [self._row(d, issued) for d in range(day0, day0 + DAYS_AHEAD)]
        stamp = dt.datetime.fromtimestamp(issued, dt.timezone.utc)
        return "\n".join([
            "DATATYPE CssiSpaceWeather", "VERSION 1.2", f"UPDATED {stamp:%Y %b %d %H:%M:%S} UTC",
            "# " + "-" * 126, "#                              SPACE WEATHER DATA", "# " + "-" * 126,
            "# FORMAT(I4,I3,I3,I5,I3,8I3,I4,8I4,I4,F4.1,I2,I4,F6.1,I2,5F6.1)",
            "# yy mm dd BSRN ND Kp Kp Kp Kp Kp Kp Kp Kp Sum Ap  Ap  Ap  Ap  Ap  Ap  Ap  Ap  Avg Cp C9 ISN F10.7 Q "
            "Ctr81 Lst81 F10.7 Ctr81 Lst81", "#",
            f"NUM_OBSERVED_POINTS {len(observed)}", "BEGIN OBSERVED", *observed, "END OBSERVED", "",
            f"NUM_DAILY_PREDICTED_POINTS {len(predicted)}", "BEGIN DAILY_PREDICTED", *predicted, "END DAILY_PREDICTED",
            ""])

    def _row(self, day: int, issued: float) -> str:
        """One day's CSSI line: the true ap of its intervals that ended by ``issued``, the forecast's after."""
        f = _forecast()
        m = MJD_UNIX0 + day
        aps = []
        for i in range(8):
            start = day * 86400.0 + i * SLOT_S
            aps.append(self.ap(int(start // SLOT_S)) if start + SLOT_S <= issued else
                       AP_SCALE[int(np.argmin([abs(a - f.get_ap_daily(m)) for a in AP_SCALE]))])
        kps = [kp10(a) for a in aps]
        date = dt.date(1970, 1, 1) + dt.timedelta(days=day)
        bartels = BARTELS_2636 + int((m - MJD_BARTELS_2636) // 27)
        nd = int((m - MJD_BARTELS_2636) % 27) + 1
        q = " 0" if day * 86400.0 + 86400.0 <= issued else "  "
        mean_ap = sum(aps) / 8.0  # Cp and C9 (the day's character) roughly from it: they are not used
        line = (f"{date.year:4d}{date.month:3d}{date.day:3d}{bartels:5d}{nd:3d}" + "".join(f"{k:3d}" for k in kps)
                + f"{sum(kps):4d}" + "".join(f"{a:4d}" for a in aps) + f"{round(mean_ap):4d}"
                + f"{min(2.5, mean_ap / 40):4.1f}{min(9, round(mean_ap / 15)):2d}{f.get_sunspot_number(m):4.0f}"
                + f"{f.get_f107_adjusted(m):6.1f}{q}{f.get_f107_adj_avg81(m):6.1f}{f.get_f107_adj_avg81(m):6.1f}"
                + f"{f.get_f107_observed(m):6.1f}{f.get_f107_obs_avg81(m):6.1f}{f.get_f107_obs_avg81(m):6.1f}")
        return line


@functools.lru_cache(maxsize=4096)
def _forecast_ap(day_mjd: int) -> float:
    return float(_forecast().get_ap_daily(day_mjd))


@functools.lru_cache(maxsize=65536)
def _ap(seed: int, onset: float | None, slot: int) -> int:
    """:meth:`Weather.ap`, once per interval: the truth's integration asks for it per body and 30-minute segment."""
    draws = [np.random.default_rng([seed, 11, slot - k]).standard_normal() for k in range(len(MA_WEIGHTS))]
    z = float(np.dot(MA_WEIGHTS, draws) / math.sqrt(sum(w * w for w in MA_WEIGHTS)))
    quiet = _forecast_ap(math.floor(mjd(slot * SLOT_S))) * math.exp(WITHIN_DAY_SIGMA * z)
    ap = AP_SCALE[int(np.argmin([abs(a - quiet) for a in AP_SCALE]))]
    if onset is not None:
        k = slot - int(round(onset / SLOT_S))
        if 0 <= k < len(STORM_AP):
            ap = max(ap, STORM_AP[k])
    return int(ap)


def storm_onset(cfg) -> float:
    """A storm sky's onset: the 3-hour boundary nearest ``cfg.storm_onset`` if set, else the middle of the run."""
    onset = getattr(cfg, "storm_onset", None)
    t = onset.timestamp() if onset is not None else (cfg.start.timestamp() + cfg.end.timestamp()) / 2.0
    return float(round(t / SLOT_S) * SLOT_S)


def issue_times(t0: float, t1: float) -> list[float]:
    """The files issued in ``(t0, t1]``: every 3-hour boundary."""
    first = math.floor(t0 / SLOT_S) + 1
    return [k * SLOT_S for k in range(first, int(math.floor(t1 / SLOT_S)) + 1)]


def file_name(issued: float) -> str:
    return f"space_weather/SW-{dt.datetime.fromtimestamp(issued, dt.timezone.utc):%Y%m%dT%H%M}Z.txt"


def _iso(unix_s: float) -> str:
    return dt.datetime.fromtimestamp(unix_s, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
