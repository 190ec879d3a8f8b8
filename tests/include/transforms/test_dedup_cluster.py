"""dedup's near-duplicate clustering (:func:`sda.transforms.envelope._components`), vectorised by
time offset, against hand-made cases and a brute-force oracle: every pair of rows compared in plain
Python with the tolerances written out here, components by repeated merging."""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest

from sda.transforms import envelope

COLUMNS = ["obs_id", "sensor_id", "sensor_kind", "event_us", "range_m", "az_rad", "el_rad", "ra_rad", "dec_rad",
           "x_m", "y_m", "z_m"]


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{c: r.get(c, np.nan) for c in COLUMNS} for r in rows], columns=COLUMNS)


def radar(obs_id, t_us, rng, az, el):
    return {"obs_id": obs_id, "sensor_id": "R", "sensor_kind": "radar", "event_us": t_us, "range_m": rng,
            "az_rad": az, "el_rad": el}


def result(pdf: pd.DataFrame) -> dict[str, tuple[str, int]]:
    rep, copies, keep = envelope._components(pdf)
    ids = pdf["obs_id"].to_numpy()
    return {ids[i]: (ids[rep[i]], int(copies[i])) for i in np.flatnonzero(keep)}


def oracle(pdf: pd.DataFrame) -> dict[str, tuple[str, int]]:
    """Every pair within 0.1 s compared with the tolerances (100 m, 0.05 deg, 5 arcsec, 500 m); groups
    are the connected components; representative = earliest (event time, obs_id)."""
    rows = pdf.to_dict("records")
    tol_ang, tol_sep = math.radians(0.05), math.radians(5 / 3600)

    def same(a, b):
        if a["sensor_kind"] != b["sensor_kind"] or abs(a["event_us"] - b["event_us"]) > 100_000:
            return False
        if a["sensor_kind"] == "radar":
            daz = abs(a["az_rad"] - b["az_rad"]) % (2 * math.pi)
            return (abs(a["range_m"] - b["range_m"]) <= 100 and min(daz, 2 * math.pi - daz) <= tol_ang
                    and abs(a["el_rad"] - b["el_rad"]) <= tol_ang)
        if a["sensor_kind"] == "optical":
            ua = (math.cos(a["dec_rad"]) * math.cos(a["ra_rad"]), math.cos(a["dec_rad"]) * math.sin(a["ra_rad"]),
                  math.sin(a["dec_rad"]))
            ub = (math.cos(b["dec_rad"]) * math.cos(b["ra_rad"]), math.cos(b["dec_rad"]) * math.sin(b["ra_rad"]),
                  math.sin(b["dec_rad"]))
            return 2 * math.asin(min(1.0, math.dist(ua, ub) / 2)) <= tol_sep  # chord -> angle
        return math.dist([a[c] for c in "x_m y_m z_m".split()], [b[c] for c in "x_m y_m z_m".split()]) <= 500

    neighbours = {r["obs_id"]: set() for r in rows}
    for k, a in enumerate(rows):  # every pair, once
        for b in rows[k + 1:]:
            if same(a, b):
                neighbours[a["obs_id"]].add(b["obs_id"])
                neighbours[b["obs_id"]].add(a["obs_id"])
    by_id, seen, groups = {r["obs_id"]: r for r in rows}, set(), []
    for start in neighbours:  # components: everything reachable through a chain of pairs
        if start not in seen:
            group, todo = set(), [start]
            while todo:
                node = todo.pop()
                if node not in group:
                    group.add(node)
                    todo += neighbours[node] - group
            seen |= group
            groups.append(group)
    out = {}
    for g in groups:
        rep = min(g, key=lambda i: (by_id[i]["event_us"], i))
        out.update({i: (rep, len(g)) for i in g})
    return out


def test_hand_made_radar_cases():
    deg = math.radians
    pdf = frame([
        radar("a", 1_000_000, 1_000_000.0, deg(10.0), deg(30.0)),
        radar("b", 1_050_000, 1_000_050.0, deg(10.04), deg(30.0)),   # a's repeat: 0.05 s, 50 m, 0.04 deg
        radar("c", 1_050_000, 1_000_050.0, deg(10.2), deg(30.0)),    # same time, 0.2 deg off: another object
        radar("d", 1_200_000, 1_000_000.0, deg(10.0), deg(30.0)),   # 0.2 s after a: a later detection
        radar("e", 5_000_000, 2_000_000.0, deg(359.98), deg(5.0)),
        radar("f", 5_000_000, 2_000_010.0, deg(0.01), deg(5.0)),     # across 0/360 deg from e: its repeat
        radar("g", 5_000_000, 2_000_200.0, deg(0.01), deg(5.0)),     # 200 m off: not
        radar("h", 9_000_000, np.nan, deg(1.0), deg(5.0)),
        radar("i", 9_000_000, np.nan, deg(1.0), deg(5.0)),           # a missing range never matches
    ])
    got = result(pdf)
    assert got == {"a": ("a", 2), "b": ("a", 2), "c": ("c", 1), "d": ("d", 1), "e": ("e", 2), "f": ("e", 2),
                   "g": ("g", 1), "h": ("h", 1), "i": ("i", 1)}


