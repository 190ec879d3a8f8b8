"""The README and docs/ stay true: their generated sections (the README's topology diagram,
docs/configuration.md's settings table) match the code, and the commands and paths they name exist.
``python tests/test_readme.py --write`` regenerates the generated sections."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
README = PROJECT_ROOT / "README.md"
CONFIGURATION = PROJECT_ROOT / "docs" / "configuration.md"
DOCS = sorted((PROJECT_ROOT / "docs").glob("*.md"))

SETTING_DOCS = {
    "lakehouse": "root of the Delta tables (`<layer>/<table>`)",
    "landing": "where sensor and space-weather files arrive (`radar/`, `optical/`, `isl/`, `tdm/`, `space_weather/`)",
    "outbox": "alert CDMs and manoeuvre OPMs (CCSDS KVN) and their JSON twins written by `conjunction`",
    "jars_dir": "Delta jars cached by `make setup`",
    "catalog_file": "the TLE/OMM catalogue the `catalog` task loads",
    "ephemeris_cache": "SGP4 states of the catalogue on the incremental screening's focus grid, on the Spark "
                       "executors' disk (a cache: removing it costs one slower screening, never a result)",
    "spark_master": "master of the Spark Connect server every stage runs on (`local[N]`, `spark://host:port`, ...)",
    "shuffle_partitions": "`spark.sql.shuffle.partitions` (each client session sets it)",
    "driver_memory": "the Spark Connect server's driver memory (with `local[N]`, all of Spark's)",
    "connect_host": "where clients (Airflow tasks, `sda stage`) reach the Spark Connect server",
    "connect_port": "the Spark Connect server's port",
    "connect_bind": "the address the Spark Connect server listens on (`127.0.0.1`: this machine only)",
    "connect_tls_ca": "the CA that signed the Spark Connect TLS proxy's certificate: clients then speak TLS to the "
                      "server, trusting that CA alone (unset: plaintext; docker-compose.yaml sets it)",
    "connect_token_file": "the file of the Spark Connect server's pre-shared token: the server requires it, clients "
                          "send it (unset: none; docker-compose.yaml sets it)",
    "bind_host": "the address the local Airflow (`make run`: API server and UI, task-log servers) listens on "
                 "(`127.0.0.1`: this machine only; `0.0.0.0` offers them to the network)",
    "cadence_minutes": "minutes between DAG runs (and the length of each run's data interval)",
    "replay_max_hours": "the longest event-time range one replay (`sda replay`, `sda_replay`) may recompute",
    "dedup_window_s": "event-time window in which repeats of one sensor's observation are folded",
    "allowed_lateness_s": "a sensor's watermark is the newest event time it delivered minus this; "
                          "a window is final once the watermark passes its end",
    "idle_source_s": "a sensor whose newest event time is this far behind the newest sensor's "
                     "no longer holds cross-sensor windows open",
    "pass_gap_s": "a sensor's pass over an object (session window) ends after this gap without an observation",
    "state_window_s": "width of the fixed event-time windows of gold.object_state "
                      "(a whole multiple of the dedup window)",
    "clock_skew_s": "how far in the future of the interval an event time may be",
    "ingest_batch_mb": "`ingest` appends new files in ledger batches of at most this many MB (bounds the task's memory "
                       "whatever the backlog)",
    "correlation_gate_km": "largest miss between an observation and a prediction that still correlates",
    "light_time": "`True`: the sensors' radar ranges and angles and optical angles carry light time, as real "
                  "sensors and every simulated sky report them; `False`: geometric (only to measure what light time "
                  "is worth)",
    "screening_horizon_h": "how far ahead conjunctions are screened",
    "fusion_arc_h": "event-time arc of one orbit-determination fit (an object's fused orbit per arc window)",
    "sensor_bias_consider": "the sensors' remaining biases carried in each fused covariance as consider parameters "
                            "of this many times their nominal sigmas; `0`: the noise alone",
    "fusion_renew_m": "a fused object's screening element set is renewed when it strays this far from the new fit",
    "fusion_max_age_h": "a fused orbit whose epoch is this far before the screening's start is not used (the "
                        "catalogue's element set is, as for an object never fused)",
    "fusion_min_span_s": "a fused orbit fitted over a shorter arc (epoch - first observation) is not used unless "
                         "re-fitted after a manoeuvre; the fuse stage fits no screening element set to it",
    "acquire_lookback_h": "event time the new-object search looks back from the newest held observation",
    "acquire_retire_h": "a provisional object nothing has seen for this long (event time) is retired",
    "acquire_merge_km": "a provisional object another object's element set follows this closely over an orbit is "
                        "merged into it",
    "screening_step_s": "propagation step of the screening",
    "correlation_prediction_sigma_m": "unset: the correlation gate takes each candidate's predicted covariance "
                                      "from the uncertainty model (orbit regime, element-set age); "
                                      "a number: a fixed isotropic 1-sigma per-axis position uncertainty (m) instead",
    "alert_tca_tolerance_s": "an event updates an open alert of the same pair whose TCA is within this many seconds",
    "cdm_originator": "ORIGINATOR and MESSAGE_ID prefix of the CDMs and OPMs in the outbox",
    "uncertainty_min_sigma_m": "floor of each axis of an observed object's position sigma (covariance model)",
    "screening_threshold_km": "close approaches under this distance are kept",
    "alert_distance_km": "close approaches under this distance raise an alert",
    "pc_red": "collision probability of a red alert",
    "pc_yellow": "collision probability of a yellow alert",
    "alert_miss_probability": "probability that the miss is under the alert distance (pair covariance) "
                              "of a yellow alert",
    "hard_body_radius_m": "combined hard-body radius used for the collision probability",
    "vacuum_retention_h": "VACUUM keeps unreferenced files at least this long "
                          "(longer when a change-feed consumer lags)",
    "landing_retention_h": "landed files the ingest ledger holds as done are deleted this long after they "
                           "landed (bronze keeps every record; 0 keeps them)",
    "outbox_retention_h": "CDMs and their JSON twins are deleted from the outbox this long after they were "
                          "written (0 keeps them)",
    "log_retention_h": "Airflow task logs are deleted this long after their last write (0 keeps them)",
    "sim_objects": "objects in the catalogue the simulator generates "
                   "(`make run`, `sda simulate`, `sda catalog generate`; at most 29900)",
}


def _default(value) -> str:
    if isinstance(value, Path):
        try:
            return str(value.relative_to(PROJECT_ROOT))
        except ValueError:
            return str(value)
    return str(value)


def settings_table() -> str:
    from sda.config.settings import ENV_PREFIX, Settings

    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for field in dataclasses.fields(Settings):
        default = _default(field.default)
        rows.append(f"| `{ENV_PREFIX}{field.name.upper()}` | `{default}` | {SETTING_DOCS[field.name]} |")
    return "\n".join(rows) + "\n"


def topology_block() -> str:
    from sda.pipeline.topology import mermaid

    return "```mermaid\n" + mermaid() + "```\n"


SECTIONS = {README: {"topology": topology_block}, CONFIGURATION: {"settings": settings_table}}


def _section(text: str, name: str) -> str:
    match = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert match, f"no generated section {name!r}"
    return match.group(1)


def regenerate() -> None:
    for path, sections in SECTIONS.items():
        text = path.read_text()
        for name, render in sections.items():
            text = re.sub(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)",
                          lambda m: m.group(1) + render() + m.group(2), text, flags=re.S)
        path.write_text(text)


def test_topology_diagram_is_current():
    assert _section(README.read_text(), "topology") == topology_block(), "run: python tests/test_readme.py --write"


def test_settings_table_is_current():
    assert _section(CONFIGURATION.read_text(), "settings") == settings_table(), \
        "run: python tests/test_readme.py --write"


def test_settings_table_lists_the_defaults():
    """A few rows written out by hand: the table shows each variable with its default."""
    table = _section(CONFIGURATION.read_text(), "settings")
    for row in ("| `SDA_BIND_HOST` | `127.0.0.1` |", "| `SDA_CONNECT_PORT` | `15002` |",
                "| `SDA_LAKEHOUSE` | `var/lakehouse` |", "| `SDA_PC_RED` | `0.0001` |"):
        assert row in table, row


def test_readme_is_short():
    assert len(README.read_text().splitlines()) <= 250


def test_every_setting_is_documented():
    from sda.config.settings import Settings

    assert {f.name for f in dataclasses.fields(Settings)} == set(SETTING_DOCS)


def test_make_targets_exist():
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    assert {"run", "test"} <= set(re.findall(r"\bmake ([a-z][a-z-]*)", README.read_text()))
    for path in [README, *DOCS]:
        used = set(re.findall(r"`make ([a-z][a-z-]*)", path.read_text()))
        assert used <= targets, (path.name, used - targets)


def test_folder_map_paths_exist():
    text = README.read_text()
    block = text.split("## Folder map", 1)[1].split("\n## ", 1)[0]
    for path in re.findall(r"^`?([\w./-]+/?)`?\s", block, re.M):
        if path.startswith(("var/", "bench/results")):
            continue
        assert (PROJECT_ROOT / path).exists(), path


def test_folder_map_lists_the_stages_of_the_topology():
    """The folder map's ``jobs/`` entry names every stage, in DAG order, and nothing else before the ';'."""
    from sda.pipeline.topology import stage_names

    block = README.read_text().split("## Folder map", 1)[1].split("\n## ", 1)[0]
    entry = re.search(r"^jobs/\s+(.*?)(?=^\S)", block, re.M | re.S)
    assert entry, "the folder map has no jobs/ entry"
    listed = re.search(r"job per stage:\s*([^;]*);", " ".join(entry.group(1).split()))
    assert listed, entry.group(1)
    assert tuple(name.strip() for name in listed.group(1).split(",")) == stage_names()
    jobs = {path.stem for path in (PROJECT_ROOT / "jobs").glob("*.py") if not path.stem.startswith("_")}
    assert set(stage_names()) <= jobs


def test_referenced_files_exist():
    for doc in [README, *DOCS]:
        text = doc.read_text()
        for path in re.findall(r"\b((?:scripts|jobs|dags|include/sda|tests|bench)/[\w./-]+\.(?:py|sh))\b", text):
            assert (PROJECT_ROOT / path).is_file(), (doc.name, path)


def test_topology_command_runs():
    out = subprocess.run([sys.executable, "-m", "sda.pipeline.topology", "--mermaid"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() + "\n" == topology_block().removeprefix("```mermaid\n").removesuffix("```\n")


def test_run_script_is_valid_bash():
    for script in ("scripts/run.sh", "scripts/airflow_env.sh"):
        subprocess.run(["bash", "-n", str(PROJECT_ROOT / script)], check=True)


if __name__ == "__main__":  # python tests/test_readme.py --write
    if "--write" in sys.argv[1:]:
        regenerate()
        print(f"regenerated {README}")
