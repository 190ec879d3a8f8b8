"""New objects from uncorrelated observations: tracklets -> initial orbits -> linked passes -> candidates.

The search runs over observations no catalogued object explains (gold ``uncorrelated``):

1. **Tracklets** (:mod:`sda.orbit.acquisition.tracklets`): each sensor's observations linked within a pass.
2. **Initial orbit** per tracklet (:func:`initial_prior`, :mod:`sda.orbit.estimation.iod`): ISL, the first reported
   state; radar, Gibbs or Herrick-Gibbs on its first, middle and last positions; optical, Gauss on its
   first, middle and last lines of sight. The state is carried to the tracklet's first observation
   (two-body + J2) and refined by the fusion estimator (:func:`sda.orbit.estimation.fit`, all the tracklet's
   observations, the sensors' noise) from a loose prior (:data:`IOD_SIGMA_M`, :data:`IOD_SIGMA_MS`).
3. **Linking across passes** (:func:`acquire`): tracklets in time order; each is offered to the
   candidates (objects so far) whose orbit, carried to it by two-body + J2, falls within a gate that
   grows with the gap (:meth:`AcquireSettings.gate_m`); the candidate and the tracklet are fitted
   together, and the tracklet joins the candidate whose joint fit converges with the smallest weighted
   RMS at most ``max_rms``, keeping at least ``min_kept`` of both sides' observations. A tracklet no
   candidate takes starts one, if its own fit converged.
4. **Confirmation:** a candidate seen in at least ``min_passes`` tracklets whose middles are at least
   ``pass_separation_s`` apart is a new object (:class:`NewObject`), named by its earliest observation
   (``founder``: the stage numbers it from that, so the same observations give the same number).

Everything is a function of the observations (sorted by time, then ``obs_id``), so a replay finds the
same objects; what arrives in which run only decides when.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from sgp4.api import WGS72, Satrec

from sda.orbit import frames
from sda.orbit.acquisition.tracklets import TrackletSettings, teme_positions, tracklets
from sda.orbit.estimation import dynamics
from sda.orbit.estimation.estimator import OdConfig, OdResult, Prior, fit
from sda.orbit.estimation.iod import IodError, gauss, positions_velocity, propagate_j2

IOD_SIGMA_M, IOD_SIGMA_MS = 20_000.0, 200.0  # the initial orbit's prior: loose, the observations decide
#: the new object's element set is fitted to its orbit's prediction over this span: SGP4 follows a few hours
#: of it closely (the correlation of its next passes needs that); over 30 h its error at the epoch was ~1 km
ELEMENT_SET_SPAN_S = 6 * 3600.0
COMPONENTS = {"radar": 4, "optical": 2, "isl": 6}  # residual components per observation
MIN_POINTS = {"radar": 5, "optical": 4, "isl": 3}


@dataclasses.dataclass(frozen=True)
class AcquireSettings:
    tracklet: TrackletSettings = TrackletSettings()
    max_rms: float = 2.0
    #: a joint fit may add at most this much chi-square to the two sides' own fits (scaled by their own
    #: variance level): the 0.1 % tail of chi-square with 6 degrees of freedom, six state parameters shared
    max_joint_increase: float = 22.46
    min_kept: float = 0.8  # share of each side's observations the joint fit must keep
    min_passes: int = 2
    pass_separation_s: float = 1800.0
    gate_base_m: float = 15_000.0
    gate_growth_m_per_h: float = 15_000.0
    max_gap_s: float = 86_400.0  # a candidate not seen for this long takes no new tracklet
    joint_tracklets: int = 3  # a joint fit covers the candidate's newest tracklets (up to this many) and the new one
    config: OdConfig = OdConfig(hold_b=True, max_iterations=15)

    def gate_m(self, gap_s: float) -> float:
        return self.gate_base_m + self.gate_growth_m_per_h * abs(gap_s) / 3600.0


@dataclasses.dataclass
class Candidate:
    obs: pd.DataFrame  # its observations, time order
    result: OdResult
    mids: list[float]  # the middle times of its passes (tracklets at least pass_separation_s apart)
    starts: list[float] = dataclasses.field(default_factory=list)  # each linked tracklet's first time
    kept: set = dataclasses.field(default_factory=set)  # the obs_ids its fits kept

    def frames(self) -> set:
        """(sensor, event time) of its observations: another observation of one sensor at one of these times
        is of another body (one detection per body per frame)."""
        return sighted(self.obs)

    def recent_start(self, n: int) -> float:
        """The first time of its ``n``-th newest tracklet: a joint fit covers the candidate from there on."""
        return self.starts[-n] if len(self.starts) >= n else self.starts[0]

    @property
    def passes(self) -> int:
        """Tracklets at least ``pass_separation_s`` apart, counted greedily in time order."""
        return len(self.mids)


@dataclasses.dataclass(frozen=True)
class NewObject:
    founder: str  # the earliest obs_id: names the object (the stage's provisional number comes from it)
    obs_ids: tuple[str, ...]  # the observations its fit kept
    result: OdResult
    passes: int
    first_obs: float  # unix s of the founder

    @property
    def span_s(self) -> float:
        return float(self.result.epoch - self.first_obs)


def _seconds(obs: pd.DataFrame) -> np.ndarray:
    return (pd.to_datetime(obs["event_time"], utc=True) - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()


def sighted(obs: pd.DataFrame) -> set:
    """(sensor_id, event time rounded to the second) of each observation: a sensor's frame (its detections
    differ by milliseconds, its frames by the cadence)."""
    return set(zip(obs["sensor_id"].astype(str), np.round(_seconds(obs)).astype(np.int64)))


def _three(n: int) -> tuple[int, int, int]:
    return 0, n // 2, n - 1


def initial_state(obs: pd.DataFrame) -> tuple[float, np.ndarray]:
    """(epoch, TEME state m/s) of one tracklet by IOD (module docstring), at its first observation."""
    kind = str(obs["sensor_kind"].iloc[0])
    t = _seconds(obs)
    r, v = teme_positions(obs)
    if kind == "isl":
        return float(t[0]), np.concatenate([r[0], v[0]])
    i, j, k = _three(len(obs))
    if kind == "radar":
        vel = positions_velocity(r[i], r[j], r[k], t[i], t[j], t[k])
        state = np.concatenate([r[j], vel])
    elif kind == "optical":
        los = frames.unit_vector_radec(obs["ra_rad"].to_numpy(float)[[i, j, k]],
                                       obs["dec_rad"].to_numpy(float)[[i, j, k]])
        sites = frames.site_teme(obs["site_lat_deg"].to_numpy(float)[[i, j, k]],
                                 obs["site_lon_deg"].to_numpy(float)[[i, j, k]],
                                 obs["site_alt_m"].to_numpy(float)[[i, j, k]], t[[i, j, k]]) * 1000.0
        r2, v2 = gauss(los, sites, t[[i, j, k]])
        state = np.concatenate([r2, v2])
    else:
        raise IodError(f"no initial orbit from {kind} observations")
    return float(t[0]), propagate_j2(float(t[j]), state, [t[0]])[0]


def loose_prior(epoch: float, state: np.ndarray, source: str = "iod") -> Prior:
    cov = np.diag([IOD_SIGMA_M**2] * 3 + [IOD_SIGMA_MS**2] * 3)
    return Prior(float(epoch), np.asarray(state, float), cov, source=source)


def _good(result: OdResult, settings: AcquireSettings) -> bool:
    return result.converged and result.rms <= settings.max_rms and np.isfinite(result.state).all() \
        and dynamics.perigee_km(result.state) > 100.0


def fit_tracklet(obs: pd.DataFrame, sigmas, settings: AcquireSettings) -> OdResult | None:
    """A tracklet's own orbit (IOD, then the estimator), or None when it has none worth keeping."""
    if len(obs) < MIN_POINTS.get(str(obs["sensor_kind"].iloc[0]), 5):
        return None
    try:
        epoch, state = initial_state(obs)
        result = fit(obs, loose_prior(epoch, state), sigmas, settings.config)
    except (ValueError, ArithmeticError, dynamics.PropagationError, np.linalg.LinAlgError):
        return None
    return result if _good(result, settings) else None


