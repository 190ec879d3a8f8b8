"""``sda trace`` on fused orbits (sda.pipeline.lineage.orbit): which orbit an alert used per object, the fit
behind a ``fused/<regime>/<fused_id>`` covariance source and the observations it was fitted to -- on
hand-made rows, and through :func:`sda.pipeline.lineage.trace` on small hand-made tables."""

from __future__ import annotations

import datetime as dt

import pytest

from sda.orbit.fusion.arcs import obs_digest
from sda.pipeline.lineage import command
from sda.pipeline.lineage import orbit as lf

T0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
MIN = dt.timedelta(minutes=1)


def _obs(obs_id, sensor_id, kind, minutes, run):
    return {"obs_id": obs_id, "sensor_id": sensor_id, "sensor_kind": kind, "event_time": T0 + minutes * MIN,
            "correlate_run_id": run}


WINDOW = [_obs("c", "OPT-1", "optical", 60, "r2"), _obs("a", "RAD-1", "radar", 10, "r1"),
          _obs("b", "RAD-1", "radar", 20, "r1")]


def test_fused_id_of_a_covariance_source():
    assert lf.fused_id_of("fused/LEO/0123abcd") == "0123abcd"
    assert lf.fused_id_of("observed/LEO") is None and lf.fused_id_of("tle/GEO") is None
    assert lf.fused_id_of(None) is None and lf.fused_id_of("fused/LEO/") is None


def test_fitted_subset_checks_the_digest():
    everything = obs_digest(["a", "b", "c"])
    assert lf.fitted_subset(WINDOW, everything, None) == (WINDOW, "window")
    # fitted before "c" was correlated (by run r2): the rows of the runs known at the fit match
    rows, match = lf.fitted_subset(WINDOW, obs_digest(["a", "b"]), ["r1"])
    assert match == "known" and sorted(r["obs_id"] for r in rows) == ["a", "b"]
    # neither all nor the known ones: the window changed (here an observation was withdrawn)
    assert lf.fitted_subset(WINDOW, obs_digest(["a", "b", "c", "z"]), ["r1", "r2"]) == (WINDOW, "changed")
    assert lf.fitted_subset(WINDOW, obs_digest(["a", "b"]), None) == (WINDOW, "changed")


def test_observation_summary_counts_all_and_lists_the_first():
    got = lf.observation_summary(WINDOW, limit=2)
    assert got["count"] == 3
    assert got["by_sensor"] == {"OPT-1": 1, "RAD-1": 2} and got["by_kind"] == {"optical": 1, "radar": 2}
    assert [o["obs_id"] for o in got["listed"]] == ["a", "b"]  # by event time
    assert set(got["listed"][0]) == {"obs_id", "sensor_id", "sensor_kind", "event_time"}


def _orbit(**over):
    row = {"fused_id": "F1", "norad_id": 1, "window_start": T0, "window_end": T0 + 360 * MIN,
           "fit_start": T0 + 10 * MIN, "epoch": T0 + 60 * MIN, "status": "converged", "reason": None, "rms": 1.07,
           "iterations": 4, "observations": 3, "outliers": 1, "n_radar": 2, "n_optical": 1, "n_isl": 0,
           "used_radar": 1, "used_optical": 1, "used_isl": 0, "prior_source": "fused", "source": "fused",
           "regime": "LEO", "sigma_r_m": 12.0, "sigma_t_m": 48.4, "sigma_n_m": 7.0,
           "obs_digest": obs_digest(["a", "b", "c"]), "line1": "1", "line2": "2", "run_id": "fuse-1"}
    return {**row, **over}


def test_render_names_the_fit_and_its_observations():
    used = {"kind": "fused", "cov_source": "fused/LEO/F1", "fused_id": "F1", "found": "change feed",
            "fused_orbit": _orbit(), "fitted_observations": {**lf.observation_summary(WINDOW, 2), "match": "window"}}
    text = "\n".join(command.render_orbit(used, 2))
    assert "fused orbit F1 (fused/LEO/F1)" in text
    assert "converged, weighted RMS 1.07, 4 iterations, prior fused" in text
    assert "observations 3: radar 2 (1 used), optical 1 (1 used); outliers 1" in text
    assert "found in the change feed" in text and "1-sigma R/T/N at epoch 12 / 48 / 7 m" in text
    assert "fitted to 3 observations (OPT-1 1, RAD-1 2, first 2 shown)" in text
    assert "obs a" in text and "obs b" in text and "obs c" not in text
    gone = "\n".join(command.render_orbit({**used, "fused_orbit": None, "fitted_observations": None}, 2))
    assert "not found" in gone
    catalogue = command.render_orbit(lf.catalogue_orbit("tle/LEO"), 2)
    assert catalogue == ["  orbit used: the catalogue element set and the modelled covariance "
                         "(covariance source tle/LEO)"]


# --- through lineage.trace, on hand-made tables --------------------------------------------------------

def _row(schema, **values):
    """A tuple of ``schema`` with ``values``, every other non-nullable column a zero of its type."""
    zero = {"long": 0, "integer": 0, "double": 0.0, "string": "x", "boolean": False, "timestamp": T0,
            "date": T0.date()}
    full = {f.name: None if f.nullable else zero[f.dataType.typeName()] for f in schema.fields}
    full.update(values)
    return tuple(full[f.name] for f in schema.fields)


