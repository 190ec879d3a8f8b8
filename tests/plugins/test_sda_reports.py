"""plugins/sda_reports.py: Airflow's API server mounts the reports and the metrics apps at their prefixes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "sda_reports.py"


def test_the_plugin_mounts_the_reports_and_the_metrics():
    spec = importlib.util.spec_from_file_location("sda_reports_plugin", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    apps = {a["url_prefix"]: a["app"] for a in module.SdaReportsPlugin.fastapi_apps}
    assert set(apps) == {"/sda-reports", "/sda-metrics"}
    assert any(getattr(r, "path", None) == "/metrics" for r in apps["/sda-metrics"].routes)