def _predicted_miss(cand: Candidate, obs: pd.DataFrame) -> float:
    """Median position miss (m) of the candidate's orbit, carried by two-body + J2, at the tracklet's
    observations (optical: the miss across the line of sight at the predicted range)."""
    t = _seconds(obs)
    pred = propagate_j2(cand.result.epoch, cand.result.state, t)[:, :3]
    if str(obs["sensor_kind"].iloc[0]) == "optical":
        ra, dec = frames.radec(pred / 1000.0, obs["site_lat_deg"].to_numpy(float),
                               obs["site_lon_deg"].to_numpy(float), obs["site_alt_m"].to_numpy(float), t)
        u_pred, u_obs = frames.unit_vector_radec(ra, dec), frames.unit_vector_radec(
            obs["ra_rad"].to_numpy(float), obs["dec_rad"].to_numpy(float))
        sites = frames.site_teme(obs["site_lat_deg"].to_numpy(float), obs["site_lon_deg"].to_numpy(float),
                                 obs["site_alt_m"].to_numpy(float), t) * 1000.0
        rng = np.linalg.norm(pred - sites, axis=1)
        return float(np.median(np.linalg.norm(u_pred - u_obs, axis=1) * rng))
    r, _ = teme_positions(obs)
    return float(np.median(np.linalg.norm(pred - r, axis=1)))


