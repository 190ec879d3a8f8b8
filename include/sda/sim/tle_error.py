"""Catalogue element sets that are wrong the way real ones are (``--tle-age-days``).

Without this mode the simulator observes the very element sets it writes to the catalogue. With it,
each object has two orbits:

* the **catalogue** element set: the published orbit re-epoched so that the epoch lies ``age`` days
  before ``--start`` (``age`` drawn per object, uniform in the run's ``[lo, hi]``) by
  :func:`reepoch` (SGP4's mean elements at the new epoch, anchored on the published set's position at
  ``--start``: the catalogue's objects stay where they are relative to one another); this is what
  the catalogue file holds and what the pipeline predicts from;
* the **true** orbit the sensors observe: the catalogue's elements at the same epoch, perturbed so
  that its position error follows :mod:`sda.orbit.uncertainty`'s model for that regime and age.

The perturbation is one of the orbit, not noise on the measurements, so the error evolves along the
orbit as a real element-set error does. With ``a`` the semi-major axis, ``A`` the age at the run's
middle and ``sigma_R, sigma_T, sigma_N`` the model's sigmas there (:func:`sda.orbit.uncertainty.sigma_rtn_m`):

* **radial**: the eccentricity vector ``(e cos w, e sin w)`` moves by two independent normal draws of
  sigma ``sigma_R / a`` (the mean argument of latitude ``w + M`` kept): the radial error oscillates
  once per revolution with sigma ``sigma_R`` at any instant, and brings an along-track oscillation
  of sigma ``2 sigma_R`` with it;
* **cross-track**: the orbit normal tilts by two independent normal draws of sigma ``sigma_N / a``
  (node and inclination from the tilted normal; the argument of perigee moves by
  ``-dOmega cos i`` so that the tilt is not also an along-track shift; near the equator the
  inclination alone, see :func:`_tilt`): sigma ``sigma_N`` at any instant;
* **along-track**: one normal draw ``z`` per object sets a mean-anomaly offset and a mean-motion
  offset so that the along-track error is ``z * s * (sigma_T + rate_T * (age - A))`` with
  ``rate_T = d sigma_T / d age`` at ``A`` (the model's linear and quadratic growth; SGP4 has no
  mean-motion-derivative term, so the drag term is linearised about the run, off by
  ``q_T (age - A)^2``: < 25 m over half a day) and ``s = sqrt(1 - (2 sigma_R / sigma_T)^2)`` leaving
  room for the eccentricity's share: the error grows through the run as the model says.

Objects published with one element set (docked vehicles share their station's) share one true
orbit. The injected conjunction pair (99901/99902) is left exact. The truth records, per object, both
element sets, the age and the realised RTN error at the run's middle (``_truth/<sim_id>.orbits.jsonl``),
and per observation the RTN error (true - catalogue, on the catalogue orbit's axes) at its time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Sequence

import numpy as np
from sgp4 import exporter
from sgp4.api import WGS72, Satrec

from sda.orbit import frames, uncertainty
from sda.orbit.catalog import CatalogEntry, parse_tle_text, synthetic
from sda.sim.conjunction import PRIMARY_ID, SECONDARY_ID

MAX_AGE_DAYS = 30.0
J2_WGS72 = synthetic.J2_WGS72
XKE_WGS72 = 60.0 / math.sqrt(synthetic.RE_WGS72**3 / synthetic.MU_WGS72)  # sqrt(mu) in Earth radii^1.5 per minute


def parse_age(text: str) -> tuple[float, float]:
    """``"1"`` -> (1, 1); ``"0.5:3"`` -> (0.5, 3): ages in days, 0 < lo <= hi <= MAX_AGE_DAYS."""
    parts = str(text).split(":")
    try:
        lo, hi = (float(parts[0]), float(parts[-1])) if len(parts) <= 2 else (math.nan, math.nan)
    except ValueError:
        lo = hi = math.nan
    if not (0.0 < lo <= hi <= MAX_AGE_DAYS):
        raise ValueError(f"--tle-age-days {text!r}: expected DAYS or LO:HI with 0 < LO <= HI <= {MAX_AGE_DAYS:g}")
    return lo, hi


@dataclasses.dataclass
class TleErrors:
    """The catalogue (re-epoched) entries, each object's true Satrec, and the per-object truth rows."""

    catalogue: list[CatalogEntry]
    true_sats: dict[int, Satrec]
    orbits: list[dict]
    age_days: tuple[float, float]

    def catalogue_text(self) -> str:
        return "".join(f"{e.name}\n{e.line1}\n{e.line2}\n" for e in self.catalogue)


