"""The operator every pipeline task uses: ``spark-submit jobs/<stage>.py`` with the ``sda`` package shipped.

:class:`SdaSparkSubmitOperator` is the Spark provider's ``SparkSubmitOperator`` plus one step at
execution time: it builds (or reuses) the content-addressed zip of ``include/sda``
(:func:`sda.dist.package_zip`) and passes it as ``--py-files``, so executors on a cluster import
exactly the code the driver runs, whatever is installed on the worker machines. Building it in
``execute`` rather than at DAG-parse time keeps parsing free of file writes, and a DAG run picks up
the code as it is when each task starts. Everything else (connection, jars, conf, environment) is
the shared configuration of :func:`sda.airflow_support.submit_kwargs`.

A task made with ``skip_in_replay=True`` (the catalogue and ingest stages, the quality gates) is
skipped when its rendered arguments say ``--mode replay``: a backfill recomputes from bronze, so it
has no new files to land and no rows of its own to validate, and four Spark start-ups are saved.
Its downstream tasks use the ``none_failed`` trigger rule, so a skip does not cascade.

:class:`QualityGateOperator` is the same task with a **Run report** extra link: the worker pushes
the link (an XCom) when the task ends, failed or not, and the Airflow UI shows it on the task
instance; it points at the run's page (:mod:`sda.report`) served by ``plugins/sda_reports.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperatorLink
from airflow.sdk.exceptions import AirflowSkipException

from sda import dist

REPORTS_PREFIX = "/sda-reports"  # where plugins/sda_reports.py mounts the reports app


def api_base_url() -> str:
    """The API server's public URL (``[api] base_url``), without a trailing slash."""
    base = os.environ.get("AIRFLOW__API__BASE_URL")
    if not base:
        try:
            from airflow.configuration import conf

            base = conf.get("api", "base_url", fallback=None)
        except Exception:  # noqa: BLE001 - a worker without airflow-core configuration
            base = None
    return (base or "http://localhost:8080").rstrip("/")


def run_report_url(run_id: str) -> str:
    return f"{api_base_url()}{REPORTS_PREFIX}/runs/{quote(run_id, safe='')}/index.html"


class RunReportLink(BaseOperatorLink):
    """The run's report page (counts per stage, quality checks with their Data Docs, alert plots)."""

    name = "Run report"

    def get_link(self, operator, *, ti_key) -> str:
        return run_report_url(ti_key.run_id)


class SdaSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` that ships the ``sda`` package zip with ``--py-files``.

    :param dist_dir: where the zip is written (default: ``dist`` beside the jar cache, under ``var/``)
    """

    def __init__(self, *, dist_dir: str | Path, skip_in_replay: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dist_dir = str(dist_dir)
        self.skip_in_replay = skip_in_replay

    def execute(self, context: Any) -> None:
        args = [str(a) for a in (self.application_args or [])]
        if self.skip_in_replay and "--mode" in args and args[args.index("--mode") + 1:][:1] == ["replay"]:
            raise AirflowSkipException(f"{self.task_id}: nothing to do in a replay (a backfill recomputes from bronze)")
        shipped = str(dist.package_zip(Path(self.dist_dir)))
        others = [p for p in (self.py_files or "").split(",") if p]
        self.py_files = ",".join([shipped, *others])
        self.log.info("shipping the sda package to the executors: --py-files %s", self.py_files)
        return super().execute(context)


class QualityGateOperator(SdaSparkSubmitOperator):
    """``jobs/quality.py`` as a gate, with the **Run report** extra link."""

    operator_extra_links = (RunReportLink(),)
