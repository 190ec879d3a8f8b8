"""The operator every pipeline task uses: a stage as a Spark Connect client, in the task itself.

:class:`SdaStageOperator` resolves the ``spark_connect`` connection with the Spark provider's
``SparkConnectHook`` (``AIRFLOW_CONN_SPARK_CONNECT``, ``sc://host:port``), opens a session on that
long-lived server (:func:`sda.lake.spark.connect`) and calls the job's ``main(argv, spark=session)`` from
``jobs/<stage>.py``. The task pays a Python import and a gRPC handshake, not a JVM start and Delta's
warm-up. When the server's master is a cluster (``spark://``, YARN, Kubernetes), the content-named
zip of ``include/sda`` (:func:`sda.lake.dist.package_zip`) is added to the session as a Python artifact,
so the cluster's Python workers import exactly the code the task runs.

Exit codes of a job keep their meaning: 2 (bad arguments) and 3 (a failed quality gate) fail the
task without retries, since running it again changes nothing; a server that does not answer, or
stops answering, fails the task with an error naming its address, and Airflow's retries take over
once it is back (every sink is idempotent).

A task made with ``skip_in_replay=True`` (the catalogue and ingest stages, the quality gates) is
skipped when its rendered arguments say ``--mode replay``: a backfill recomputes from bronze, so it
has no new files to land and no rows of its own to validate. Its downstream tasks use the
``none_failed`` trigger rule, so a skip does not cascade.

:class:`QualityGateOperator` is the same task with a **Run report** extra link, pointing at the
run's page (:mod:`sda.quality.report`) served by ``plugins/sda_reports.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseOperator, BaseOperatorLink
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from sda.orchestration.airflow_support import SPARK_CONNECT_CONN_ID

REPORTS_PREFIX = "/sda-reports"  # where plugins/sda_reports.py mounts the reports app
NO_RETRY_EXITS = {2: "bad arguments", 3: "a fail-severity data-quality check failed"}


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


def load_job(path: Path):
    """The job module at ``path`` (``jobs/<stage>.py``), imported under a private name."""
    name = f"sda_job_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AirflowFailException(f"cannot import the job {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def connect_url(conn_id: str) -> str:
    """The ``sc://`` URL of the connection (the Spark provider's ``SparkConnectHook``)."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    return SparkConnectHook(conn_id).get_connection_url()


class SdaStageOperator(BaseOperator):
    """Run ``job`` (``jobs/<stage>.py``, relative to the project) with ``application_args`` as a
    Spark Connect client of the server behind ``conn_id``.

    :param dist_dir: where the ``sda`` zip for a cluster's Python workers is written (under ``var/``)
    """

    template_fields: Sequence[str] = ("application_args",)
    ui_color = "#e8f4ff"

    def __init__(self, *, job: str, application_args: Sequence[str] = (), conn_id: str = SPARK_CONNECT_CONN_ID,
                 dist_dir: str | Path | None = None, skip_in_replay: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job = job
        self.application_args = list(application_args)
        self.conn_id = conn_id
        self.dist_dir = str(dist_dir) if dist_dir else None
        self.skip_in_replay = skip_in_replay

    def execute(self, context: Any) -> dict[str, Any] | None:
        from sda.config.settings import PROJECT_ROOT, load_settings
        from sda.lake.spark import SparkServerUnavailable, connect

        args = [str(a) for a in self.application_args]
        if self.skip_in_replay and "--mode" in args and args[args.index("--mode") + 1:][:1] == ["replay"]:
            raise AirflowSkipException(f"{self.task_id}: nothing to do in a replay (a backfill recomputes from bronze)")
        settings = load_settings()
        url = connect_url(self.conn_id)
        self.log.info("%s: %s %s on the Spark Connect server %s", self.task_id, self.job, " ".join(args), url)
        try:
            spark = connect(settings, url)
        except SparkServerUnavailable as exc:
            raise AirflowException(str(exc)) from None
        self._ship_package(spark, settings)
        job = load_job(PROJECT_ROOT / self.job)
        try:
            metrics = job.main(args, spark=spark)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
            if code == 0:
                return None
            if code in NO_RETRY_EXITS:
                raise AirflowFailException(f"{self.job} exited with status {code}: {NO_RETRY_EXITS[code]}") from None
            raise AirflowException(f"{self.job} exited with status {code}") from None
        except SparkServerUnavailable as exc:
            raise AirflowException(str(exc)) from None
        return json.loads(json.dumps(metrics, default=str)) if isinstance(metrics, dict) else None

    def _ship_package(self, spark, settings) -> None:
        if settings.spark_master.startswith("local") or not self.dist_dir:
            return  # the server's Python workers import the installed package
        from sda.lake import dist

        shipped = dist.package_zip(Path(self.dist_dir))
        self.log.info("shipping the sda package to the cluster's Python workers: %s", shipped)
        spark.addArtifacts(str(shipped), pyfile=True)


class QualityGateOperator(SdaStageOperator):
    """``jobs/quality.py`` as a gate, with the **Run report** extra link."""

    operator_extra_links = (RunReportLink(),)