def _init(sat: Satrec, epoch_days: float, *, ecco, argpo, inclo, mo, no_kozai, nodeo) -> Satrec:
    if inclo < 0.0:  # (near-equatorial deep-space mean elements): the same plane, node and perigee turned by pi
        inclo, nodeo, argpo = -inclo, nodeo + math.pi, argpo + math.pi
    out = Satrec()
    out.sgp4init(WGS72, "i", sat.satnum, epoch_days, sat.bstar, sat.ndot, sat.nddot, float(ecco),
                 float(np.mod(argpo, 2 * np.pi)), float(inclo), float(np.mod(mo, 2 * np.pi)), float(no_kozai),
                 float(np.mod(nodeo, 2 * np.pi)))
    out.classification = getattr(sat, "classification", "U") or "U"
    out.intldesg = getattr(sat, "intldesg", "") or ""
    out.elnum = getattr(sat, "elnum", 0) or 0
    out.revnum = getattr(sat, "revnum", 0) or 0
    return out


def kozai_mean_motion(n_brouwer: float, ecco: float, inclo: float) -> float:
    """The TLE (Kozai) mean motion whose SGP4 initialisation (``initl``) gives Brouwer mean motion
    ``n_brouwer`` [rad/min]: SGP4's conversion inverted by fixed-point iteration."""
    cosio = math.cos(inclo)
    omeosq = 1.0 - ecco * ecco
    d1 = 0.75 * J2_WGS72 * (3.0 * cosio * cosio - 1.0) / (math.sqrt(omeosq) * omeosq)
    n = n_brouwer
    for _ in range(50):
        ak = (XKE_WGS72 / n) ** (2.0 / 3.0)
        d = d1 / (ak * ak)
        adel = ak * (1.0 - d * d - d * (1.0 / 3.0 + 134.0 * d * d / 81.0))
        n_next = n_brouwer * (1.0 + d1 / (adel * adel))
        if abs(n_next - n) < 1e-15:
            break
        n = n_next
    return n


def reepoch(sat: Satrec, epoch_unix: float, anchor_unix: float) -> Satrec:
    """The element set of ``sat``'s orbit with its epoch moved to ``epoch_unix``: SGP4's own mean
    elements there (its secular J2 and drag terms applied), the mean anomaly then shifted so that at
    ``anchor_unix`` the new set is where ``sat`` is (SGP4 restarts its drag terms at the new epoch).
    Re-epoching the published elements unchanged would move every object along its orbit by its
    mean motion times its epoch shift, and put objects of one plane on top of one another."""
    jd, fr = frames.unix_to_jd(epoch_unix)
    epoch_days = float(jd + fr) - frames.SGP4_EPOCH_JD
    if sat.sgp4(float(jd), float(fr))[0] != 0:  # cannot be propagated there: keep its elements
        return _init(sat, epoch_days, ecco=sat.ecco, argpo=sat.argpo, inclo=sat.inclo, mo=sat.mo,
                     no_kozai=sat.no_kozai, nodeo=sat.nodeo)
    elements = dict(ecco=min(max(sat.em, 0.0), 0.99), argpo=sat.om, inclo=sat.im, nodeo=sat.Om,
                    no_kozai=kozai_mean_motion(sat.nm, min(max(sat.em, 0.0), 0.99), sat.im))
    mo = sat.mm
    new = _init(sat, epoch_days, mo=mo, **elements)
    for _ in range(2):
        _, r, v = frames.propagate([sat, new], np.array([anchor_unix]))
        if not np.isfinite(r).all():
            break
        r0, v0, r1 = r[0, 0], v[0, 0], r[1, 0]
        h = np.cross(r0, v0)
        lag = math.atan2(float(np.cross(r1, r0) @ h) / np.linalg.norm(h), float(r1 @ r0))  # rad the new set is behind
        mo += lag
        new = _init(sat, epoch_days, mo=mo, **elements)
    return new


