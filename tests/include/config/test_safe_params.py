"""Safe parameters: paths from settings, command lines and job arguments stay inside their roots,
and values that reach SQL or file names are validated. Each refusal names the option or variable,
the value, and what is allowed. Pure Python: no Spark session is started (jobs get ``spark=object()``
and must refuse before touching it)."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
from pathlib import Path

import pytest

from jobs import catalog as catalog_job
from jobs import ingest
from sda import cli
from sda.config.paths import SYSTEM_DIRS, UnsafePathError, confine
from sda.config.settings import PROJECT_ROOT, SettingsError, load_settings
from sda.pipeline import arguments, runtime
from sda.sim import simulate as sim

# enough '..' to climb from the project (wherever it is checked out) to '/', whose '..' is itself
UP = "../" * (len(PROJECT_ROOT.parts) + 1)
START, END = "2026-11-21T06:00:00Z", "2026-11-21T06:15:00Z"


@pytest.fixture
def roots(tmp_path, monkeypatch):
    """SDA_* pointing at tmp dirs (what the CLI and simulate load), and the same Settings object."""
    dirs = {"lakehouse": tmp_path / "lakehouse", "landing": tmp_path / "landing", "outbox": tmp_path / "outbox",
            "catalog_file": tmp_path / "catalog" / "catalog.tle"}
    for key in [k for k in os.environ if k.startswith("SDA_")]:
        monkeypatch.delenv(key)
    for name, path in dirs.items():
        monkeypatch.setenv("SDA_" + name.upper(), str(path))
    dirs["landing"].mkdir()
    dirs["catalog_file"].parent.mkdir()
    return load_settings()


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if not p.is_dir())


# --- settings --------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "env, expected",
    [
        ({"SDA_LAKEHOUSE": "var/" + UP + "etc"}, ["SDA_LAKEHOUSE=", UP + "etc", "system directory /etc"]),
        ({"SDA_LANDING": "/etc/sda/landing"}, ["SDA_LANDING='/etc/sda/landing'", "system directory /etc"]),
        ({"SDA_OUTBOX": "/usr/share/sda"}, ["SDA_OUTBOX='/usr/share/sda'", "system directory /usr"]),
        ({"SDA_CATALOG_FILE": "/proc/self/environ"}, ["SDA_CATALOG_FILE='/proc/self/environ'", "/proc"]),
        ({"SDA_LAKEHOUSE": "/"}, ["SDA_LAKEHOUSE='/'", "filesystem root"]),
        ({"SDA_LANDING": UP}, ["SDA_LANDING=", "filesystem root"]),
        ({"SDA_LAKEHOUSE": "/tmp/x`; DROP TABLE t; --"}, ["SDA_LAKEHOUSE='/tmp/x`; DROP TABLE t; --'", "'`'", "SQL"]),
        ({"SDA_LAKEHOUSE": "/tmp/o'brien/lake"}, ["SDA_LAKEHOUSE=\"/tmp/o'brien/lake\"", "SQL"]),
        ({"SDA_LAKEHOUSE": '/tmp/a"b'}, ["SDA_LAKEHOUSE='/tmp/a\"b'", "SQL"]),
        ({"SDA_LANDING": "/tmp/a\x00b"}, ["SDA_LANDING='/tmp/a\\x00b'", "NUL byte"]),
        ({"SDA_OUTBOX": "/tmp/out\nrm -rf /"}, ["SDA_OUTBOX='/tmp/out\\nrm -rf /'", "control character"]),
        ({"SDA_JARS_DIR": "/tmp/jars\r"}, ["SDA_JARS_DIR=", "control character"]),
        ({"SDA_CDM_ORIGINATOR": "SDA\n"}, ["SDA_CDM_ORIGINATOR='SDA\\n'", "1-40 letters"]),
    ],
)
def test_unsafe_setting_paths_are_refused(env, expected):
    with pytest.raises(SettingsError) as err:
        load_settings(env=env)
    for part in expected:
        assert part in str(err.value)


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"SDA_LAKEHOUSE": "{t}/data", "SDA_LANDING": "{t}/data/landing", "SDA_OUTBOX": "{t}/outbox"},
         ["SDA_LAKEHOUSE='{t}/data' contains SDA_LANDING='{t}/data/landing'", "separate directories"]),
        ({"SDA_LAKEHOUSE": "{t}/lake", "SDA_LANDING": "{t}/in", "SDA_OUTBOX": "{t}/in"},
         ["SDA_LANDING='{t}/in' is the same directory as SDA_OUTBOX='{t}/in'"]),
        ({"SDA_LAKEHOUSE": "{t}/in/lake", "SDA_LANDING": "{t}/in", "SDA_OUTBOX": "{t}/out"},
         ["SDA_LAKEHOUSE='{t}/in/lake' lies inside SDA_LANDING='{t}/in'"]),
        ({"SDA_LAKEHOUSE": "{t}/lake", "SDA_LANDING": "{t}/in", "SDA_OUTBOX": "{t}/lake/../lake/cdm"},
         ["SDA_LAKEHOUSE='{t}/lake' contains SDA_OUTBOX='{t}/lake/cdm'"]),
        ({"SDA_LAKEHOUSE": "{t}/lake", "SDA_LANDING": "{t}/in", "SDA_OUTBOX": "{t}/out",
          "SDA_EPHEMERIS_CACHE": "{t}/in/ephemeris"},
         ["SDA_LANDING='{t}/in' contains SDA_EPHEMERIS_CACHE='{t}/in/ephemeris'", "the ephemeris cache"]),
    ],
)
def test_overlapping_roots_are_refused(tmp_path, env, expected):
    t = str(tmp_path.resolve())
    with pytest.raises(SettingsError) as err:
        load_settings(env={k: v.format(t=t) for k, v in env.items()})
    for part in expected:
        assert part.format(t=t) in str(err.value)


def test_path_overrides_are_validated_like_variables(tmp_path):
    # tests and benches pass Path objects: they take the same checks as SDA_* values
    with pytest.raises(UnsafePathError, match=r"lakehouse='/tmp/x`y'.*SQL"):
        load_settings(env={}, lakehouse=Path("/tmp/x`y"))
    with pytest.raises(UnsafePathError, match="landing='/etc'.*system directory /etc"):
        load_settings(env={}, landing=Path("/etc"))
    with pytest.raises(SettingsError, match="SDA_LAKEHOUSE=.* contains SDA_LANDING="):
        load_settings(env={}, lakehouse=tmp_path, landing=tmp_path / "landing")


def test_ordinary_settings_are_accepted(tmp_path, monkeypatch):
    defaults = load_settings(env={})
    assert defaults.lakehouse == PROJECT_ROOT / "var" / "lakehouse"
    assert defaults.landing == PROJECT_ROOT / "var" / "landing"
    rel = load_settings(env={"SDA_LANDING": "rel/landing", "SDA_OUTBOX": "~/sda-outbox"})
    assert rel.landing == PROJECT_ROOT / "rel" / "landing" and rel.outbox == Path.home().resolve() / "sda-outbox"
    # the conftest form: tmp dirs as Path overrides
    s = load_settings(env={}, lakehouse=tmp_path / "lakehouse", landing=tmp_path / "landing",
                      outbox=tmp_path / "outbox", catalog_file=tmp_path / "catalog" / "catalog.tle",
                      shuffle_partitions=2)
    assert s.lakehouse == (tmp_path / "lakehouse").resolve() and s.catalog_file.name == "catalog.tle"
    assert load_settings(env=s.as_env()) == s
    # the same through the environment; quotes are fine outside the lakehouse, and so is a space
    env = {"SDA_LAKEHOUSE": f"{tmp_path}/lake house", "SDA_LANDING": f"{tmp_path}/o'brien landing",
           "SDA_OUTBOX": f"{tmp_path}/out", "SDA_CATALOG_FILE": f"{tmp_path}/catalog/catalog.tle"}
    s = load_settings(env=env)
    assert s.landing.name == "o'brien landing"
    # docker-compose's locations and a relative Path override (taken from the current directory)
    assert load_settings(env={"SDA_LAKEHOUSE": "/opt/sda/var/lakehouse"}).lakehouse == Path("/opt/sda/var/lakehouse")
    monkeypatch.chdir(tmp_path)
    assert load_settings(env={}, landing=Path("here")).landing == (tmp_path / "here").resolve()


def test_system_dir_list_is_small_and_documented():
    assert "/etc" in SYSTEM_DIRS and "/usr" in SYSTEM_DIRS and "/tmp" not in SYSTEM_DIRS and "/opt" not in SYSTEM_DIRS


# --- sda.config.paths.confine -----------------------------------------------------------------------------

def test_confine_resolves_and_refuses_what_leaves_the_roots(tmp_path):
    root = tmp_path / "landing"
    (root / "sub").mkdir(parents=True)
    assert confine(root / "sub" / "x.tle", root, "--x") == (root / "sub" / "x.tle").resolve()
    assert confine("sub/../x.tle", [root], "--x", base=root) == (root / "x.tle").resolve()
    assert confine(root, root, "--x") == root.resolve()  # the root itself is inside
    with pytest.raises(UnsafePathError) as err:
        confine(tmp_path / "landing2" / "x", root, "--x")  # a sibling sharing the prefix is outside
    assert "--x" in str(err.value) and "landing2" in str(err.value) and "outside the allowed roots" in str(err.value)
    with pytest.raises(UnsafePathError, match="NUL byte"):
        confine(f"{root}/a\x00b", root, "--x")
    with pytest.raises(UnsafePathError, match="is empty"):
        confine("", root, "--x")
    (root / "loop").symlink_to(root / "loop")
    with pytest.raises(UnsafePathError):
        confine(root / "loop" / "x", root, "--x")


# --- run ids ---------------------------------------------------------------------------------------

def _stage_args(run_id: str) -> argparse.Namespace:
    return argparse.Namespace(start=START, end=END, run_id=run_id)


@pytest.mark.parametrize("run_id", [
    "manual__2026-11-21T10:00:00.123456+00:00",
    "manual__2026-11-21T10:00:00+00:00",
    "scheduled__2026-11-21T06:15:00+00:00",
    "backfill__2026-11-21T06:00:00+00:00",
    "asset_triggered__2026-11-21T06:00:00.000001+00:00",
    "manual__20261121T100000",  # sda stage's own default
    "run-1",
    "x1.v2",
])
def test_airflow_run_ids_are_accepted(run_id):
    assert arguments.validate_args(_stage_args(run_id)).run_id == run_id
    assert arguments.RUN_ID_RE.match(run_id)  # sda.quality.gates checks the same expression


@pytest.mark.parametrize("run_id, message", [
    ("..", "may not start with '.' nor contain '..'"),
    (".", "may not start with '.'"),
    (".hidden", "may not start with '.'"),
    ("a..b", "contain '..'"),
    ("manual__2026..11", "contain '..'"),
    ("../../etc", "letters, digits and _ . : + -"),
    ("x;DROP TABLE", "letters, digits and _ . : + -"),
    ("a/b", "letters, digits and _ . : + -"),
    ("$(rm -rf /)", "letters, digits and _ . : + -"),
    ("", "1-200 characters"),
    ("run\n", "1-200 characters"),
    ("r" * 201, "1-200 characters"),
])
def test_unsafe_run_ids_are_refused(run_id, message, capsys):
    with pytest.raises(arguments.StageArgumentError) as err:
        arguments.validate_args(_stage_args(run_id))
    assert f"--run-id {run_id!r}" in str(err.value) and message in str(err.value)
    assert not arguments.RUN_ID_RE.match(run_id)
    # through a job's command line: exit 2 with the message, before any session (spark is a dummy)
    argv = ["--start", START, "--end", END, "--run-id", run_id]
    with pytest.raises(SystemExit) as stop:
        runtime.run_stage("demo", argv, lambda *a: pytest.fail("body ran"), arguments.stage_parser("demo", "d"),
                          settings=load_settings(env={}), spark=object())
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


# --- jobs/catalog.py --file ----------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["/etc/passwd", "{up}etc/passwd", "{landing}/../outside.tle", "{tmp}/elsewhere/cat.tle",
                                 "{catdir}/link.tle"])
def test_catalog_file_outside_its_roots_is_refused_before_spark(roots, tmp_path, monkeypatch, capsys, bad):
    catdir = roots.catalog_file.parent
    (catdir / "link.tle").symlink_to("/etc/passwd")
    monkeypatch.chdir(catdir)  # a relative --file is taken from the current directory
    value = bad.format(up=UP, landing=roots.landing, tmp=tmp_path, catdir=catdir)
    argv = ["--start", START, "--end", END, "--run-id", "r1", "--file", value]
    with pytest.raises(SystemExit) as stop:
        catalog_job.main(argv, settings=roots, spark=object())  # refusing must not need the session
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"--file {value!r}" in err and "outside the allowed roots" in err
    assert str(catdir) in err and str(roots.landing) in err


def test_catalog_file_inside_its_roots_is_accepted(roots):
    for path in (roots.catalog_file, roots.landing / "catalog" / "celestrak-active.tle"):
        args = argparse.Namespace(file=str(path), celestrak=None)
        catalog_job.check_args(args, roots)
        assert args.file == str(path.resolve())
    (roots.catalog_file.parent / "current.tle").symlink_to(roots.landing / "x.tle")  # a link within the roots
    args = argparse.Namespace(file=str(roots.catalog_file.parent / "current.tle"), celestrak=None)
    catalog_job.check_args(args, roots)
    assert args.file == str((roots.landing / "x.tle").resolve())
    args = argparse.Namespace(file=None, celestrak="active")  # nothing to confine
    catalog_job.check_args(args, roots)
    assert args.file is None


# --- sda.sim.simulate ----------------------------------------------------------------------------------

@pytest.mark.parametrize("option, bad", [
    ("--landing", "{tmp}/elsewhere"),
    ("--landing", "{landing}/../escape"),
    ("--landing", "/etc"),
    ("--catalog-out", "/etc/cron.d/catalog.tle"),
    ("--catalog-out", "{tmp}/elsewhere/catalog.tle"),
    ("--catalog-out", "{catdir}/../../../x.tle"),
])
def test_simulate_refuses_outputs_outside_the_roots_and_writes_nothing(roots, tmp_path, capsys, option, bad):
    value = bad.format(tmp=tmp_path, landing=roots.landing, catdir=roots.catalog_file.parent)
    before = files_under(tmp_path)
    with pytest.raises(SystemExit) as stop:
        sim.main(["--start", START, "--end", END, "--objects", "3", option, value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"{option} {value!r}" in err and "outside the allowed roots" in err
    assert files_under(tmp_path) == before
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "escape").exists()


def test_simulate_accepts_outputs_inside_the_roots(roots):
    cfg = sim.SimConfig(start=dt.datetime(2026, 11, 21, 6, tzinfo=dt.timezone.utc),
                        end=dt.datetime(2026, 11, 21, 6, 15, tzinfo=dt.timezone.utc),
                        landing=roots.landing / "run1", catalog_out=roots.catalog_file.parent / "sim.tle")
    sim.confine_outputs(cfg)
    assert cfg.landing == (roots.landing / "run1").resolve()
    cfg.landing, cfg.catalog_out = roots.landing, roots.landing / "catalog" / "sim.tle"
    sim.confine_outputs(cfg)
    assert cfg.catalog_out == (roots.landing / "catalog" / "sim.tle").resolve()
    # inputs are only read: an unconfined --catalog is fine
    cfg.catalog = Path("/nonexistent-but-readable-elsewhere.tle")
    sim.confine_outputs(cfg)


# --- sda catalog generate|fetch --out ----------------------------------------------------------------

@pytest.mark.parametrize("action", ["generate", "fetch"])
@pytest.mark.parametrize("bad", ["/etc/x", "{catdir}/../../x.tle"])
def test_cli_catalog_out_outside_the_roots_is_refused(roots, tmp_path, capsys, monkeypatch, action, bad):
    from sda.orbit import catalog

    monkeypatch.setattr(catalog, "fetch_celestrak", lambda *a, **k: pytest.fail("fetched before checking --out"))
    value = bad.format(catdir=roots.catalog_file.parent)
    before = files_under(tmp_path)
    assert cli.main(["catalog", action, "--out", value]) == 2
    err = capsys.readouterr().err
    assert f"--out {value!r}" in err and "outside the allowed roots" in err and str(roots.landing) in err
    assert files_under(tmp_path) == before and not Path("/etc/x").exists()


def test_cli_catalog_generate_writes_inside_the_roots(roots, capsys):
    out = roots.catalog_file.parent / "gen.tle"
    argv = ["catalog", "generate", "--objects", "3", "--epoch", "2026-11-21T00:00:00Z", "--out", str(out)]
    assert cli.main(argv) == 0
    assert sum(line.startswith("1 ") for line in out.read_text().splitlines()) == 3
    assert "wrote 3 objects" in capsys.readouterr().out


# --- jobs/ingest.py: a landed symlink leading out of the landing zone --------------------------------

def test_ingest_skips_a_landed_symlink_that_leads_outside(tmp_path, caplog):
    landing = tmp_path / "landing"
    (landing / "radar").mkdir(parents=True)
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"not": "sensor data"}\n')
    (landing / "radar" / "EGLIN_20261121T060000Z_0.jsonl").write_text('{"a": 1}\n')
    (landing / "radar" / "LEAK_20261121T060000Z_0.jsonl").symlink_to(secret)
    (landing / "radar" / "ALIAS_20261121T060000Z_0.jsonl").symlink_to(
        landing / "radar" / "EGLIN_20261121T060000Z_0.jsonl")
    end = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1)
    with caplog.at_level(logging.WARNING, logger="sda.ingest"):
        found = ingest.discover(landing, end)
    assert [rel for rel, _, _ in found] == ["radar/ALIAS_20261121T060000Z_0.jsonl",
                                            "radar/EGLIN_20261121T060000Z_0.jsonl"]
    assert "radar/LEAK_20261121T060000Z_0.jsonl" in caplog.text and "outside the landing zone" in caplog.text
    # reading by ledger path refuses it too (a file swapped for such a link after planning)
    assert ingest.load_file(landing, "radar/LEAK_20261121T060000Z_0.jsonl", "radar") is None
    assert ingest.load_file(landing, "radar/EGLIN_20261121T060000Z_0.jsonl", "radar").data == b'{"a": 1}\n'
