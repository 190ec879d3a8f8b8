"""Shared fixtures: one Spark session (Delta, UI off, few partitions) for the whole run, and a
fresh lakehouse / landing / outbox under ``tmp_path`` for each test."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

# py4j says goodbye from a __del__ at interpreter exit, after pytest has closed the stream a stage's
# logging.basicConfig attached: a "--- Logging error ---" traceback under the summary otherwise
logging.getLogger("py4j").setLevel(logging.WARNING)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from sda.settings import load_settings
    from sda.spark import build_session

    settings = load_settings(env={}, lakehouse=tmp_path_factory.mktemp("session-lakehouse"))
    session = build_session("sda-tests", settings, extra={"spark.sql.shuffle.partitions": "2",
                                                           "spark.default.parallelism": "2"})
    yield session
    session.stop()


@pytest.fixture
def settings(tmp_path):
    """Settings pointing at empty per-test directories; the environment's SDA_* are ignored."""
    from sda.settings import load_settings

    return load_settings(
        env={},
        lakehouse=tmp_path / "lakehouse",
        landing=tmp_path / "landing",
        outbox=tmp_path / "outbox",
        catalog_file=tmp_path / "catalog" / "catalog.tle",
        shuffle_partitions=2,
    )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (real reference data); tests that need it skip where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data not found at {SHARED_DATA} (a plain clone has no ../shared/data)")
    return SHARED_DATA