def _lines(sat: Satrec) -> tuple[str, str]:
    line1, line2 = exporter.export_tle(sat)
    return line1, line2


MAX_NODE_SHIFT_RAD = math.radians(1.0)


def _tilt(inclo: float, nodeo: float, argpo: float, w1: float, w2: float) -> tuple[float, float, float]:
    """Tilt the orbit normal by (w1, w2) rad along (node line, normal x node line): new (i, Omega, w).

    Near the equator that tilt would swing the node by a large angle, and SGP4's deep-space
    lunisolar terms are not invariant under swapping node for perigee there (10 km at GEO): the tilt
    then goes into the inclination alone, by ``|w|`` (the cross-track error ``a |w| sin u`` has the same
    variance over the orbit)."""
    h = np.array([math.sin(inclo) * math.sin(nodeo), -math.sin(inclo) * math.cos(nodeo), math.cos(inclo)])
    e1 = np.array([math.cos(nodeo), math.sin(nodeo), 0.0])
    e2 = np.cross(h, e1)
    h2 = h + w1 * e1 + w2 * e2
    h2 /= np.linalg.norm(h2)
    incl = math.acos(max(-1.0, min(1.0, h2[2])))
    node = math.atan2(h2[0], -h2[1]) if math.hypot(h2[0], h2[1]) > 0 else nodeo
    d_node = (node - nodeo + math.pi) % (2 * math.pi) - math.pi
    if abs(d_node) > MAX_NODE_SHIFT_RAD:
        size = math.hypot(w1, w2)
        return (inclo + size if (w1 >= 0 or inclo <= size) else inclo - size), nodeo, argpo
    return incl, node, argpo - d_node * math.cos(inclo)


def perturb(sat: Satrec, sigma_rtn_m: Sequence[float], along_rate_m_day: float, age_days: float,
            draws: Sequence[float]) -> Satrec:
    """The true orbit of catalogue element set ``sat`` (see the module docstring): ``sigma_rtn_m`` and
    ``along_rate_m_day`` are the model's at ``age_days`` (days after ``sat``'s epoch); ``draws`` five
    standard normals (along-track, two eccentricity, two tilt)."""
    s_r, s_t, s_n = (float(x) for x in sigma_rtn_m)
    z, g1, g2, p1, p2 = (float(x) for x in draws)
    a_m = sat.a * sat.radiusearthkm * 1000.0
    share = math.sqrt(max(0.0, 1.0 - (2.0 * s_r / s_t) ** 2)) if s_t > 0 else 0.0
    along_epoch = z * share * (s_t - along_rate_m_day * age_days)  # the along-track error at the epoch
    d_mo = along_epoch / a_m
    d_n = z * share * along_rate_m_day / a_m / 1440.0  # rad/min per day of age -> rad/min
    ex = sat.ecco * math.cos(sat.argpo) + s_r / a_m * g1
    ey = sat.ecco * math.sin(sat.argpo) + s_r / a_m * g2
    ecco = min(math.hypot(ex, ey), 0.99)
    argp = math.atan2(ey, ex) if ecco > 0 else sat.argpo
    mo = sat.mo + d_mo + (sat.argpo - argp)  # keep the mean argument of latitude
    incl, node, argp = _tilt(sat.inclo, sat.nodeo, argp, s_n / a_m * p1, s_n / a_m * p2)
    epoch_days = sat.jdsatepoch + sat.jdsatepochF - frames.SGP4_EPOCH_JD
    return _init(sat, epoch_days, ecco=ecco, argpo=argp, inclo=incl, mo=mo, no_kozai=sat.no_kozai + d_n, nodeo=node)


