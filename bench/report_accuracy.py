"""bench/report.py's rows of a bench/accuracy.py result (``bench/results/accuracy_<sky>_seed<N>.json``): one table
per sky in docs/performance.md (block ``accuracy-<sky>``).

Rows, each a (label, path in the JSON, format, target): the seed (bench/report.py names its role from
bench/seeds.py); per regime and lead the catalogue element sets' error (their d^2, a circular check of the simulator
against its own model, is left out of the table: bench/accuracy_positions.py); the conjunctions and alerts against
the truth; per regime, pass group and lead the fused orbits' error beside the catalogue's and their covariance's
realism (mean and median d^2, the share inside the 95 % ellipsoid), and per regime and pass group the CARA-style
hourly test's pass share; the alerts' CDMs (the true relative position at TCA under the covariance the CDM implies);
the screening's recall; each sensor's estimated biases against the true ones, and the calibration against not
calibrating (where the result has them).
"""

from __future__ import annotations

import re

import seeds

Row = tuple[str, tuple[str, ...], str, str]  # label, path in the JSON, format, target

BLOCK = "accuracy-{sky}"
RESULT_NAME = re.compile(r"accuracy_(?P<sky>[a-z]+)_seed(?P<seed>\d+)")
FUSED_TARGETS = {("LEO", "2+ passes", "0h"): "<= 0.10", ("LEO", "2+ passes", "24h"): "<= 0.333"}
ALERT_GROUPS = (("all", "all open alerts"), ("both_fused", "both objects fused"),
                ("both_fused_sum", "both objects fused, covariances summed without the shared density term"),
                ("one_fused", "one object fused"), ("catalogue_only", "neither fused"))
RULES = (("pc", "Pc >= the yellow threshold"), ("miss_distance", "predicted miss under the alert distance"),
         ("miss_probability", "P(miss < alert distance) >= its threshold"))


def _leads(mapping: dict) -> list[str]:
    return sorted(mapping, key=lambda x: float(x.rstrip("h")))


def _position_rows(result: dict) -> list[Row]:
    rows: list[Row] = []
    by_lead = (result.get("position") or {}).get("by_lead") or {}
    for lead in _leads(by_lead):
        for regime in sorted(by_lead[lead]):
            where, base = f"{regime}, run end + {lead}", ("position", "by_lead", lead, regime)
            rows += [
                (f"catalogue element sets: error, median ({where})", (*base, "total", "median"), "{:,.0f} m", ""),
                (f"catalogue element sets: error, p90 ({where})", (*base, "total", "p90"), "{:,.0f} m", ""),
                (f"catalogue element sets: along-track error, median ({where})", (*base, "along", "median"),
                 "{:,.0f} m", ""),
            ]
    return rows


def _event_rows() -> list[Row]:
    rows: list[Row] = []
    for what in ("conjunctions", "alerts"):
        rows += [
            (f"{what}: count", (what, "count"), "{:,}", ""),
            (f"{what}: miss-distance error, median", (what, "miss_error_m", "median"), "{:,.0f} m", ""),
            (f"{what}: miss-distance error, p90", (what, "miss_error_m", "p90"), "{:,.0f} m", ""),
            (f"{what}: TCA error, median", (what, "tca_error_s", "median"), "{:.2f} s", ""),
            (f"{what}: truly closer than 1 km", (what, "truly_under_1km"), "{:,}", ""),
            (f"{what}: truly farther than 5 km", (what, "true_miss_over_5km"), "{:,}", ""),
        ]
    rows.append(("alerts: share truly farther than 5 km", ("alerts", "share_true_miss_over_5km"), "{:.3f}", "<= 0.10"))
    for rule, which in RULES:
        base = ("alerts_by_rule",)
        rows += [
            (f"alerts the rule {rule} fired for ({which})", (*base, rule, "alerts"), "{:,}", ""),
            (f"alerts the rule {rule} alone fired for", (*base, f"{rule}_only", "alerts"), "{:,}", ""),
            (f"alerts the rule {rule} fired for, truly farther than 5 km", (*base, rule, "true_miss_over_5km"),
             "{:,}", ""),
        ]
    return rows


def _fused_lead_rows(regime: str, group: str, lead: str) -> list[Row]:
    where, base = f"{regime}, {group}, run end + {lead}", ("fused", "regimes", regime, group, "leads", lead)
    return [
        (f"fused error, median ({where})", (*base, "fused_median_m"), "{:,.0f} m", ""),
        (f"fused error, p90 ({where})", (*base, "fused_p90_m"), "{:,.0f} m", ""),
        (f"catalogue error of the same objects, median ({where})", (*base, "catalogue_median_m"), "{:,.0f} m", ""),
        (f"fused / catalogue, medians ({where})", (*base, "ratio"), "{:.3f}", FUSED_TARGETS.get((regime, group, lead),
                                                                                                "")),
        (f"fused covariance: mean d^2 ({where})", (*base, "mean_d2"), "{:.2f}", "3"),
        (f"fused covariance: median d^2 ({where})", (*base, "median_d2"), "{:.2f}", "2.37"),
        (f"share inside the fused 95 % ellipsoid ({where})", (*base, "inside95"), "{:.3f}", "0.90-0.99"),
    ]


