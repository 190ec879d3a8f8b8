"""What the exactly-once test files share: one simulated scenario and the uninterrupted reference
run on it, built once per test session even when the files run in different pytest-xdist workers
(:func:`tests.conftest.built_once`), and the helpers that run stages on fresh lakehouses.

The files: ``test_exactly_once_determinism.py`` (file order and run split, replay, lineage),
``test_exactly_once_killed_stages.py`` (each stage killed at every point of its write sequence) and
``test_exactly_once_process_kills.py`` (a real ``kill -9`` of a job process and of the server).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from sda.config.settings import load_settings
from sda.lake.tables import TABLES
from sda.pipeline import changefeed
from tests import chain
from tests.conftest import CONNECT_PORT, built_once

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SIM_START = dt.datetime(2026, 11, 20, 10, 0, tzinfo=chain.UTC)
SCREEN = ["--screen-start", "2026-11-20T10:00:00Z", "--horizon-h", "3"]


def lakehouse(tmp_path: Path, name: str, catalog: Path):
    base = tmp_path / name
    return load_settings(env={}, lakehouse=base / "lakehouse", landing=base / "landing", outbox=base / "outbox",
                         catalog_file=catalog, shuffle_partitions=2, connect_port=CONNECT_PORT)


def load_catalog(spark, settings, run_id="catalog-1"):
    chain.run_stage(spark, settings, "catalog", run_id, ["--file", str(settings.catalog_file)])


def _build(spark, root: Path):
    """One simulated scenario (with every kind of disorder and an injected conjunction), all its files
    landed at once and one run of every stage on them: the uninterrupted result."""
    from sda.sim.simulate import SimConfig, simulate

    staging = root / "staging"
    result = simulate(SimConfig(start=SIM_START, end=SIM_START + dt.timedelta(minutes=10), landing=staging / "landing",
                                catalog_out=staging / "catalog.tle", objects=150, seed=7, inject_conjunction=True,
                                tca=SIM_START + dt.timedelta(hours=1)))
    files = sorted(result.files)
    settings = lakehouse(root / "reference", "ref", staging / "catalog.tle")
    load_catalog(spark, settings)
    chain.land(files, staging / "landing", settings.landing)
    chain.run_flow(spark, settings, "run-1")
    chain.run_stage(spark, settings, "conjunction", "run-1", SCREEN)
    return (staging, files), (settings, chain.snapshot(spark, settings))


@pytest.fixture(scope="module")
def scenario(spark):
    return built_once("exactly-once-reference", lambda root: _build(spark, root))


@pytest.fixture(scope="module")
def staging(scenario):
    """(staging root with landing/ and catalog.tle, the landed files) of the shared scenario."""
    return scenario[0]


@pytest.fixture(scope="module")
def reference(scenario):
    """(settings, snapshot) of the uninterrupted run; tests that write copy it (:func:`copy_of`)."""
    return scenario[1]


def copy_of(settings, tmp_path: Path, name: str):
    """An independent copy of a lakehouse (Delta tables hold relative paths: a copied tree is a table)."""
    import shutil

    base = settings.lakehouse.parent
    shutil.copytree(base, tmp_path / name)
    return lakehouse(tmp_path, name, settings.catalog_file)


def replay(spark, settings, stage: str, start: dt.datetime, end: dt.datetime, extra=()):
    argv = ["--start", chain.iso(start), "--end", chain.iso(end), "--run-id", f"replay-{stage}", "--replay", *extra]
    return chain.job(stage).main(argv, settings=settings, spark=spark)


def progress_of(spark, settings):
    """The consumed versions and the progress log's length (a commit appends rows)."""
    return changefeed.consumed_versions(spark, settings), TABLES["progress"].read(spark, settings).count()


NORMALIZED = ("observations", "quarantine")


def through_normalize(spark, settings) -> dict[str, list[tuple]]:
    """What ingest and normalize alone decide: silver observations and their quarantine rows. The
    kill tests that die inside normalize compare this with the reference (:func:`reference_through_normalize`):
    the stages downstream are the same code as in any other run, so running them proves nothing more."""
    return _normalized(chain.snapshot(spark, settings, NORMALIZED))


def reference_through_normalize(reference) -> dict[str, list[tuple]]:
    return _normalized({name: reference[1][name] for name in NORMALIZED})


def _normalized(snap: dict[str, list[tuple]]) -> dict[str, list[tuple]]:
    # a quarantine row's second column is the stage that refused it
    return {**snap, "quarantine": [row for row in snap["quarantine"] if row[1] in ("ingest", "normalize")]}
