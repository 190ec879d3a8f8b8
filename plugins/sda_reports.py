"""Airflow plugin: the run reports and Data Docs in Airflow's own web server, behind its login.

- ``fastapi_apps``: :func:`sda.orchestration.webapp.create_app` mounted at ``/sda-reports`` on the API server,
  and :func:`sda.orchestration.webapp.create_metrics_app` (the pipeline's KPIs for Prometheus) at ``/sda-metrics``;
- ``external_views``: a **Run reports** entry in the UI's navigation.

The pipeline's quality tasks link each run to its page (the **Run report** extra link,
:class:`sda.orchestration.operators.RunReportLink`). ``AIRFLOW__CORE__PLUGINS_FOLDER`` points here
(scripts/airflow_env.sh, docker-compose.yaml).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from sda.orchestration.operators import REPORTS_PREFIX
from sda.orchestration.webapp import create_app, create_metrics_app

METRICS_PREFIX = "/sda-metrics"


class SdaReportsPlugin(AirflowPlugin):
    name = "sda_reports"
    fastapi_apps = [{"app": create_app(), "url_prefix": REPORTS_PREFIX, "name": "sda-fusion run reports"},
                    {"app": create_metrics_app(), "url_prefix": METRICS_PREFIX, "name": "sda-fusion metrics"}]
    external_views = [{"name": "Run reports", "href": REPORTS_PREFIX.lstrip("/") + "/runs/index.html",
                       "destination": "nav", "url_route": "sda_reports"}]