def _fused_rows(result: dict) -> list[Row]:
    rows: list[Row] = []
    for regime, groups in sorted(((result.get("fused") or {}).get("regimes") or {}).items()):
        for group in ("2+ passes", "1 pass"):
            scored = groups.get(group) or {}
            if not scored.get("objects"):
                continue
            base = ("fused", "regimes", regime, group)
            rows.append((f"fused objects scored ({regime}, {group})", (*base, "objects"), "{:,}", ""))
            for lead in _leads(scored.get("leads") or {}):
                rows += _fused_lead_rows(regime, group, lead)
            rows.append((f"hourly chi-square(3) test, 0-24 h: share of the 25 hours passed ({regime}, {group})",
                         (*base, "hourly_test", "pass_share"), "{:.2f}", "~0.95"))
    return rows + [
        ("alerts between two fused objects: count", ("alerts_both_fused", "count"), "{:,}", ""),
        ("alerts between two fused objects: miss-distance error, median",
         ("alerts_both_fused", "miss_error_m", "median"), "{:,.0f} m", "<= 300 m"),
        ("alerts between two fused objects: miss-distance error, p90",
         ("alerts_both_fused", "miss_error_m", "p90"), "{:,.0f} m", ""),
        ("true approaches under 1 km between two fused objects", ("recall_under_1km_both_fused", "true"), "{:,}", ""),
        ("of them, found by the screening (TCA within 120 s)", ("recall_under_1km_both_fused", "found"), "{:,}", ""),
        ("pairs with a true approach under 1 km, both fused", ("recall_under_1km_both_fused", "pairs"), "{:,}", ""),
        ("of them, alerted", ("recall_under_1km_both_fused", "pairs_alerted"), "{:,}", "all"),
    ]


def _cdm_rows() -> list[Row]:
    rows: list[Row] = []
    for key, which in ALERT_GROUPS:
        what, base = f"alert CDMs, {which}: relative position at TCA", ("alerts_cdm", key)
        rows += [
            (f"{what}, CDMs scored", (*base, "count"), "{:,}", ""),
            (f"{what}, mean d^2", (*base, "mean_d2"), "{:.2f}", "3"),
            (f"{what}, median d^2", (*base, "median_d2"), "{:.2f}", "2.37"),
            (f"{what}, share inside the 95 % ellipsoid", (*base, "inside95"), "{:.3f}", "0.90-0.99"),
            (f"{what}, chi-square(3) test p-value", (*base, "test", "p"), "{:.3f}", ">= 0.05"),
        ]
    return rows


def _sensor_rows(result: dict) -> list[Row]:
    """Per sensor and quantity, the estimated bias with the true one as its target (bench/accuracy_sensors.py)."""
    scored = result.get("sensor_calibration") or {}
    if not scored.get("count"):
        return []
    out: list[Row] = [("sensor biases within 30 % of the truth (or one noise sigma): share",
                       ("sensor_calibration", "share_meets"), "{:.2f}", "1"),
                      ("... the same target met by estimating zero for every bias (rows)",
                       ("sensor_calibration", "nothing_meets"), "{:d}", ""),
                      ("sensor calibration: rows whose estimate improves on not calibrating (share)",
                       ("sensor_calibration", "share_improves"), "{:.2f}", ""),
                      ("sensor calibration: |estimate's error| / |true bias|, median (1 = no better than nothing)",
                       ("sensor_calibration", "ratio_median"), "{:.2f}", ""),
                      ("sensor calibration: estimates the fits apply (3 sigmas or more)",
                       ("sensor_calibration", "applied"), "{:d}", ""),
                      ("... applied and worse than nothing", ("sensor_calibration", "applied_worse"), "{:d}", "0"),
                      ("sensor calibration: |error| / sigma, median", ("sensor_calibration", "z_median"), "{:.2f}",
                       "0.5-2"),
                      ("sensor calibration: |error| / sigma, p90", ("sensor_calibration", "z_p90"), "{:.2f}", "")]
    for key, r in sorted((scored.get("rows") or {}).items()):
        mark = "meets" if r.get("meets") else "misses"
        out.append((f"sensor calibration {key}: estimated bias ({mark}; sigma {r['sigma']:.3g})",
                    ("sensor_calibration", "rows", key, "estimated"), "{:.3g}", f"true {r['true']:.3g}"))
    return out


def rows(result: dict) -> list[Row]:
    """Every row of one result (module docstring)."""
    return [("seed", ("seed",), "{:d}", ""),  # labelled with its role by bench/report.py
            ("catalogue objects", ("objects",), "{:,}", ""), *_position_rows(result), *_event_rows(),
            *_fused_rows(result), *_cdm_rows(), *_sensor_rows(result),
            ("recall of the true approaches under 1 km", ("recall_under_1km", "recall"), "{:.3f}", "1"),
            ("true approaches under 1 km in the horizon", ("recall_under_1km", "true"), "{:,}", ""),
            ("recall of the true approaches under the screening threshold", ("recall_under_threshold", "recall"),
             "{:.3f}", ""),
            ("true approaches under the screening threshold", ("recall_under_threshold", "true"), "{:,}", "")]


def pick(results: dict[str, dict]) -> dict[str, tuple[str, dict]]:
    """Block name -> (results file name, result) of the accuracy results among ``results`` (file stem ->
    result): per sky the held-out seed's before a development seed's, then the newest ``date``, then the larger
    seed."""
    best: dict[str, tuple[tuple, str, dict]] = {}
    for stem, result in results.items():
        m = RESULT_NAME.fullmatch(stem)
        if not m:
            continue
        key = (seeds.role(int(m.group("seed"))) == seeds.HELD_OUT, str(result.get("date", "")), int(m.group("seed")))
        block = BLOCK.format(sky=m.group("sky"))
        if block not in best or key > best[block][0]:
            best[block] = (key, stem, result)
    return {block: (stem, result) for block, (_, stem, result) in best.items()}
