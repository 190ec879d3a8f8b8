"""Re-association (sda.orbit.correlation.reassociation): a window's observations decided again against the fused
orbits of the windows before it, and which rows that rewrites or moves -- against a known orbit and hand-built rows."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from sda.orbit import correlation as C
from sda.orbit import screening as S
from sda.orbit.correlation import reassociation as R
from sda.orbit.estimation.estimator import OdResult
from sda.orbit.estimation.predict import predict
from sda.orbit.frames import propagate

EPOCH = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
WINDOW_START = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.timezone.utc).timestamp()
ELEMENTS = (550.0, 0.0002, 53.0, 100.0, 0.0, 200.0)


def _fit(sat, offset_km: np.ndarray) -> OdResult:
    """A fused orbit 5 km off the element set, its epoch an hour before the window, 30 m / 3 cm/s sigmas."""
    t0 = WINDOW_START - 3600.0
    _, r, v = propagate([sat], np.array([t0]))
    state = np.concatenate([r[0, 0] + offset_km, v[0, 0]]) * 1000.0
    cov = np.diag([30.0**2] * 3 + [0.03**2] * 3 + [1e-6])
    return OdResult(t0, state, cov, 0.01, t0 - 7200.0, t0, {}, {}, 0, 1.0, 3, "converged")


def _isl(fit: OdResult, t: float, obs_id: str) -> dict:
    """An ISL report exactly on the fused orbit's own prediction (the truth here)."""
    x = predict(fit, np.array([t])).r_km[0] * 1000.0
    return {"obs_id": obs_id, "sensor_id": "ISL-01", "sensor_kind": "isl", "x_m": x[0], "y_m": x[1], "z_m": x[2],
            "event_time": pd.Timestamp(t, unit="s")}


def test_an_observation_outside_the_element_sets_gate_is_correlated_on_the_fused_orbit():
    sat = S.satrecs_from_lines(*zip(S.tle_from_elements(21, EPOCH, *ELEMENTS)))
    fit = _fit(sat[0], np.array([3.0, -4.0, 0.0]))
    obs = pd.DataFrame([_isl(fit, WINDOW_START + 600.0, "a"), _isl(fit, WINDOW_START + 700.0, "b")])
    first = C.correlate_frame(obs, [21], sat, 50.0)
    assert (first["status"] == "uncorrelated").all()  # 5 km off a 6-hour-old element set
    again = R.retest(obs, [21], sat, {21: fit}, WINDOW_START, 50.0, None)
    assert (again["status"] == "correlated").all() and (again["norad_id"] == 21).all()
    assert again["residual_m"].max() < 0.05  # Hermite between 20 s nodes anchored at the window start
    current = first.assign(norad_id=pd.array([pd.NA, pd.NA], dtype="Int64"))
    changes = R.compare(current, again)
    assert changes["move"].all() and changes["rewrite"].all()
    assert list(changes["from_status"]) == ["uncorrelated"] * 2 and changes["from_norad_id"].isna().all()
    assert list(changes["why"]) == ["inside a gate now"] * 2


def test_where_the_fused_orbit_finds_no_object_the_element_sets_association_stands():
    """A burn: the observations left the fused orbit (5 km away, 30 m sigmas) but not the element set's gate."""
    sat = S.satrecs_from_lines(*zip(S.tle_from_elements(21, EPOCH, *ELEMENTS)))
    on_set = _fit(sat[0], np.zeros(3))
    obs = pd.DataFrame([_isl(on_set, WINDOW_START + 600.0, "a")])
    first = C.correlate_frame(obs, [21], sat, 50.0)
    assert first["status"].iloc[0] == "correlated"
    moved = _fit(sat[0], np.array([3.0, -4.0, 0.0]))
    tracks_only = C.correlate_frame(obs, [21], sat, 50.0, tracks=_tracks(moved, sat))
    assert tracks_only["status"].iloc[0] == "uncorrelated"  # far outside the fused orbit's gate
    again = R.retest(obs, [21], sat, {21: moved}, WINDOW_START, 50.0, None)
    assert not again["wide"].any()
    pd.testing.assert_frame_equal(again.drop(columns="wide"), first)