def _seed(spark, settings):
    from sda.lake import schemas
    from sda.lake.schemas import FUSED_ORBITS
    from sda.lake.tables import TABLES, ensure_tables
    from tests.seed import append_rows

    ensure_tables(spark, settings)
    correlated = [_row(schemas.CORRELATED, norad_id=norad, event_date=o["event_time"].date(), bronze_id=o["obs_id"],
                       **o) for norad, o in [(1, w) for w in WINDOW] + [(1, _obs("d", "RAD-1", "radar", 400, "r2")),
                                                                         (2, _obs("e", "RAD-1", "radar", 30, "r1"))]]
    append_rows(spark, settings, "correlated", correlated)
    metrics = [_row(schemas.RUN_METRICS, stage=stage, run_id=run, finished=T0 + minutes * MIN, metrics_json="{}")
               for stage, run, minutes in (("correlate", "r1", 30), ("fuse", "fuse-1", 35), ("correlate", "r2", 90),
                                           ("fuse", "fuse-2", 95), ("conjunction", "s1", 40))]
    append_rows(spark, settings, "run_metrics", metrics)
    orbit = _orbit(fused_id="F1", obs_digest=obs_digest(["a", "b"]), run_id="fuse-1", covariance=None)
    append_rows(spark, settings, "fused_orbits", [_row(FUSED_ORBITS, **orbit)])
    # the window refitted once "c" arrived: F1 is gone from the table, in its change feed only
    spark.sql(f"UPDATE delta.`{TABLES['fused_orbits'].path(settings)}` SET fused_id = 'F2', run_id = 'fuse-2', "
              f"obs_digest = '{obs_digest(['a', 'b', 'c'])}' WHERE norad_id = 1").collect()
    alerts = [_row(schemas.ALERT, alert_id=alert_id, event_id=alert_id, primary_id=1, secondary_id=2,
                   screen_start=T0, tca=T0 + 600 * MIN, p_cov_source=source, s_cov_source="tle/LEO",
                   first_run_id="s1", status="new", level="red", version=1)
              for alert_id, source in (("A1", "fused/LEO/F1"), ("A2", "fused/LEO/F2"), ("A3", "fused/LEO/gone"))]
    append_rows(spark, settings, "alerts", alerts)



def test_render_moves_lists_each_move_from_to_round_and_why():
    moves = [{"event_time": dt.datetime(2026, 11, 21, 12, 5), "obs_id": "a" * 40, "from_status": "uncorrelated",
              "from_norad_id": None, "to_status": "correlated", "to_norad_id": 25544, "round": 1,
              "reason": "inside a gate now", "run_id": "r7"},
             {"event_time": dt.datetime(2026, 11, 21, 12, 9), "obs_id": "b" * 40, "from_status": "correlated",
              "from_norad_id": 25544, "to_status": "correlated", "to_norad_id": 25545, "round": 2,
              "reason": "another object likelier", "run_id": "r7"}]
    out = command.render_moves(moves, limit=1)
    assert out == ["  observations re-association moved to or from it: 2 (last 1 shown)",
                   "    2026-11-21 12:09:00 obs bbbbbbbbbbbbbbbb correlated 25544 -> correlated 25545  "
                   "round 2 of run r7: another object likelier"]
    assert command.render_moves([], 5) == []
    assert "uncorrelated -> correlated 25544  round 1" in command.render_moves(moves, 5)[1]

def test_trace_follows_the_fused_orbit_an_alert_used(spark, settings):
    from sda.pipeline import lineage

    _seed(spark, settings)
    old = lineage.trace(spark, settings, "A1", limit=1)
    used = old["objects"]["primary"]["orbit_used"]
    assert (used["kind"], used["fused_id"], used["found"]) == ("fused", "F1", "change feed")
    assert used["fused_orbit"]["run_id"] == "fuse-1" and used["fused_orbit"]["prior_source"] == "fused"
    fitted = used["fitted_observations"]
    # the window holds a, b, c (d is after it); F1 was fitted before run r2 correlated c
    assert (fitted["match"], fitted["count"], fitted["window_rows"]) == ("known", 2, 3)
    assert fitted["by_sensor"] == {"RAD-1": 2} and [o["obs_id"] for o in fitted["listed"]] == ["a"]
    assert old["objects"]["secondary"]["orbit_used"]["kind"] == "catalogue"
    assert old["alert"]["p_cov_source"] == "fused/LEO/F1"
    text = lineage.render(old, 1)
    assert "orbit used: fused orbit F1" in text and "fitted to 2 observations (RAD-1 2, first 1 shown)" in text
    assert "orbit used: the catalogue element set and the modelled covariance (covariance source tle/LEO)" in text
    # the screening run's trace: sha256("sda-run:<run id>")'s first 32 hex digits (sda.pipeline.tracing)
    import hashlib

    expected = hashlib.sha256(f"sda-run:{old['screened_by_run']}".encode()).hexdigest()[:32]
    assert old["trace_id"] == expected and f"  trace {expected}: " in text

    current = lineage.trace(spark, settings, "A2")["objects"]["primary"]["orbit_used"]
    assert (current["found"], current["fitted_observations"]["match"]) == ("table", "window")
    assert current["fitted_observations"]["by_sensor"] == {"OPT-1": 1, "RAD-1": 2}

    gone = lineage.trace(spark, settings, "A3")["objects"]["primary"]["orbit_used"]
    assert (gone["found"], gone["fused_orbit"], gone["fitted_observations"]) == (None, None, None)


@pytest.mark.parametrize("source", ["observed/GEO", None])
def test_a_non_fused_object_used_the_catalogue(source):
    used = lf.orbit_used(None, None, source, 5)  # no Spark needed: nothing to look up
    assert used == {"kind": "catalogue", "cov_source": source,
                    "note": "the catalogue element set and the modelled covariance"}
