"""The stages bench/acquisition.py emulates in event-time steps (its docstring, 2): correlation, the
new-object search, the stage's upkeep, and the fuse stage's refit of the provisional objects (their element
sets kept fresh from their own correlated observations, as the pipeline's fuse stage and its fused-orbit
correlation do). No Spark: the stages' own functions on pandas frames."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
from common import log, short_utc

GATE_KM = 50.0
#: the fuse stage's refit of a provisional object: its observations over this much event time, at most
#: every REFIT_EVERY_S (the stage refits a window when new observations arrive)
REFIT_ARC_S, REFIT_EVERY_S = 6 * 3600.0, 3 * 3600.0


class Emulation:
    """The stages' state between steps (module docstring, 2): rows held or acquired, provisional objects."""

    def __init__(self, obs, ids, sats, lines: dict, settings, refit: bool = True):
        from sda.orbit.estimation import registry_sigmas
        from sda.orbit.estimation.measurements import FIT_COLUMNS
        from sda.orbit.sensors import load_sensors
        from sda.orbit.times import unix_seconds

        self.obs = obs.drop(columns=["norad_id"], errors="ignore").reset_index(drop=True)
        self.obs["row"] = np.arange(len(obs))
        self.t = unix_seconds(self.obs["event_time"])
        self.row_of = dict(zip(self.obs["obs_id"], self.obs["row"]))
        self.ids, self.sats, self.lines, self.settings = list(ids), list(sats), lines, settings
        self.fit_columns = [c for c in FIT_COLUMNS if c != "norad_id"]
        self.sigmas = registry_sigmas(load_sensors())
        self.held, self.acquired = np.zeros(len(obs), bool), np.zeros(len(obs), bool)
        self.fate = np.full(len(obs), "", dtype=object)  # correlated:<norad> | held | held:<reason> (the latter apart)
        self.objects, self.steps = [], []  # the provisional objects in creation order; a row per step
        self.timing = {"correlate": 0.0, "acquire": 0.0, "element_sets": 0.0, "refit": 0.0}
        self.refit_on = refit

    def active(self) -> list[dict]:
        return [o for o in self.objects if o["status"] == "active"]

    def correlate(self, lo: float, hi: float) -> dict:
        """Correlate the rows with event time in (lo, hi]; hold the ones no object's gate holds."""
        from sda.orbit.correlation import REASON_NO_CANDIDATE
        from sda.orbit.sensors import sensor_sigmas
        from sda.sim import scoring

        batch = self.obs[(self.t > lo) & (self.t <= hi)]
        if batch.empty:
            return {"observations": 0}
        live = self.active()
        ids = self.ids + [o["norad_id"] for o in live]
        sats = self.sats + [o["satrec"] for o in live]
        scored = scoring.correlate(batch, ids, sats, GATE_KM, sensor_sigmas(None))
        rows = scored["row"].to_numpy()
        ok = (scored["status"] == "correlated").to_numpy()
        no_candidate = (scored["reason"] == REASON_NO_CANDIDATE).to_numpy() & ~ok
        self.held[rows[no_candidate]] = True
        norad = scored["norad_id"].astype("float64").to_numpy()
        self.fate[rows] = [f"correlated:{n:.0f}" if c else "held" if h else f"held:{why}"
                           for c, h, n, why in zip(ok, no_candidate, norad, scored["reason"])]
        by_id = {o["norad_id"]: o for o in live}
        for n, t in zip(norad[ok], self.t[rows[ok]]):
            if (o := by_id.get(int(n))) is not None:
                o["last_seen"], o["correlated"] = max(o["last_seen"], float(t)), o["correlated"] + 1
        return {"observations": len(batch), "correlated": int(ok.sum()), "held": int(no_candidate.sum())}

    def acquire(self, now: float) -> dict:
        """Search the pool up to ``now`` (the stage's search): number, element set, out of the pool."""
        from sgp4.api import WGS72, Satrec

        from sda.orbit.acquisition.search import acquire, element_set
        from sda.orbit.estimation import dynamics
        from sda.pipeline.provisional import number_for

        pool = self.held & ~self.acquired & (self.t >= now - self.settings.acquire_lookback_h * 3600.0)
        pool &= self.t <= now
        t = time.perf_counter()
        found = acquire(self.obs.loc[pool, self.fit_columns].reset_index(drop=True), self.sigmas)
        acquire_s, t, failed = time.perf_counter() - t, time.perf_counter(), 0
        taken = {o["norad_id"] for o in self.objects}
        for obj in found:
            norad = number_for(obj.founder, taken)
            try:
                lines = element_set(obj, norad)
            except (ValueError, dynamics.PropagationError) as exc:
                log(f"object founded by {obj.founder}: no element set ({exc}); left in the pool")
                failed += 1
                continue
            taken.add(norad)
            self.acquired[[self.row_of[i] for i in obj.obs_ids]] = True
            self.objects.append({
                "norad_id": norad, "founder": obj.founder, "created": now, "epoch": float(obj.result.epoch),
                "state_m": [float(x) for x in obj.result.state], "first_obs": obj.first_obs, "passes": obj.passes,
                "rms": float(obj.result.rms), "obs_ids": obj.obs_ids, "observations": len(obj.obs_ids), **lines,
                "satrec": Satrec.twoline2rv(lines["line1"], lines["line2"], WGS72), "status": "active",
                "acquired_satrec": Satrec.twoline2rv(lines["line1"], lines["line2"], WGS72),
                "last_seen": float(obj.result.epoch), "ended": None, "merged_into": None, "correlated": 0})
        self.timing["acquire"] += acquire_s
        self.timing["element_sets"] += time.perf_counter() - t
        return {"pool": int(pool.sum()), "found": len(found) - failed, "no_element_set": failed,
                "acquire_s": round(acquire_s, 2)}

    def refit(self, now: float) -> dict:
        """The fuse stage's refit of each active object seen for ``REFIT_EVERY_S`` since its last fit: its own
        and correlated rows over the last ``REFIT_ARC_S``, from its orbit (loose prior), and a new element set
        (what correlation and merging then use)."""
        from sgp4.api import WGS72, Satrec

        from sda.orbit.acquisition.search import NewObject, element_set, loose_prior
        from sda.orbit.estimation import dynamics
        from sda.orbit.estimation.estimator import fit
        from sda.orbit.estimation.iod import propagate_j2

        if not self.refit_on:
            return {"refitted": 0}
        started, done = time.perf_counter(), 0
        for o in self.active():
            fitted_at = o.get("fit_epoch", o["epoch"])
            if o["last_seen"] - fitted_at < REFIT_EVERY_S:
                continue
            rows = np.zeros(len(self.obs), bool)
            rows[[self.row_of[i] for i in o["obs_ids"]]] = True
            rows = (rows | (self.fate == f"correlated:{o['norad_id']}")) & (self.t > o["last_seen"] - REFIT_ARC_S)
            if rows.sum() < 10:
                continue
            part = self.obs.loc[rows & (self.t <= now), self.fit_columns].sort_values(["event_time", "obs_id"])
            t_first = float(self.t[rows].min())
            try:
                start = propagate_j2(fitted_at, np.asarray(o.get("fit_state_m", o["state_m"])), [t_first])[0]
                result = fit(part, loose_prior(t_first, start, "catalogue"), self.sigmas)
                if not result.converged or result.rms > 3.0:
                    continue
                lines = element_set(NewObject(o["founder"], (), result, 0, t_first), o["norad_id"])
            except (ValueError, ArithmeticError, dynamics.PropagationError, np.linalg.LinAlgError):
                continue
            o.update(fit_epoch=float(result.epoch), fit_state_m=[float(x) for x in result.state],
                     satrec=Satrec.twoline2rv(lines["line1"], lines["line2"], WGS72), line1=lines["line1"],
                     line2=lines["line2"])
            done += 1
        self.timing["refit"] += time.perf_counter() - started
        return {"refitted": done}

    def upkeep(self, now: float) -> dict:
        """Retire and merge the active objects not created at ``now`` (the stage's upkeep)."""
        from sda.orbit.times import utc
        from sda.pipeline import provisional
        live = {o["norad_id"]: o for o in self.active() if o["created"] < now}
        rows = [{"norad_id": n, "founder": o["founder"], "last_seen": utc(o["last_seen"]),
                 "acquired_epoch": utc(o["epoch"])} for n, o in live.items()]
        retired = provisional.retirements(rows, {}, utc(now), self.settings.acquire_retire_h, "bench")
        gone = {r["norad_id"] for r in retired}
        sets = {n: (o["line1"], o["line2"]) for n, o in live.items()}
        of = {self.row_of[i]: o["norad_id"] for o in self.objects for i in o["obs_ids"]}  # seen beside: two bodies
        norad = [of.get(k, int(f[11:]) if f.startswith("correlated:") else -1) for k, f in enumerate(self.fate)]
        rows_ = pd.DataFrame({"sensor_id": self.obs["sensor_id"], "event_time": self.t, "norad_id": norad})
        distinct = provisional.co_observed_rows(rows_[rows_["norad_id"] >= 0], live)
        merged = provisional.merges([r for r in rows if r["norad_id"] not in gone], sets, self.lines,
                                    self.settings.acquire_merge_km, "bench", distinct)
        for r, status in [(r, "retired") for r in retired] + [(r, "merged") for r in merged]:
            live[r["norad_id"]].update(status=status, ended=now, merged_into=r.get("merged_into"))
        return {"retired": len(retired), "merged": len(merged)}


def emulate(em: Emulation, start: float, end: float, step_s: float) -> None:
    """The stages step by step over the run (module docstring, 2)."""
    for k in range(1, math.ceil((end - start) / step_s - 1e-9) + 1):
        lo, hi = start + (k - 1) * step_s, min(start + k * step_s, end)
        t = time.perf_counter()
        row = {"t_end_unix": hi, **em.correlate(lo, hi)}
        em.timing["correlate"] += time.perf_counter() - t
        row.update(**em.acquire(hi), **em.refit(hi), **em.upkeep(hi), active=len(em.active()))
        em.steps.append(row)
        log(f"step {k} to {short_utc(hi)}: {row.get('observations', 0)} observations, {row.get('held', 0)} held, pool "
            f"{row['pool']}, {row['found']} new in {row['acquire_s']:.0f} s, {row['retired']} retired, "
            f"{row['merged']} merged, {row['refitted']} refitted, {row['active']} active")


