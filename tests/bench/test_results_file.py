"""bench/common.py's results file: it records the command line that made it (shell-quoted, the script named from
the project root) and, for a seeded result, the seed's role in bench/seeds.py."""

from __future__ import annotations

import json
import sys

import common


def test_the_results_file_records_its_command_and_its_seeds_role(tmp_path, monkeypatch, capsys):
    script = common.PROJECT_ROOT / "bench" / "correlation.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--tracking", "--seed", "21", "--out", "a b.json"])
    out = tmp_path / "r.json"
    common.write_result(out, {"seed": 21, "right_pct": 99.1}, {"right_pct": 99.1})
    written = json.loads(out.read_text())
    assert written == {"command": "bench/correlation.py --tracking --seed 21 --out 'a b.json'", "seed": 21,
                       "right_pct": 99.1, "seed_role": "development"}
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"right_pct": 99.1}  # the final line: the summary


def test_a_result_that_names_its_command_keeps_it_and_an_unseeded_one_gets_no_role(tmp_path):
    out = tmp_path / "r.json"
    common.write_result(out, {"command": "bench/stage_costs.py --files 5", "wall_s": 1.0})
    assert json.loads(out.read_text()) == {"command": "bench/stage_costs.py --files 5", "wall_s": 1.0}
    common.write_result(out, {"seed": 6305})
    assert json.loads(out.read_text())["seed_role"] == "held out"
    assert common.command_line(["/elsewhere/tool.py", "-x"]) == "/elsewhere/tool.py -x"