def element_set_key(line1: str, line2: str) -> str:
    """An element set without the object's identity: epoch (line 1 columns 19-32) and the orbit's
    elements (line 2 columns 9-63). Objects with the same key cannot be told apart by any sensor."""
    return line1[18:32] + line2[8:63]


def rtn_error_m(r_true: np.ndarray, r_cat: np.ndarray, v_cat: np.ndarray) -> np.ndarray:
    """True - catalogue position (km in, m out) on the catalogue orbit's R, T, N axes, over the last axis."""
    radial = r_cat / np.linalg.norm(r_cat, axis=-1, keepdims=True)
    h = np.cross(r_cat, v_cat)
    cross = h / np.linalg.norm(h, axis=-1, keepdims=True)
    along = np.cross(cross, radial)
    d = (r_true - r_cat) * 1000.0
    return np.stack([np.sum(d * radial, axis=-1), np.sum(d * along, axis=-1), np.sum(d * cross, axis=-1)], axis=-1)


def apply(entries: list[CatalogEntry], start: dt.datetime, end: dt.datetime, age_days: tuple[float, float],
          seed: int) -> TleErrors:
    """Re-epoch every entry ``age`` days before ``start`` and build its true orbit (module docstring)."""
    rng = np.random.default_rng([seed, 5])
    lo, hi = age_days
    ages = rng.uniform(lo, hi, len(entries)) if hi > lo else np.full(len(entries), lo)
    draws = rng.standard_normal((len(entries), 5))
    # Objects published with one element set (a docked stack: the ISS and its visiting vehicles) are
    # one body: they share one age and one true orbit.
    first: dict[str, int] = {}
    for k, e in enumerate(entries):
        k0 = first.setdefault(element_set_key(e.line1, e.line2), k)
        ages[k], draws[k] = ages[k0], draws[k0]
    start_unix = start.timestamp()
    mid_unix = 0.5 * (start.timestamp() + end.timestamp())
    texts, keep = [], []
    for k, e in enumerate(entries):
        if e.norad_id in (PRIMARY_ID, SECONDARY_ID):
            continue
        sat = e.satrec
        cat = reepoch(sat, start_unix - ages[k] * 86400.0, start_unix)
        line1, line2 = _lines(cat)
        texts.append(f"{e.name}\n{line1}\n{line2}\n")
        keep.append(k)
    catalogue, _ = parse_tle_text("".join(texts))
    orbits = []
    true_sats: dict[int, Satrec] = {}
    for k, e in zip(keep, catalogue):
        sat = e.satrec
        epoch_unix = (sat.jdsatepoch + sat.jdsatepochF - frames.UNIX_EPOCH_JD) * 86400.0
        hp, ha = frames.perigee_apogee_km(sat)
        ref = uncertainty.tle_reference(epoch_unix, hp, ha)
        sig = uncertainty.sigma_rtn_m(ref, mid_unix)
        age_mid = (mid_unix - epoch_unix) / 86400.0
        rate = ref.regime.rate_m_day[1] + 2.0 * ref.regime.accel_t_m_day2 * age_mid
        true = perturb(sat, sig, rate, age_mid, draws[k])
        line1, line2 = _lines(true)
        true = Satrec.twoline2rv(line1, line2, WGS72)  # what the truth file says is what was observed
        true_sats[e.norad_id] = true
        _, rc, vc = frames.propagate([sat, true], np.array([mid_unix]))
        err = rtn_error_m(rc[1, 0], rc[0, 0], vc[0, 0])
        orbits.append({"norad_id": e.norad_id, "regime": ref.regime.name, "age_days": round(age_mid, 6),
                       "catalogue": [e.line1, e.line2], "true": [line1, line2],
                       "model_sigma_rtn_m": [round(float(x), 1) for x in sig],
                       "error_rtn_m": [None if not np.isfinite(x) else round(float(x), 1) for x in err]})
    passthrough = [e for e in entries if e.norad_id in (PRIMARY_ID, SECONDARY_ID)]
    return TleErrors(catalogue + passthrough, true_sats, orbits, (lo, hi))
