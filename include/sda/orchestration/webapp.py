"""The reports web app: run pages (:mod:`sda.quality.report`) and Great Expectations Data Docs, served by
Airflow's API server under ``/sda-reports`` (``plugins/sda_reports.py``) behind Airflow's login.

    /sda-reports/                         -> runs/index.html (every run with a report, newest first)
    /sda-reports/runs/<run_id>/index.html -> a run's page
    /sda-reports/gx/uncommitted/data_docs/local_site/...  -> the Data Docs it links to

Files are served read-only from ``<lakehouse parent>/reports``; a path that resolves outside it is a
404, whatever its dots and links. Every request must carry an Airflow login -- the UI's session
cookie, or ``Authorization: Bearer <token>`` from ``POST /auth/token`` -- because the pages show
catalogue and alert data (FastAPI apps of plugins are not protected by Airflow on their own).

:func:`create_metrics_app`, under ``/sda-metrics``, serves the pipeline's KPIs for Prometheus:

    /sda-metrics/metrics                  -> every stage's textfile (sda.pipeline.exposition), one exposition

behind the same login: a scrape sends ``Authorization: Bearer <token>`` (docs/operating.md, "Metrics").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, PlainTextResponse, RedirectResponse


def airflow_login() -> Callable[..., Any]:
    """Airflow's own check that the request carries a valid login (cookie or bearer token)."""
    from airflow.api_fastapi.core_api.security import requires_authenticated

    return requires_authenticated()


def default_root() -> Path:
    from sda.config.settings import load_settings
    from sda.quality.report import reports_root

    return reports_root(load_settings())


def create_app(root: Callable[[], Path] = default_root, login: Callable[..., Any] | None = None) -> FastAPI:
    """``root`` gives the reports directory (read per request, so the app follows the settings);
    ``login`` is the FastAPI dependency that admits a request (default: Airflow's)."""
    app = FastAPI(title="sda-fusion run reports", docs_url=None, redoc_url=None, openapi_url=None)
    guard = [Depends(login if login is not None else airflow_login())]

    @app.get("/", dependencies=guard, include_in_schema=False)
    def index() -> RedirectResponse:
        return RedirectResponse("runs/index.html")

    @app.get("/{path:path}", dependencies=guard, include_in_schema=False)
    def serve(path: str) -> FileResponse:
        base = root().resolve()
        target = (base / path).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_relative_to(base) or not target.is_file():
            raise HTTPException(status_code=404, detail=f"no report at {path!r}")
        return FileResponse(target)

    return app


def default_metrics_root() -> Path:
    from sda.config.settings import load_settings
    from sda.pipeline.exposition import metrics_root

    return metrics_root(load_settings())


def create_metrics_app(root: Callable[[], Path] = default_metrics_root,
                       login: Callable[..., Any] | None = None) -> FastAPI:
    """``GET /metrics``: the stages' textfiles under ``root()`` as one Prometheus exposition (empty before
    the first stage run); ``login`` as for :func:`create_app`."""
    from sda.pipeline.exposition import EXPOSITION_TYPE, exposition

    app = FastAPI(title="sda-fusion metrics", docs_url=None, redoc_url=None, openapi_url=None)
    guard = [Depends(login if login is not None else airflow_login())]

    @app.get("/metrics", dependencies=guard, include_in_schema=False)
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(exposition(root()), media_type=EXPOSITION_TYPE)

    return app
