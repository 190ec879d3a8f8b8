"""The estimator's propagation side by side: today's transition matrix (two-body + J2 partials along the full
force model's states, sda.orbit.estimation.dynamics), brahe's variational equations it replaced, and SGP4's
``SatrecArray`` as the floor (issue "propagate once", point 2).

    .venv/bin/python bench/propagation.py [--objects 40] [--seed 5] [--out FILE]

The objects are the LEO ones of a generated catalogue (sda.orbit.catalog.synthetic, ``--seed``), each taken from
its element set to a GCRF state with B = 0.02 m^2/kg. Per object, on one core (``time.process_time``), one object
at a time, with the 120 s nodes the estimator uses:

* ``stm_1.5h`` and ``stm_6h``: the state and its transition matrix and B sensitivity at every node over 1.5 h
  (a refit's prediction of its prior) and 6 h (a fit's arc), by :func:`dynamics.propagate` and, as
  ``..._brahe_variational``, by brahe's variational equations stopped at the same nodes (what the estimator did
  before);
* ``state_30h``: the states alone at every node over 30 h; ``stm_30h``: with transition matrices (a screening
  product's covariance nodes);
* ``sgp4_30h``: SGP4 at the same nodes, one object at a time and all at once (``SatrecArray``, per object).

Accuracy: the 30 h states against the same force model integrated at relative tolerance 1e-13 (the integrator's
error, not the model's); the transition matrices at 1.5, 6 and 30 h against brahe's variational equations (the
worst relative column error of the three large columns -- position, along-track and cross-track velocity -- and
of all six, and of the B sensitivity). What it leaves out: MEO, GEO and HEO (fewer nodes per revolution: cheaper
per hour), and brahe's own batch mode (the estimator propagates one object at a time).

Prints a line per case and, last, one JSON line; the same JSON goes to ``--out`` (default
``bench/results/propagation.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import time

import numpy as np
from common import RESULTS, log, write_result

from sda.orbit.estimation import dynamics

EPOCH = dt.datetime(2026, 11, 21, 0, 0, tzinfo=dt.timezone.utc)
B = 0.02
STEP = dynamics.NODE_STEP_S
SPANS_H = {"1.5h": 1.5, "6h": 6.0, "30h": 30.0}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=40)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--out", default=str(RESULTS / "propagation.json"))
    return p


def leo_objects(n: int, seed: int):
    """(satrecs, GCRF states [n, 6]) of the first ``n`` LEO objects (perigee below 2,000 km) of a generated
    catalogue."""
    from sgp4.api import WGS72, Satrec

    from sda.orbit import frames
    from sda.orbit.catalog.synthetic import generate_entries
    from sda.sim.dynamics import teme_to_gcrf

    sats = []
    for _, line1, line2 in generate_entries(max(4 * n, 50), EPOCH, seed):
        sat = Satrec.twoline2rv(line1, line2, WGS72)
        if sat.altp * sat.radiusearthkm < 2000.0:
            sats.append(sat)
        if len(sats) == n:
            break
    t0 = EPOCH.timestamp()
    _, r, v = frames.propagate(sats, np.array([t0]))
    states = np.array([teme_to_gcrf(r[i, 0], v[i, 0], t0)[0] for i in range(len(sats))])
    return sats, states


def stats(values) -> dict:
    """Median and worst (the page's table keeps to these two)."""
    v = np.asarray(list(values), float)
    return {"median": round(float(np.median(v)), 4), "max": round(float(v.max()), 4)}


def _nodes(hours: float) -> np.ndarray:
    return EPOCH.timestamp() + STEP * np.arange(int(round(hours * 3600 / STEP)) + 1)


def _cpu(fn) -> tuple[float, object]:
    dynamics._LAST[0] = None  # every call integrates (no reuse of the last propagation's nodes)
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def timings(states: np.ndarray) -> dict:
    t0 = EPOCH.timestamp()
    cases = {
        "stm_1.5h": lambda x: dynamics.propagate(t0, x, B, _nodes(1.5)),
        "stm_1.5h_brahe_variational": lambda x: dynamics.brahe_variational(t0, x, B, _nodes(1.5)),
        "stm_6h": lambda x: dynamics.propagate(t0, x, B, _nodes(6.0)),
        "stm_6h_brahe_variational": lambda x: dynamics.brahe_variational(t0, x, B, _nodes(6.0)),
        "state_30h": lambda x: dynamics.propagate(t0, x, B, _nodes(30.0), variational=False),
        "stm_30h": lambda x: dynamics.propagate(t0, x, B, _nodes(30.0)),
    }
    out = {}
    for name, fn in cases.items():
        seconds = [_cpu(lambda x=x: fn(x))[0] for x in states]
        out[name] = {k: round(v * 1e3, 2) for k, v in stats(seconds).items()}
        log(f"{name}: median {out[name]['median']:.1f} ms of CPU per object")
    return out


def sgp4_timings(sats) -> dict:
    from sgp4.api import SatrecArray

    times = _nodes(30.0)
    jd = 2440587.5 + times // 86400.0
    fr = (times % 86400.0) / 86400.0
    one = [_cpu(lambda s=s: s.sgp4_array(jd, fr))[0] for s in sats]
    batch, _ = _cpu(lambda: SatrecArray(sats).sgp4(jd, fr))
    return {"sgp4_30h": {"one_at_a_time_ms": round(float(np.median(one)) * 1e3, 3),
                         "batch_ms_per_object": round(batch / len(sats) * 1e3, 3)}}


def tight_reference(x0: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The same force model at relative tolerance 1e-13 (absolute 1e-7 m), stopped at ``times``."""
    bh = dynamics._brahe()
    config = (bh.NumericalPropagationConfig.with_method(bh.IntegrationMethod.RKF78).with_rel_tol(1e-13)
              .with_abs_tol(1e-7))
    drag = dynamics.perigee_km(x0) < dynamics.DRAG_PERIGEE_KM
    prop = bh.NumericalOrbitPropagator(dynamics.epoch(times[0]), x0, config, dynamics._force(drag), dynamics.params(B))
    out = []
    for t in times:
        prop.propagate_to(dynamics.epoch(times[0]) + float(t - times[0]))
        out.append(prop.current_state())
    return np.array(out)


def column_errors(ours, ref) -> tuple[float, float, float]:
    """(worst large column, worst column, sensitivity): relative errors of ``ours`` against ``ref`` at its last node."""
    col = [np.linalg.norm(ours.phi[-1][:, j] - ref.phi[-1][:, j]) / np.linalg.norm(ref.phi[-1][:, j]) for j in range(6)]
    sens = np.linalg.norm(ours.sens[-1] - ref.sens[-1]) / np.linalg.norm(ref.sens[-1])
    return max(col[0], col[4], col[5]), max(col), float(sens)


def accuracy(states: np.ndarray) -> dict:
    t0 = EPOCH.timestamp()
    times = _nodes(30.0)
    drift = []
    for x in states:
        dynamics._LAST[0] = None
        ours = dynamics.propagate(t0, x, B, times, variational=False).x
        drift.append(float(np.max(np.linalg.norm(ours[:, :3] - tight_reference(x, times)[:, :3], axis=1))))
    out = {"state_30h_vs_tight_tolerance_m": stats(drift)}
    for name, hours in SPANS_H.items():
        errs = []
        for x in states:
            dynamics._LAST[0] = None
            errs.append(column_errors(dynamics.propagate(t0, x, B, [t0 + hours * 3600.0]),
                                      dynamics.brahe_variational(t0, x, B, [t0 + hours * 3600.0])))
        errs = np.array(errs)
        out[f"stm_{name}_vs_brahe_variational"] = {"large_columns": stats(errs[:, 0]), "all_columns": stats(errs[:, 1]),
                                                   "b_sensitivity": stats(errs[:, 2])}
        log(f"transition matrix over {name}: large columns within {np.median(errs[:, 0]):.1e} (median), "
            f"{errs[:, 0].max():.1e} (worst)")
    return out


def main(argv=None) -> dict:
    args = parser().parse_args(argv)
    sats, states = leo_objects(args.objects, args.seed)
    log(f"{len(states)} LEO objects")
    dynamics.propagate(EPOCH.timestamp(), states[0], B, _nodes(0.5))  # brahe's set-up (EOP, gravity model) once
    dynamics.brahe_variational(EPOCH.timestamp(), states[0], B, _nodes(0.5))
    result = {"bench": "propagation", "objects": len(states), "seed": args.seed,
              "cpu_ms_per_object": {**timings(states), **sgp4_timings(sats)}, "accuracy": accuracy(states),
              "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    cpu = result["cpu_ms_per_object"]
    result["speedup"] = {span: round(cpu[f"stm_{span}_brahe_variational"]["median"] / cpu[f"stm_{span}"]["median"], 2)
                         for span in ("1.5h", "6h")}
    write_result(__import__("pathlib").Path(args.out), result, announce=log)
    return result


if __name__ == "__main__":
    main()
