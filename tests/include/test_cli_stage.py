"""`sda stage`: job options are passed through whatever their position, and the command refuses
what no job takes."""

from __future__ import annotations

import pytest

from sda import cli


@pytest.fixture
def submitted(monkeypatch):
    calls = []
    monkeypatch.setattr(cli.subprocess, "call", lambda cmd, env=None: calls.append(cmd) or 0)
    return calls


@pytest.mark.parametrize("argv", [
    ["stage", "catalog", "--start", "2026-11-21T06:00:00Z", "--end", "2026-11-21T06:15:00Z", "--file", "my.tle"],
    ["stage", "--start", "2026-11-21T06:00:00Z", "--end", "2026-11-21T06:15:00Z", "catalog", "--file", "my.tle"],
])
def test_stage_passes_job_options_in_either_order(submitted, argv):
    assert cli.main(argv) == 0
    [cmd] = submitted
    job = cmd.index(next(c for c in cmd if c.endswith("jobs/catalog.py")))
    assert cmd[job + 1:job + 5] == ["--start", "2026-11-21T06:00:00Z", "--end", "2026-11-21T06:15:00Z"]
    assert cmd[-2:] == ["--file", "my.tle"]


def test_other_commands_refuse_unknown_arguments(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["tables", "--bogus"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
