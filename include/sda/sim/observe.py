"""Geometry and noise: which objects each sensor sees when, and the noisy measurements it reports."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from sda.orbit import frames
from sda.sim import tle_error
from sda.sim.common import CHUNK_MS, MU, hash_int, iso_ms, stream_seed
from sda.sim.sky import heavy_noise, light_time_position
from sda.sim.truth import Record, Truth

OPTICAL_EXPOSURE_S = 2.0
ISL_FRACTION = 0.10


def observe(cfg, objs, radars, opticals, isls) -> dict[tuple[str, str], dict[int, list[Record]]]:
    """Every sensor's clean records, ``{(kind, sensor_id): {chunk_ms: [Record]}}``.

    Objects are propagated on the union time grid of each 5-minute chunk and moved to each record's
    exact event time by :func:`_state_at`.
    """
    n = len(objs.norad)

    # a deterministic ~10 % of the objects report through the ISL relays
    assign = np.full(n, -1, dtype=np.int64)
    if isls:
        for j, norad in enumerate(objs.norad):
            if hash_int("isl", cfg.seed, norad) % 1000 < ISL_FRACTION * 1000:
                assign[j] = hash_int("isl-src", norad) % len(isls)
        if n and not (assign >= 0).any():
            assign[0] = 0

    rng = np.random.default_rng(stream_seed(cfg, 1))
    start_ms = int(round(cfg.start.timestamp() * 1000))
    end_ms = int(round(cfg.end.timestamp() * 1000))
    radar_step, opt_step, isl_step = (int(round(x * 1000))
                                      for x in (cfg.radar_cadence_s, cfg.optical_cadence_s, cfg.isl_cadence_s))
    base: dict[tuple[str, str], dict[int, list[Record]]] = defaultdict(dict)
    frame_counters: dict[str, int] = {}
    isl_seqs: dict[str, int] = {}
    chunk0 = (start_ms // CHUNK_MS) * CHUNK_MS
    for chunk_ms in range(chunk0, end_ms, CHUNK_MS):
        lo, hi = max(start_ms, chunk_ms), min(end_ms, chunk_ms + CHUNK_MS)
        g_radar, g_opt, g_isl = _grid(lo, hi, radar_step), _grid(lo, hi, opt_step), _grid(lo, hi, isl_step)
        grid = np.unique(np.concatenate([g_radar, g_opt, g_isl]))
        if grid.size == 0:
            continue
        err, R, V = objs.truth.ephemeris.at(grid / 1000.0)
        valid = err == 0
        cat = None if objs.catalogue_sats is None else frames.propagate(objs.catalogue_sats, grid / 1000.0)[1:]
        col = {int(t): i for i, t in enumerate(grid)}
        c_radar = np.array([col[int(t)] for t in g_radar], dtype=np.int64)
        c_opt = np.array([col[int(t)] for t in g_opt], dtype=np.int64)
        c_isl = np.array([col[int(t)] for t in g_isl], dtype=np.int64)
        for s_idx, sensor in enumerate(radars):
            recs = _radar_records(objs, sensor, s_idx, chunk_ms, g_radar, R, V, valid, c_radar, rng, frame_counters,
                                  cat)
            if recs:
                base[("radar", sensor.sensor_id)][chunk_ms] = recs
        for sensor in opticals:
            recs = _optical_records(objs, sensor, chunk_ms, g_opt, R, V, valid, c_opt, rng, cat)
            if recs:
                base[("optical", sensor.sensor_id)][chunk_ms] = recs
        recs = _isl_records(objs, isls, assign, chunk_ms, g_isl, R, V, valid, c_isl, rng, isl_seqs, cat)
        for rec in recs:
            base[("isl", rec.sensor_id)].setdefault(chunk_ms, []).append(rec)
    return base


def _sky(objs, sensor):
    """The harsh sky (:class:`sda.sim.sky.Sky`) and this sensor's errors, or (None, None) in the kinder sky."""
    sky = getattr(objs, "sky", None)
    return (None, None) if sky is None else (sky, sky.errors.get(sensor.sensor_id))


