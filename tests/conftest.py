"""Shared fixtures: one Spark session (Delta, UI off, few partitions) for the whole run, and a
fresh lakehouse / landing / outbox under ``tmp_path`` for each test."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest

from tests.ports import free_port

# fixtures shared by several test files (the exactly-once scenario and its reference run)
pytest_plugins = ["tests.exactly_once_support"]

# py4j says goodbye from a __del__ at interpreter exit, after pytest has closed the stream a stage's
# logging.basicConfig attached: a "--- Logging error ---" traceback under the summary otherwise
logging.getLogger("py4j").setLevel(logging.WARNING)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


# The one Spark Connect server of the test session (what users run is what the tests run). With
# SDA_TEST_CONNECT_PORT set to a port where a server already answers (`SDA_CONNECT_PORT=... sda server
# start`), the suite uses that one and leaves it running: handy while iterating on one test.
# The port is kept in the environment: test modules that import this file (``from tests.conftest import
# CONNECT_PORT``) get a second copy of the module, which must pick the same port.
os.environ.setdefault("SDA_TEST_CONNECT_PORT", str(free_port()))
CONNECT_PORT = int(os.environ["SDA_TEST_CONNECT_PORT"])


# `make test` spreads the test files over several processes (pytest-xdist, --dist loadfile): the first
# to need the server starts it, under a file lock, and the others find it answering. The process
# that runs the session (the xdist controller, or pytest itself without -n) stops it at the end, and
# only if the suite started it.
_STARTED_MARK = Path(tempfile.gettempdir()) / f"sda-test-connect-{CONNECT_PORT}.started"
_IS_WORKER = "PYTEST_XDIST_WORKER" in os.environ


def _server_settings(lakehouse: Path | None = None):
    from sda.config.settings import load_settings

    kwargs = {"lakehouse": lakehouse} if lakehouse is not None else {}
    # 4g: three test workers' flows share this one server (with 2g, three fixtures fitting and moving rows at
    # once ran out of execution memory). Every pipeline setting is the service's default, whatever the sky simulated.
    return load_settings(env={}, connect_port=CONNECT_PORT, shuffle_partitions=2, driver_memory="4g", **kwargs)


def pytest_configure(config):
    if not _IS_WORKER:
        _STARTED_MARK.unlink(missing_ok=True)


# Expensive results several test files share (e.g. the exactly-once reference run), built once per
# session whichever worker asks first: under a file lock, pickled into a directory of this session.
_SHARED = Path(tempfile.gettempdir()) / f"sda-test-shared-{CONNECT_PORT}"


def built_once(name: str, build):
    """``build(directory)``'s result, computed once per test session across pytest-xdist workers:
    the first caller builds it in ``<session dir>/<name>`` (the others wait on the lock), later
    callers load the pickled result. The directory is the session's, removed when it ends."""
    import fcntl
    import pickle
    import shutil

    _SHARED.mkdir(parents=True, exist_ok=True)
    root, done = _SHARED / name, _SHARED / f"{name}.pickle"
    with open(_SHARED / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return pickle.loads(done.read_bytes())
        shutil.rmtree(root, ignore_errors=True)  # a half-built attempt of a worker that failed
        root.mkdir()
        result = build(root)
        done.write_bytes(pickle.dumps(result))
        return result


# A fresh lakehouse's first stage creates its 27 empty tables: some 5 s of Delta commits on the shared server,
# paid by every test lakehouse. The suite creates each table for real once per session (the first time any
# test needs it) and copies that empty table -- its directory: the Delta log of its CREATE -- into every
# later lakehouse: the same schema, partitioning and properties (tests/include/lake covers the CREATE
# statements themselves).
_TEMPLATES = _SHARED / "empty-tables"


@pytest.fixture(scope="session", autouse=True)
def _empty_tables_copied():
    import fcntl
    import hashlib
    import re
    import shutil

    from sda.lake import tables

    create = tables._create_with_retry

    def create_or_copy(spark, statement: str, name: str, attempts: int = 4) -> None:
        at = re.search(r"delta\.`([^`]+)`", statement)
        if at is None:  # not a registered table's statement (tests/include/lake/test_tables.py's own)
            return create(spark, statement, name, attempts)
        target = Path(at.group(1))
        same_sql = hashlib.sha256(statement.replace(str(target), "").encode()).hexdigest()[:16]
        template = _TEMPLATES / f"{name}-{same_sql}"
        _TEMPLATES.mkdir(parents=True, exist_ok=True)
        with open(f"{template}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if template.is_dir() and not target.exists():
                shutil.copytree(template, target)
                return
            create(spark, statement, name, attempts)
            if not template.is_dir():
                shutil.copytree(target, f"{template}.part")
                Path(f"{template}.part").rename(template)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tables, "_create_with_retry", create_or_copy)
        yield


def pytest_sessionfinish(session, exitstatus):
    if _IS_WORKER:
        return
    import shutil

    shutil.rmtree(_SHARED, ignore_errors=True)
    if not _STARTED_MARK.exists():
        return
    from sda.lake import server

    server.stop(_server_settings())
    _STARTED_MARK.unlink(missing_ok=True)


LONGEST_JOB_FILE = "test_fuse_manoeuvres.py"


def pytest_collection_modifyitems(session, config, items):
    """Files with slow tests outside tests/jobs first (the live compose, end-to-end, cluster and
    exactly-once tests), then the job tests (each runs stages on Spark; the fuse, manoeuvre and acquire
    files are marked slow only so that ``make test-fast`` leaves them out), then the rest: spread over
    workers, the long ones start early instead of leaving one worker busy at the end while the others
    idle. This is the order of the last complete fresh-clone ``.ci/run`` measured (1,751 s); an order
    that started the three fuse/acquire job files together with the live tests was measured far slower
    (130 of 964 tests after 57 minutes), the three flows queueing on the one Spark server's two cores.
    Among the job files the longest (:data:`LONGEST_JOB_FILE`, 12 minutes) goes first rather than last in the
    alphabet, so that the job files end within a few minutes of one another."""
    for item in items:  # the pyramid's layers: a test on the Spark server is no unit test (make test-fast)
        if "connect_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    jobs_dir = Path(__file__).parent / "jobs"
    items.sort(key=lambda item: (item.path not in slow_files or jobs_dir in item.path.parents,
                                 jobs_dir not in item.path.parents,
                                 item.path != jobs_dir / LONGEST_JOB_FILE))  # stable: a file's tests stay in order


# SDA_TEST_TIMELINE=<file>: each worker appends one line per test file, "<worker> <start> <end> <seconds>
# <file>" (wall-clock HH:MM:SS), to see where a run's time went and which files overlapped.
_TIMELINE = os.environ.get("SDA_TEST_TIMELINE")
_FILE_STARTED: dict[Path, float] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _TIMELINE:
        import time

        _FILE_STARTED.setdefault(item.path, time.time())
    yield
    if _TIMELINE and (nextitem is None or nextitem.path != item.path):
        import time

        start, end = _FILE_STARTED.pop(item.path), time.time()
        clock = lambda t: time.strftime("%H:%M:%S", time.gmtime(t))  # noqa: E731
        where = item.path.relative_to(PROJECT_ROOT) if item.path.is_relative_to(PROJECT_ROOT) else item.path
        with open(_TIMELINE, "a") as out:
            out.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {clock(start)} {clock(end)} "
                      f"{end - start:6.0f} {where}\n")


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """Start (or reuse) the session's Spark Connect server; its settings (port, jars) are yielded."""
    import fcntl

    from sda.lake import server
    from sda.lake.spark import answers

    settings = _server_settings(tmp_path_factory.mktemp("session-lakehouse"))
    with open(Path(tempfile.gettempdir()) / f"sda-test-connect-{CONNECT_PORT}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not answers(settings.connect_host, settings.connect_port):
            server.start(settings)
            _STARTED_MARK.write_text(str(os.getpid()))
    yield settings


@pytest.fixture(scope="session")
def spark(connect_server):
    from sda.lake.spark import connect

    session = connect(connect_server)
    yield session
    session.stop()


def _make_active(spark, connect_server, monkeypatch) -> None:
    """Make the session's Spark this process's default and active session again: a test that
    connected to a server of its own (and killed it) must not leave code that asks pyspark for "the"
    session -- a UDF's definition, a thread without a session of its own -- talking to that dead server."""
    from sda.lake.spark import activate

    activate(spark)
    monkeypatch.setenv("SPARK_REMOTE", connect_server.connect_url)


@pytest.fixture(autouse=True)
def _shared_spark_is_active(request, monkeypatch):
    """Before each test that uses the session's Spark, make it active again (``_make_active``)."""
    if "spark" not in request.fixturenames:
        return
    _make_active(request.getfixturevalue("spark"), request.getfixturevalue("connect_server"), monkeypatch)


@pytest.fixture(scope="module")
def module_spark(spark, connect_server):
    """The session's Spark, made active for a module-scoped fixture (which runs before the per-test
    ``_shared_spark_is_active``), e.g. one that runs a scenario once for several tests."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _make_active(spark, connect_server, monkeypatch)
        yield spark


def _settings_under(root: Path, **overrides):
    """Settings pointing at empty directories under ``root``; the environment's SDA_* are ignored."""
    from sda.config.settings import load_settings

    defaults = {
        "lakehouse": root / "lakehouse",
        "landing": root / "landing",
        "outbox": root / "outbox",
        "catalog_file": root / "catalog" / "catalog.tle",
        "ephemeris_cache": root / "ephemeris",
        "shuffle_partitions": 2,
        "connect_port": CONNECT_PORT,
    }
    return load_settings(env={}, **{**defaults, **overrides})


@pytest.fixture
def settings(tmp_path):
    """Settings pointing at empty per-test directories; the environment's SDA_* are ignored."""
    return _settings_under(tmp_path)


@pytest.fixture(scope="session")
def make_settings(tmp_path_factory):
    """``make_settings(name, **overrides)``: settings like ``settings``'s, under a fresh directory named
    after ``name``: for a module-scoped fixture that runs a scenario once for several tests."""
    return lambda name, **overrides: _settings_under(tmp_path_factory.mktemp(name), **overrides)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (real reference data); tests that need it skip where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data not found at {SHARED_DATA} (a plain clone has no ../shared/data)")
    return SHARED_DATA
