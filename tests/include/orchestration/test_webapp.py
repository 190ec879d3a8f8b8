"""sda.orchestration.webapp: serves the reports directory read-only, nothing outside it, only to a logged-in caller."""

from __future__ import annotations

import pytest
from fastapi import Header, HTTPException
from fastapi.testclient import TestClient

from sda.orchestration.webapp import create_app


def _login(authorization: str | None = Header(default=None)) -> None:
    if authorization != "Bearer good":
        raise HTTPException(status_code=401, detail="Not authenticated")


@pytest.fixture
def client(tmp_path):
    root = tmp_path / "reports"
    (root / "runs" / "run:1+0").mkdir(parents=True)
    (root / "runs" / "run:1+0" / "index.html").write_text("<h1>run:1+0</h1>")
    (root / "runs" / "index.html").write_text("<ul>runs</ul>")
    (tmp_path / "secret.txt").write_text("outside the reports")
    return TestClient(create_app(root=lambda: root, login=_login), follow_redirects=False)


AUTH = {"Authorization": "Bearer good"}


def test_a_run_page_by_its_quoted_id(client):
    r = client.get("/runs/run%3A1%2B0/index.html", headers=AUTH)
    assert r.status_code == 200 and "<h1>run:1+0</h1>" in r.text
    assert client.get("/runs/run%3A1%2B0/", headers=AUTH).text == r.text  # a directory serves its index


def test_root_goes_to_the_runs_index(client):
    r = client.get("/", headers=AUTH)
    assert r.status_code == 307 and r.headers["location"] == "runs/index.html"


def test_nothing_without_a_login(client):
    assert client.get("/runs/index.html").status_code == 401
    assert client.get("/runs/index.html", headers={"Authorization": "Bearer bad"}).status_code == 401


def test_nothing_outside_the_reports(client):
    for path in ("/../secret.txt", "/runs/%2E%2E/%2E%2E/secret.txt", "/runs/nope.html"):
        assert client.get(path, headers=AUTH).status_code == 404, path


def test_the_metrics_endpoint_serves_the_stages_textfiles_to_a_logged_in_scrape(tmp_path):
    from sda.orchestration.webapp import create_metrics_app

    root = tmp_path / "metrics"
    root.mkdir()
    (root / "dedup.prom").write_text('# HELP sda_stage_last_run_seconds x\n# TYPE sda_stage_last_run_seconds gauge\n'
                                     'sda_stage_last_run_seconds{stage="dedup"} 2.5\n')
    (root / "notes.txt").write_text("not a textfile")
    client = TestClient(create_metrics_app(root=lambda: root, login=_login))
    assert client.get("/metrics").status_code == 401  # a scrape without the token
    r = client.get("/metrics", headers=AUTH)
    assert r.status_code == 200 and r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert r.text == ('# HELP sda_stage_last_run_seconds x\n# TYPE sda_stage_last_run_seconds gauge\n'
                      'sda_stage_last_run_seconds{stage="dedup"} 2.5\n')