def _tracks(fit: OdResult, sat):
    from sda.orbit.correlation.tracks import from_results

    return from_results({0: fit}, WINDOW_START, WINDOW_START + 1200.0)


def test_without_fused_orbits_the_decision_is_the_correlators():
    sat = S.satrecs_from_lines(*zip(S.tle_from_elements(21, EPOCH, *ELEMENTS)))
    fit = _fit(sat[0], np.array([0.2, 0.1, 0.0]))
    obs = pd.DataFrame([_isl(fit, WINDOW_START + 60.0 * k, f"o{k}") for k in range(3)])
    first = C.correlate_frame(obs, [21], sat, 50.0)
    again = R.retest(obs, [21], sat, {}, WINDOW_START, 50.0, None)
    assert not again["wide"].any()
    pd.testing.assert_frame_equal(again.drop(columns="wide"), first)
    assert not R.compare(first, again)["rewrite"].any()


def _row(obs_id, status, norad=None, **values):
    base = {c: np.nan for c, d in C.RESULT_COLUMNS.items() if d == "float64"}
    return {**base, "obs_id": obs_id, "status": status, "norad_id": norad, "candidates": 1 if norad else 0,
            "ambiguous": False, "reason": None if norad else C.REASON_NO_CANDIDATE, "nearest_norad_id": None,
            **values}


def _frame(rows):
    frame = pd.DataFrame(rows)
    for c in ("norad_id", "nearest_norad_id"):
        frame[c] = pd.array(frame[c], dtype="Int64")
    return frame


def test_compare_rewrites_what_a_table_stores_and_moves_on_status_or_object():
    current = _frame([_row("same", "correlated", 5, residual_m=100.0, gate_d2=2.0),
                      _row("tiny", "correlated", 5, residual_m=100.0, gate_d2=2.0),
                      _row("numbers", "correlated", 5, residual_m=100.0, gate_d2=2.0),
                      _row("other", "correlated", 5, residual_m=100.0, gate_d2=2.0),
                      _row("out", "correlated", 5, residual_m=100.0, gate_d2=2.0),
                      _row("held", "uncorrelated", nearest_norad_id=7, nearest_residual_m=900.0)])
    decided = _frame([_row("same", "correlated", 5, residual_m=100.0, gate_d2=2.0),
                      _row("tiny", "correlated", 5, residual_m=100.0 * (1 + 1e-9), gate_d2=2.0),
                      _row("numbers", "correlated", 5, residual_m=40.0, gate_d2=0.5),
                      _row("other", "correlated", 6, residual_m=30.0, gate_d2=1.0),
                      _row("out", "uncorrelated", reason=C.REASON_UNDECIDED, ambiguous=True, nearest_norad_id=5),
                      # what the table does not store of an uncorrelated row (candidates) does not count
                      _row("held", "uncorrelated", nearest_norad_id=7, nearest_residual_m=900.0, candidates=3)])
    out = R.compare(current, decided).set_index("obs_id")
    assert list(out["rewrite"]) == [False, False, True, True, True, False]
    assert list(out["move"]) == [False, False, False, True, True, False]
    assert out.loc["other", "from_norad_id"] == 5 and out.loc["other", "why"] == "another object likelier"
    assert out.loc["out", "why"] == C.REASON_UNDECIDED and out.loc["out", "from_status"] == "correlated"
    assert out["why"].isna().sum() == 4


def test_the_basis_names_the_orbits_and_their_states():
    row = {"fused_id": "f1", "epoch_unix": 1.0, "x_km": 7000.0, "y_km": 0.0, "z_km": 0.0}
    a = R.basis_digest({3: row, 4: {**row, "fused_id": "f2"}})
    assert a == R.basis_digest({4: {**row, "fused_id": "f2"}, 3: row})  # order does not matter
    assert a != R.basis_digest({3: {**row, "x_km": 7000.001}, 4: {**row, "fused_id": "f2"}})
    assert a != R.basis_digest({3: row})
    assert R.basis_digest({}) == R.basis_digest({})