def test_chain_joins_through_a_middle_copy_and_ties_go_to_the_smaller_id():
    pdf = frame([radar("z", 0, 1e6, 0.1, 0.2), radar("y", 60_000, 1e6 + 60, 0.1, 0.2),
                 radar("x", 120_000, 1e6 + 120, 0.1, 0.2),  # 120 m from z: joined only through y
                 radar("q", 300_000, 5e5, 1.0, 0.5), radar("p", 300_000, 5e5, 1.0, 0.5)])  # same instant: p wins
    assert result(pdf) == {"z": ("z", 3), "y": ("z", 3), "x": ("z", 3), "q": ("p", 2), "p": ("p", 2)}


@pytest.mark.parametrize("seed", range(6))
def test_random_sensor_streams_match_the_pairwise_oracle(seed):
    rnd = random.Random(seed)
    rows, n = [], 0
    for _ in range(60):  # bursts: many rows within 0.1 s (a radar frame), some repeated with jitter
        t0 = rnd.randrange(0, 3_000_000)
        kind = rnd.choice(["radar", "optical", "isl"]) if seed % 2 else "radar"
        for _ in range(rnd.randrange(1, 8)):
            n += 1
            base = {"obs_id": f"o{n:04d}", "sensor_id": "S", "sensor_kind": kind,
                    "event_us": t0 + rnd.randrange(0, 90_000)}
            if kind == "radar":
                az = rnd.choice([0.0005, 6.2829, rnd.uniform(0, 6.28)])  # either side of 0/360 deg, or anywhere
                base.update(range_m=rnd.uniform(5e5, 5.003e5), az_rad=az, el_rad=rnd.uniform(0.3, 0.3015))
            elif kind == "optical":
                base.update(ra_rad=rnd.uniform(1.0, 1.00006), dec_rad=rnd.uniform(0.2, 0.20006))
            else:
                base.update(x_m=7e6 + rnd.uniform(0, 900), y_m=rnd.uniform(0, 900), z_m=rnd.uniform(0, 900))
            rows.append(base)
            for _ in range(rnd.choice([0, 0, 1, 2])):  # repeats: re-stamped, values jittered
                n += 1
                copy = dict(base, obs_id=f"o{n:04d}", event_us=base["event_us"] + rnd.randrange(-80_000, 80_000))
                for c in ("range_m", "x_m"):
                    if c in copy:
                        copy[c] += rnd.uniform(-60, 60)
                rows.append(copy)
    pdf = frame(rows).sample(frac=1.0, random_state=seed)  # arrival order must not matter
    expected = oracle(pdf)
    assert sum(1 for k, (rep, _) in expected.items() if k != rep) > 10  # the case has real duplicates
    assert result(pdf) == expected


def test_only_groups_with_a_touched_member_come_out_when_asked():
    # a + b one measurement (b touched): both out; c alone, untouched: left out; d alone, touched: out
    pdf = frame([radar("a", 0, 1_000_000.0, 1.0, 0.5), radar("b", 50_000, 1_000_040.0, 1.0, 0.5),
                 radar("c", 5_000_000, 1_000_000.0, 1.0, 0.5), radar("d", 9_000_000, 2_000_000.0, 2.0, 0.3)])
    pdf["touched"] = [False, True, False, True]
    assert result(pdf) == {"a": ("a", 2), "b": ("a", 2), "d": ("d", 1)}
    pdf["touched"] = False
    assert result(pdf) == {}


def test_representatives_keep_each_groups_earliest_row():
    """envelope.representatives (what a benchmark takes as dedup's decision): a's copy b, 0.05 s later, folds
    into a; d, at a's time but 900 km further, stays; of two equal rows at one time the smaller id (e) stays."""
    rows = [radar("b", 1_050_000, 7_000_000.0, 1.0, 0.5), radar("a", 1_000_000, 7_000_000.0, 1.0, 0.5),
            radar("d", 1_200_000, 7_900_000.0, 1.0, 0.5), radar("f", 9_000_000, 6_000_000.0, 2.0, 0.2),
            radar("e", 9_000_000, 6_000_000.0, 2.0, 0.2)]
    assert list(envelope.representatives(frame(rows))) == [False, True, True, False, True]