def chi2(result: OdResult) -> tuple[float, int]:
    """A fit's weighted sum of squared residuals and how many residual components it used (approximately:
    :data:`COMPONENTS` per observation kept)."""
    m = sum(COMPONENTS.get(kind, 3) * n for kind, n in result.used.items())
    return float(result.rms) ** 2 * m, m


def joint_fit(cand: Candidate, obs: pd.DataFrame, sigmas, settings: AcquireSettings,
              own: OdResult | None = None) -> OdResult | None:
    """The candidate's and the tracklet's observations fitted together, from the candidate's orbit carried
    back to its first observation (a loose prior), or None when the fit fails its tests."""
    recent = cand.obs[_seconds(cand.obs) >= cand.recent_start(settings.joint_tracklets)]
    both = pd.concat([recent, obs], ignore_index=True).sort_values(["event_time", "obs_id"], kind="stable")
    t0 = float(_seconds(both).min())
    try:
        start = propagate_j2(cand.result.epoch, cand.result.state, [t0])[0]
        result = fit(both, loose_prior(t0, start), sigmas, settings.config)
    except (ValueError, ArithmeticError, dynamics.PropagationError, np.linalg.LinAlgError):
        return None
    if not _good(result, settings):
        return None
    # one object, or two? the chi-square the joint fit adds to the sides' own fits (a tracklet without an
    # orbit of its own counts at the noise level), in units of their own variance level
    (j_c, m_c), (j_t, m_t) = chi2(cand.result), chi2(own) if own is not None else (float(len(obs) * 3), len(obs) * 3)
    j, _ = chi2(result)
    level = max(1.0, (j_c + j_t) / max(m_c + m_t, 1))
    if (j - j_c - j_t) / level > settings.max_joint_increase:
        return None
    kept = set(result.accepted_ids)
    for side in (recent, obs):
        if np.mean([i in kept for i in side["obs_id"]]) < settings.min_kept:
            return None
    return result


def _offer(cands: list[Candidate], obs: pd.DataFrame, mid: float, own: OdResult | None, sigmas,
           settings: AcquireSettings) -> bool:
    best: tuple[float, int, OdResult] | None = None
    seen = sighted(obs)
    for n, cand in enumerate(cands):
        gap = mid - cand.result.epoch
        if gap <= 0 or gap > settings.max_gap_s or seen & cand.frames():
            continue
        try:
            if _predicted_miss(cand, obs) > settings.gate_m(gap):
                continue
        except IodError:
            continue
        result = joint_fit(cand, obs, sigmas, settings, own)
        if result is not None and (best is None or result.rms < best[0]):
            best = (result.rms, n, result)
    if best is None:
        return False
    cand = cands[best[1]]
    recent = set(cand.obs.loc[_seconds(cand.obs) >= cand.recent_start(settings.joint_tracklets), "obs_id"])
    cand.kept = (cand.kept - recent) | set(best[2].accepted_ids)
    cand.obs = pd.concat([cand.obs, obs], ignore_index=True).sort_values(["event_time", "obs_id"], kind="stable")
    cand.result = best[2]
    cand.starts.append(float(_seconds(obs).min()))
    if mid - cand.mids[-1] >= settings.pass_separation_s:
        cand.mids.append(mid)
    return True


def _merged(cands: list[Candidate], sigmas, settings: AcquireSettings) -> list[Candidate]:
    """The candidates with each pair that one orbit fits (an object whose passes started two) joined, the
    later into the earlier, in order."""
    out: list[Candidate] = []
    for cand in cands:
        for head in out:
            if head.frames() & cand.frames():
                continue  # seen side by side: two bodies
            mid = float(np.median(_seconds(cand.obs)))
            gap = mid - head.result.epoch
            try:
                near = abs(gap) <= settings.max_gap_s and _predicted_miss(head, cand.obs) <= settings.gate_m(gap)
            except IodError:
                near = False
            # the part of it its orbit was fitted to, so the joint test weighs like against like
            part = cand.obs[_seconds(cand.obs) >= cand.recent_start(settings.joint_tracklets)]
            result = joint_fit(head, part, sigmas, settings, cand.result) if near else None
            if result is not None:
                head.obs = pd.concat([head.obs, cand.obs], ignore_index=True).sort_values(
                    ["event_time", "obs_id"], kind="stable")
                head.result = result
                head.starts = sorted(head.starts + cand.starts)
                head.kept = head.kept | cand.kept
                head.mids = _separated(sorted(head.mids + cand.mids), settings.pass_separation_s)
                break
        else:
            out.append(cand)
    return out