def _as_measured(R, V, col, dt_s, err, sensor, t_s):
    """The state a sensor measures for time tags ``t_s``: one light time before
    (:func:`sda.sim.sky.light_time_position`; in every sky, as every real radar and telescope measures), and in the
    harsher skies at its clock's time (its time-tag bias, ``err``; None in the kinder sky)."""
    bias_s = 0.0 if err is None else err.bias("time_ms", t_s) / 1000.0
    r, v = _state_at(R, V, col, dt_s + bias_s)
    return light_time_position(r, v, frames.site_teme(sensor.lat_deg, sensor.lon_deg, sensor.alt_m, t_s)), v


def _state_at(R, V, idx, dt_s):
    """Second-order step from grid states R/V [n, g, 3] at grid columns ``idx`` by ``dt_s`` [n, k]."""
    r0, v0 = R[:, idx], V[:, idx]
    dt_ = dt_s[..., None]
    rn = np.linalg.norm(r0, axis=-1, keepdims=True)
    acc = -MU * r0 / rn**3
    return r0 + v0 * dt_ + 0.5 * acc * dt_**2, v0 + acc * dt_


def _errors(cat, idx, dt_s, r):
    """[n, k, 3] true - catalogue RTN error (m) at the records' times, or None for an exact catalogue."""
    if cat is None:
        return None
    rc, vc = _state_at(cat[0], cat[1], idx, dt_s)
    return tle_error.rtn_error_m(r, rc, vc)


def _error(errors, j, c):
    if errors is None or not np.all(np.isfinite(errors[j, c])):
        return None
    return tuple(round(float(x), 1) for x in errors[j, c])