@pytest.mark.parametrize("n", [0])
def test_no_observations_decide_nothing(n):
    sat = S.satrecs_from_lines(*zip(S.tle_from_elements(21, EPOCH, *ELEMENTS)))
    out = R.retest(pd.DataFrame(columns=C.OBSERVATION_COLUMNS), [21], sat, {}, WINDOW_START, 50.0, None)
    assert len(out) == n and list(out.columns) == [*C.RESULT_COLUMNS, "wide"]


def _off_the_set(sat, t: float, along_m: float, obs_id: str) -> dict:
    """An ISL report ``along_m`` ahead of the element set's position along track at ``t``."""
    _, r, v = propagate([sat], np.array([t]))
    r, v = r[0, 0] * 1000.0, v[0, 0]
    n = np.cross(r, v) / np.linalg.norm(np.cross(r, v))
    along = np.cross(n, r / np.linalg.norm(r))
    x = r + along_m * along
    return {"obs_id": obs_id, "sensor_id": "ISL-01", "sensor_kind": "isl", "x_m": x[0], "y_m": x[1], "z_m": x[2],
            "event_time": pd.Timestamp(t, unit="s")}


def _wide_case():
    """An element set and a report along track where the model's gate misses it and the wider one takes it: d2 on
    the model (ISL: sT^2 + the sensor's sigma^2 along track) twice the gate's limit, under a quarter of it wider."""
    from sda.orbit.correlation.gate import GATE_D2
    from sda.orbit.sensors import sensor_sigmas

    sat = S.satrecs_from_lines(*zip(S.tle_from_elements(21, EPOCH, *ELEMENTS)))
    t = WINDOW_START + 600.0
    s_t = C.prediction_model(sat).sigma_rtn_m(np.array([0]), np.array([t]))[0, 1]
    s_isl = sensor_sigmas(None)["ISL-01"]["sigma_pos_m"]
    along = np.sqrt(2.0 * GATE_D2[3] * (s_t**2 + s_isl**2))
    assert along**2 / ((R.WIDE_SIGMA_SCALE * s_t) ** 2 + s_isl**2) < GATE_D2[3] / 4  # the wider gate takes it
    return sat, pd.DataFrame([_off_the_set(sat[0], t, along, "w")])


def test_the_wider_pass_finds_an_object_whose_element_set_the_model_under_covers():
    sat, obs = _wide_case()
    assert C.correlate_frame(obs, [21], sat, 50.0)["status"].iloc[0] == "uncorrelated"
    again = R.retest(obs, [21], sat, {}, WINDOW_START, 50.0, None)
    assert again["status"].iloc[0] == "correlated" and again["norad_id"].iloc[0] == 21 and again["wide"].iloc[0]
    assert R.compare(C.correlate_frame(obs, [21], sat, 50.0), again)["why"].iloc[0] == "inside the wider gate"


def test_the_wider_pass_keeps_a_burned_objects_observation_with_it():
    """Its fused orbit 5 km off the report (a burn since), its element set's model gate missed: the widened element
    set takes it; with a second object beside it, as likely, it stays as the gates left it."""
    sat, obs = _wide_case()
    fit = _fit(sat[0], np.array([0.0, 0.0, 5.0]))
    again = R.retest(obs, [21], sat, {21: fit}, WINDOW_START, 50.0, None)
    assert again["status"].iloc[0] == "correlated" and again["norad_id"].iloc[0] == 21 and again["wide"].iloc[0]
    twin = S.satrecs_from_lines(*zip(S.tle_from_elements(22, EPOCH, *ELEMENTS)))  # another number, one orbit
    both = R.retest(obs, [21, 22], [sat[0], twin[0]], {21: fit}, WINDOW_START, 50.0, None,
                    bodies=np.array([True, True]))
    assert both["status"].iloc[0] == "uncorrelated" and both["reason"].iloc[0] == C.REASON_NO_CANDIDATE
    assert not both["wide"].iloc[0]
