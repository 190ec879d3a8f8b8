"""sda.pipeline.logcontext: the run id, stage and batch on every log line of a stage run, in the JSON lines a
stage run by hand writes and in structlog's context, which Airflow's task log merges into its JSON lines."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from sda.config.settings import SettingsError
from sda.pipeline import logcontext


def test_a_feed_batch_names_each_inputs_new_versions():
    assert logcontext.feed_batch({"observations": 13, "catalog": 4}, {"observations": 15, "catalog": 4}) == \
        "catalog@up-to-date,observations@14..15"
    assert logcontext.feed_batch({"observations": 13}, None) == "observations@up-to-date"
    assert logcontext.feed_batch({}, {}) == "from-start"


def _json_lines(logger_name: str):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(logcontext.ContextFilter())
    handler.setFormatter(logcontext.JsonFormatter())
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, stream


def test_lines_inside_a_run_carry_its_fields_and_lines_after_it_do_not():
    logger, stream = _json_lines("sda-test-logcontext")
    with logcontext.bound("manual__2026-11-21", "ingest", "from-start"):
        logger.info("planned %d files", 3)
        logcontext.set_batch("landing#7")
        logger.warning("appended")
    logger.info("after")
    first, second, after = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["event"] == "planned 3 files" and first["level"] == "info" and first["logger"] == "sda-test-logcontext"
    assert (first["run_id"], first["stage"], first["batch"]) == ("manual__2026-11-21", "ingest", "from-start")
    assert second["batch"] == "landing#7" and second["level"] == "warning"
    assert not {"run_id", "stage", "batch"} & after.keys()
    assert first["timestamp"].endswith("+00:00")


def test_the_fields_are_in_structlogs_context_for_airflows_task_log_and_put_back_after():
    with logcontext.bound("outer", "correlate", "observations@2..3"):
        with logcontext.bound("inner", "fuse", "correlated@5..5"):
            assert structlog.contextvars.get_contextvars() == {
                "run_id": "inner", "stage": "fuse", "batch": "correlated@5..5"}
        assert structlog.contextvars.get_contextvars()["stage"] == "correlate"
        assert logcontext.current()["run_id"] == "outer"
    assert not {"run_id", "stage", "batch"} & structlog.contextvars.get_contextvars().keys()
    assert logcontext.current() == {}


def test_an_exception_is_kept_in_its_line():
    logger, stream = _json_lines("sda-test-logcontext-exc")
    try:
        raise ValueError("bad frame")
    except ValueError:
        logger.exception("refused")
    line = json.loads(stream.getvalue())
    assert line["event"] == "refused" and "ValueError: bad frame" in line["exception"]


def test_a_log_format_other_than_text_or_json_is_refused():
    with pytest.raises(SettingsError, match="SDA_LOG_FORMAT='xml': expected 'text' or 'json'"):
        logcontext.configure({"SDA_LOG_FORMAT": "xml"})