def _grid(lo_ms: int, hi_ms: int, step_ms: int) -> np.ndarray:
    first = -(-lo_ms // step_ms) * step_ms
    return np.arange(first, hi_ms, step_ms, dtype=np.int64)


def _radar_records(objs, sensor, s_idx, chunk_ms, frame_ms, R, V, valid, col, rng, counters, cat=None) -> list[Record]:
    n, k = len(objs.norad), len(frame_ms)
    if k == 0 or n == 0:
        return []
    off_ms = (1 + (np.arange(n) * 7 + s_idx * 3) % 12).astype(np.int64)
    t_ms = frame_ms[None, :] + off_ms[:, None]
    t_s = t_ms / 1000.0
    r, v = _state_at(R, V, col, (t_ms - frame_ms[None, :]) / 1000.0)
    errors = _errors(cat, col, (t_ms - frame_ms[None, :]) / 1000.0, r)
    sky, err = _sky(objs, sensor)
    r, v = _as_measured(R, V, col, (t_ms - frame_ms[None, :]) / 1000.0, err, sensor, t_s)
    r_e, v_e = frames.teme_to_ecef(r, v, t_s)
    rng_km, az, el, rr = frames.razel(r_e, v_e, sensor.lat_deg, sensor.lon_deg, sensor.alt_m)
    ok = valid[:, col] & np.isfinite(rng_km)
    vis = ok & sensor.in_field_of_regard(np.where(ok, az, 0.0), np.where(ok, el, -1.0), np.where(ok, rng_km, np.inf))
    noise = rng.standard_normal((5, n, k))
    if err is not None:  # the sensor's true noise and its biases (sda.sim.sky)
        noise[:4] = err.noise_scale * heavy_noise(sky.rng, (4, n, k), err.tail_dof)
        rng_km = rng_km + err.bias("range_m", t_s) / 1000.0
        az = az + np.deg2rad(err.bias("az_deg", t_s))
        el = el + np.deg2rad(err.bias("el_deg", t_s))
    sig_r = (sensor.sigma_range_m or 20.0) / 1000.0
    sig_a = sensor.sigma_angle_deg or 0.015
    sig_rr = (sensor.sigma_range_rate_ms or 2.0) / 1000.0
    m_rng = rng_km + sig_r * noise[0]
    m_az = np.mod(np.rad2deg(az) + sig_a * noise[1], 360.0)
    m_el = np.minimum(np.rad2deg(el) + sig_a * noise[2], 90.0)
    m_rr = rr + sig_rr * noise[3]
    snr = 20.0 + objs.rcs_db[:, None] - 40.0 * np.log10(np.maximum(rng_km, 1.0) / 1000.0) + noise[4]
    records = []
    for kk in range(k):
        idx = np.flatnonzero(vis[:, kk])
        counters[sensor.sensor_id] = counters.get(sensor.sensor_id, -1) + 1
        frame_no = counters[sensor.sensor_id]
        if idx.size == 0:
            continue
        idx = idx[np.lexsort((objs.norad[idx], t_ms[idx, kk]))]
        dets, truths = [], []
        for d, j in enumerate(idx):
            dets.append({
                "t": iso_ms(t_ms[j, kk]), "range_km": round(float(m_rng[j, kk]), 3),
                "az_deg": round(float(m_az[j, kk]), 5), "el_deg": round(float(m_el[j, kk]), 5),
                "rr_km_s": round(float(m_rr[j, kk]), 5), "snr_db": round(float(snr[j, kk]), 1),
            })
            truths.append(Truth("radar", sensor.sensor_id, int(t_ms[j, kk]), int(objs.norad[j]), "none", d,
                                error_rtn_m=_error(errors, j, kk)))
        sent_ms = int(frame_ms[kk]) + 500 + int(rng.integers(0, 2500))
        frame = {"sensor": sensor.sensor_id, "frame": frame_no, "sent": iso_ms(sent_ms), "dets": dets}
        records.append(Record("radar", sensor.sensor_id, chunk_ms, int(frame_ms[kk]), b"", truths, frame))
    return records


def _optical_records(objs, sensor, chunk_ms, base_ms, R, V, valid, col, rng, cat=None) -> list[Record]:
    n, k = len(objs.norad), len(base_ms)
    if k == 0 or n == 0:
        return []
    off_ms = (20 + (np.arange(n) * 37) % 900).astype(np.int64)
    t_ms = base_ms[None, :] + off_ms[:, None]
    t_s = t_ms / 1000.0
    r, v = _state_at(R, V, col, (t_ms - base_ms[None, :]) / 1000.0)
    errors = _errors(cat, col, (t_ms - base_ms[None, :]) / 1000.0, r)
    sky, err = _sky(objs, sensor)
    r, v = _as_measured(R, V, col, (t_ms - base_ms[None, :]) / 1000.0, err, sensor, t_s)
    ok = valid[:, col] & np.all(np.isfinite(r), axis=-1)
    r = np.where(ok[..., None], r, 1.0e5)
    v = np.where(ok[..., None], v, 0.0)
    dark = np.rad2deg(frames.sun_elevation(sensor.lat_deg, sensor.lon_deg, sensor.alt_m, t_s)) < -12.0
    if not dark.any():
        return []
    r_e, v_e = frames.teme_to_ecef(r, v, t_s)
    rng_km, az, el, _ = frames.razel(r_e, v_e, sensor.lat_deg, sensor.lon_deg, sensor.alt_m)
    sunlit = ~frames.in_earth_shadow(r, t_s)
    vis = ok & dark & sunlit & sensor.in_field_of_regard(az, el, rng_km)
    ra, dec = frames.radec(r, sensor.lat_deg, sensor.lon_deg, sensor.alt_m, t_s)
    noise = rng.standard_normal((3, n, k))
    if err is not None:  # the sensor's true noise and its biases (sda.sim.sky)
        noise[:2] = err.noise_scale * heavy_noise(sky.rng, (2, n, k), err.tail_dof)
        dec = dec + np.deg2rad(err.bias("dec_arcsec", t_s) / 3600.0)
        ra = ra + np.deg2rad(err.bias("ra_arcsec", t_s) / 3600.0) / np.maximum(np.cos(dec), 1e-3)
    sig = sensor.sigma_angle_deg or 0.00028
    m_dec = np.rad2deg(dec) + sig * noise[1]
    m_ra_deg = np.mod(np.rad2deg(ra) + sig * noise[0] / np.maximum(np.cos(dec), 1e-3), 360.0)
    # diffuse-sphere brightness: m = m_sun - 2.5 log10(albedo * area * F(phase) / range^2)
    rho = r - frames.site_teme(sensor.lat_deg, sensor.lon_deg, sensor.alt_m, t_s)
    rho_hat = rho / np.linalg.norm(rho, axis=-1, keepdims=True)
    sun = frames.sun_direction(t_s)
    beta = np.arccos(np.clip(np.sum(sun * -rho_hat, axis=-1), -1.0, 1.0))
    phase = 2.0 / (3.0 * np.pi**2) * ((np.pi - beta) * np.cos(beta) + np.sin(beta))
    flux = 0.2 * objs.area_m2[:, None] * np.maximum(phase, 1e-6) / (rng_km * 1000.0) ** 2
    vmag = -26.74 - 2.5 * np.log10(flux) + 0.1 * noise[2]
    records = []
    jj, kk = np.nonzero(vis)
    order = np.lexsort((objs.norad[jj], t_ms[jj, kk]))
    for j, c in zip(jj[order], kk[order]):
        row = {"station": sensor.sensor_id, "t_ms": int(t_ms[j, c]), "ra_hours": float(m_ra_deg[j, c] / 15.0),
               "dec_deg": float(m_dec[j, c]), "vmag": float(vmag[j, c]), "exposure_s": OPTICAL_EXPOSURE_S}
        truth = Truth("optical", sensor.sensor_id, int(t_ms[j, c]), int(objs.norad[j]), "none",
                      error_rtn_m=_error(errors, j, c))
        records.append(Record("optical", sensor.sensor_id, chunk_ms, int(t_ms[j, c]), b"", [truth], row))
    return records


def _isl_records(objs, isl_sensors, assign, chunk_ms, base_ms, R, V, valid, col, rng, seqs, cat=None) -> list[Record]:
    n, k = len(objs.norad), len(base_ms)
    if k == 0 or n == 0 or not isl_sensors:
        return []
    off_ms = (5 + (np.arange(n) * 13) % 500).astype(np.int64)
    t_ms = base_ms[None, :] + off_ms[:, None]
    dt_s = (t_ms - base_ms[None, :]) / 1000.0
    r, v = _state_at(R, V, col, dt_s)
    errors = _errors(cat, col, dt_s, r)
    noise = rng.standard_normal((6, n, k))
    ok = valid[:, col] & np.all(np.isfinite(r), axis=-1) & (assign[:, None] >= 0)
    out: list[Record] = []
    for s_idx, sensor in enumerate(isl_sensors):
        sp, sv = sensor.sigma_pos_m or 50.0, sensor.sigma_vel_ms or 0.05
        sky, err = _sky(objs, sensor)
        if err is not None:  # the relay's time tag and true noise (sda.sim.sky); a beacon has no light time
            r, v = _state_at(R, V, col, dt_s + err.bias("time_ms", t_ms / 1000.0) / 1000.0)
            noise = err.noise_scale * heavy_noise(sky.rng, (6, n, k), err.tail_dof)
        jj, kk = np.nonzero(ok & (assign[:, None] == s_idx))
        order = np.lexsort((objs.norad[jj], t_ms[jj, kk]))
        for j, c in zip(jj[order], kk[order]):
            pos = r[j, c] * 1000.0 + sp * noise[0:3, j, c]
            vel = v[j, c] * 1000.0 + sv * noise[3:6, j, c]
            seqs[sensor.sensor_id] = seqs.get(sensor.sensor_id, -1) + 1
            msg = {"src": sensor.sensor_id, "seq": seqs[sensor.sensor_id], "t_ms": int(t_ms[j, c]),
                   "pos": pos.tolist(), "vel": vel.tolist()}
            truth = Truth("isl", sensor.sensor_id, int(t_ms[j, c]), int(objs.norad[j]), "none",
                          error_rtn_m=_error(errors, j, c))
            out.append(Record("isl", sensor.sensor_id, chunk_ms, int(t_ms[j, c]), b"", [truth], msg))
    out.sort(key=lambda rec: (rec.event_ms, rec.sensor_id, rec.data["seq"]))
    return out
