"""Correlation fields on every log line of a stage run: ``run_id``, ``stage`` and ``batch``.

A stage run binds them for as long as it runs (:func:`bound`, from :func:`sda.pipeline.runtime.run_stage`):

* under Airflow, in structlog's context variables, which Airflow 3's task logging merges into each JSON line
  of the task log (``structlog.contextvars.merge_contextvars`` is one of its processors): the stage's own lines,
  Airflow's and the Spark client's carry them as fields of their own;
* for a stage run by hand (``jobs/<stage>.py``, ``sda run``), :class:`JsonFormatter` writes the same fields into
  JSON lines when ``SDA_LOG_FORMAT=json`` (the default is Python's text lines).

``batch`` names the input the run works on: the change-feed versions it reads (``observations@14..15``,
comma-separated per input table, ``observations@up-to-date`` when nothing is new), ``from-start`` before a stage
has consumed anything, ``replay <start>..<end>`` for a replay; ingest names the landing zone (``landing``) and then
its landing batch (``landing#7``, the ``batch_id`` of ``ops.ingested_files``) once it has planned one
(:func:`set_batch`).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import json
import logging
import os
from collections.abc import Iterator
from typing import Any

from sda.config.settings import SettingsError

FIELDS = ("run_id", "stage", "batch")
_CONTEXT: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("sda_log_context", default={})

try:  # Airflow's logging is structlog's; without Airflow installed there is nothing to bind there
    import structlog.contextvars as _structlog_context
except ImportError:  # pragma: no cover - Airflow (and so structlog) is in every environment the stages run in
    _structlog_context = None


def current() -> dict[str, str]:
    """The fields bound now (empty outside a stage run)."""
    return dict(_CONTEXT.get())


def _bind(fields: dict[str, str]) -> None:
    _CONTEXT.set(fields)
    if _structlog_context is not None:
        _structlog_context.bind_contextvars(**fields)


@contextlib.contextmanager
def bound(run_id: str, stage: str, batch: str) -> Iterator[None]:
    """``run_id``, ``stage`` and ``batch`` on every log line for the block, then what was bound before."""
    before = _CONTEXT.get()
    _bind({**before, "run_id": run_id, "stage": stage, "batch": batch})
    try:
        yield
    finally:
        _CONTEXT.set(before)
        if _structlog_context is not None:
            _structlog_context.unbind_contextvars(*FIELDS)
            if before:
                _structlog_context.bind_contextvars(**before)


def set_batch(batch: str) -> None:
    """Name the batch of the run bound now, once the stage knows it (ingest, after planning its files)."""
    if _CONTEXT.get():
        _bind({**_CONTEXT.get(), "batch": batch})


def feed_batch(before: dict[str, int], latest: dict[str, int] | None) -> str:
    """The batch of a change-feed run: per input table, the versions after the consumed one up to the newest."""
    if not before:
        return "from-start"
    parts = []
    for table, version in sorted(before.items()):
        newest = (latest or {}).get(table, version)
        parts.append(f"{table}@{version + 1}..{newest}" if newest > version else f"{table}@up-to-date")
    return ",".join(parts)


class ContextFilter(logging.Filter):
    """Puts the bound fields on each record (``record.run_id`` ...), for a handler's formatter."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _CONTEXT.get().items():
            setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``timestamp`` (UTC, ISO 8601), ``level``, ``logger``, ``event`` (the message),
    the bound correlation fields, and ``exception`` when the record carries one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "timestamp": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(), "logger": record.name, "event": record.getMessage(),
        }
        line.update({k: getattr(record, k) for k in FIELDS if getattr(record, k, None) is not None})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(env: dict[str, str] | None = None) -> None:
    """The stage's logging when nothing has configured it yet (a stage run by hand): text lines, or JSON lines
    with the correlation fields when ``SDA_LOG_FORMAT=json``. Under Airflow the root logger has its handlers
    already and is left alone."""
    env = os.environ if env is None else env
    fmt = env.get("SDA_LOG_FORMAT", "text").strip().lower()
    if fmt not in ("text", "json"):
        raise SettingsError(f"SDA_LOG_FORMAT={fmt!r}: expected 'text' or 'json'")
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