def _separated(mids: list[float], separation: float) -> list[float]:
    out: list[float] = []
    for m in mids:
        if not out or m - out[-1] >= separation:
            out.append(m)
    return out


def acquire(obs: pd.DataFrame, sigmas, settings: AcquireSettings = AcquireSettings()) -> list[NewObject]:
    """The confirmed new objects among ``obs`` (FIT_COLUMNS rows no catalogued object explains), ordered
    by founder (module docstring)."""
    if obs.empty:
        return []
    obs = obs.sort_values(["event_time", "obs_id"], kind="stable").reset_index(drop=True)
    labels = tracklets(obs, settings.tracklet)
    t = _seconds(obs)
    order = sorted(np.unique(labels), key=lambda k: (t[labels == k].min(), k))
    cands: list[Candidate] = []
    for k in order:
        part = obs[labels == k].reset_index(drop=True)
        mid = float(np.median(t[labels == k]))
        if len(part) < 3:
            continue
        own = fit_tracklet(part, sigmas, settings)
        if _offer(cands, part, mid, own, sigmas, settings):
            continue
        if own is not None:
            cands.append(Candidate(part, own, [mid], [float(t[labels == k].min())], set(own.accepted_ids)))
    found = []
    for cand in _merged(cands, sigmas, settings):
        if cand.passes < settings.min_passes:
            continue
        kept = tuple(sorted(cand.kept))
        first = cand.obs.sort_values(["event_time", "obs_id"], kind="stable").iloc[0]
        found.append(NewObject(str(first["obs_id"]), kept, cand.result, cand.passes,
                               float(_seconds(cand.obs.iloc[:1])[0])))
    return sorted(found, key=lambda o: o.founder)


def reference_satrec(norad: int, epoch_unix: float, state_m: np.ndarray) -> Satrec:
    """An SGP4 element set holding the osculating elements of a TEME state (m, m/s) at ``epoch_unix``: the
    start :func:`sda.orbit.screening.fitted_elements.fit_to_trajectory` refines into the new object's catalogue set."""
    from sgp4.ext import rv2coe

    from sda.orbit.frames import SGP4_EPOCH_JD

    mu = 398600.8  # WGS-72, SGP4's
    r, v = np.asarray(state_m[:3], float) / 1000.0, np.asarray(state_m[3:], float) / 1000.0
    _, a, ecc, incl, node, argp, _, anomaly, arglat, truelon, _ = rv2coe(list(r), list(v), mu)
    if not (a > 0 and 0 <= ecc < 1):
        raise IodError(f"no elliptic orbit for object {norad} (a {a:.0f} km, e {ecc:.3f})")
    undefined = 999.0  # rv2coe's 999999.1: an angle a circular (or equatorial) orbit does not define
    if abs(anomaly) > undefined or abs(argp) > undefined:  # circular: the argument of latitude runs from the node
        argp, anomaly = 0.0, arglat if abs(arglat) < undefined else truelon
    node = 0.0 if abs(node) > undefined else node
    sat = Satrec()
    sat.sgp4init(WGS72, "i", int(norad), frames.UNIX_EPOCH_JD + epoch_unix / 86400.0 - SGP4_EPOCH_JD, 0.0, 0.0, 0.0,
                 float(max(ecc, 1e-7)), float(argp % (2 * np.pi)), float(incl), float(anomaly % (2 * np.pi)),
                 float(np.sqrt(mu / a**3) * 60.0), float(node % (2 * np.pi)))
    return sat


def element_set(obj: NewObject, norad: int, span_s: float = ELEMENT_SET_SPAN_S) -> dict:
    """The new object's catalogue element set: SGP4 elements fitted to its fused orbit's numerical prediction
    over ``span_s`` from the epoch (:func:`sda.orbit.fusion.arcs`' screening sets, the same way): line1, line2,
    lines_rms_m, lines_max_m."""
    from sda.orbit.fusion.arcs import ArcSettings, screening_lines

    reference = reference_satrec(norad, obj.result.epoch, obj.result.state)
    return screening_lines(obj.result, reference, ArcSettings(lines_span_s=span_s))
