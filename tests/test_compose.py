"""docker-compose.yaml, the Dockerfile and the live test's override, checked without a Docker engine
(tests/compose/test_compose_live.py starts the stack for real): the services Airflow's official compose file
has (on PostgreSQL), a Spark master with two workers, one shared lakehouse volume everywhere a table
path is read or written, healthchecks, start-up order, the long-lived Spark Connect server on the
standalone master (reachable by the Airflow services, not published on the host), the spark_connect
connection from the environment, and no secret in the file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parents[1] / "docker-compose.yaml"
AIRFLOW = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
SPARK = ("spark-master", "spark-worker-1", "spark-worker-2", "spark-connect")
MONITORING = ("metrics-bridge", "prometheus")
SECURITY = ("certs-init", "spark-connect-tls")
LAKEHOUSE = "/opt/sda/var/lakehouse"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())  # anchors and merge keys resolved as Compose does


def env(service: dict) -> dict[str, str]:
    e = service.get("environment", {})
    return dict(e) if isinstance(e, dict) else dict(item.split("=", 1) for item in e)


def test_services_of_the_official_file_plus_a_spark_cluster(compose):
    assert set(compose["services"]) == {"postgres", *AIRFLOW, "airflow-init", *SPARK, *MONITORING, *SECURITY}
    assert set(compose["volumes"]) >= {"postgres-db-volume", "lakehouse", "prometheus-data", "certs"}


def test_prometheus_scrapes_internal_targets_only_and_airflow_pushes_its_metrics_to_the_bridge(compose):
    """The metrics bridge is exposed on the compose network, never published; every Airflow component pushes its
    OTLP metrics to it under a name of its own; Prometheus's configuration names the bridge and Spark's endpoints
    and loads the rules file the image carries."""
    services = compose["services"]
    assert services["metrics-bridge"]["expose"] == ["9464"] and "ports" not in services["metrics-bridge"]
    assert env(services["spark-connect"])["SDA_SPARK_UI"] == "true"  # its UI serves Spark's Prometheus endpoints
    for name in AIRFLOW:
        e = env(services[name])
        assert e["AIRFLOW__METRICS__OTEL_ON"] == "True"
        assert e["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] == "http://metrics-bridge:9464/v1/metrics"
        assert e["OTEL_RESOURCE_ATTRIBUTES"] == f"service.instance.id={name.removeprefix('airflow-')}"
    root = COMPOSE.parent / "docker" / "prometheus"
    config = yaml.safe_load((root / "prometheus.yml.in").read_text().replace("@INTERVAL@", "15s"))
    assert config["rule_files"] == ["/etc/sda-prometheus/sda-rules.yml"]
    assert {j["job_name"]: j["static_configs"][0]["targets"] for j in config["scrape_configs"]} == {
        "sda-fusion": ["@BRIDGE@"], "spark-master": ["@SPARK_MASTER@"], "spark-applications": ["@SPARK_MASTER@"],
        "spark-driver": ["@SPARK_DRIVER@"], "spark-executors": ["@SPARK_DRIVER@"]}
    rules = yaml.safe_load((root / "sda-rules.yml").read_text())["groups"][0]["rules"]
    assert all(r["alert"] and r["expr"] and r["labels"]["severity"] in ("page", "warn") for r in rules)


@pytest.mark.parametrize("name", ["postgres", *AIRFLOW, *SPARK, *MONITORING, "spark-connect-tls"])
def test_long_running_services_have_healthchecks(compose, name):
    check = compose["services"][name]["healthcheck"]
    assert check["test"] and check["interval"] and check["retries"] >= 1


@pytest.mark.parametrize("name", [*AIRFLOW, "airflow-init", *SPARK])
def test_one_shared_lakehouse_volume(compose, name):
    """Driver (Airflow's spark-submit) and executors must see a table path as the same files."""
    service = compose["services"][name]
    assert f"lakehouse:{LAKEHOUSE}" in service["volumes"]
    assert env(service)["SDA_LAKEHOUSE"] == LAKEHOUSE


@pytest.mark.parametrize("name", [*AIRFLOW, "airflow-init"])
def test_airflow_on_postgres_with_spark_connect_from_the_environment(compose, name):
    e = env(compose["services"][name])
    assert e["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://airflow:")
    # TLS to PostgreSQL, verified for its name against the deployment's CA
    assert e["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith(
        "@postgres/airflow?sslmode=verify-full&sslrootcert=/opt/sda/certs/ca.crt")
    assert e["AIRFLOW__CORE__EXECUTOR"] == "sda.orchestration.executor.PreloadingLocalExecutor"
    conn = json.loads(e["AIRFLOW_CONN_SPARK_CONNECT"])
    assert conn["conn_type"] == "spark_connect" and f"{conn['host']}:{conn['port']}" == "sc://spark-connect:15002"
    assert e["SDA_CONNECT_HOST"] == "spark-connect"
    assert (e["SDA_CONNECT_TLS_CA"], e["SDA_CONNECT_TOKEN_FILE"]) == (
        "/opt/sda/certs/ca.crt", "/opt/sda/certs/connect.token")
    assert e["SDA_SPARK_MASTER"] == "spark://spark-master:7077"
    assert e["AIRFLOW__CORE__AUTH_MANAGER"].endswith("SimpleAuthManager")  # a login for UI and API


def test_workers_join_the_master_and_start_after_it(compose):
    master = compose["services"]["spark-master"]
    assert "deploy.master.Master" in master["command"] and "--port 7077" in master["command"]
    for name in ("spark-worker-1", "spark-worker-2"):
        worker = compose["services"][name]
        assert "deploy.worker.Worker" in worker["command"] and worker["command"].endswith("spark://spark-master:7077")
        assert worker["depends_on"]["spark-master"]["condition"] == "service_healthy"


def test_airflow_waits_for_postgres_and_the_init_service(compose):
    for name in AIRFLOW:
        deps = compose["services"][name]["depends_on"]
        assert deps["postgres"]["condition"] == "service_healthy"
        assert deps["airflow-init"]["condition"] == "service_completed_successfully"
    assert "db migrate" in compose["services"]["airflow-init"]["command"][-1]


def test_no_secret_in_the_file():
    """Passwords and keys come from the environment (.env), never from the file itself."""
    text = COMPOSE.read_text()
    for key in ("POSTGRES_PASSWORD", "AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API_AUTH__JWT_SECRET"):
        for m in re.finditer(rf"^\s*{key}:\s*(.+)$", text, flags=re.M):
            assert m.group(1).strip().startswith("${"), f"{key} is set in docker-compose.yaml: {m.group(0).strip()}"
    assert re.search(r"postgresql\+psycopg2://airflow:\$\{POSTGRES_PASSWORD", text)


def test_the_spark_connect_server_runs_on_the_master_and_is_not_published(compose):
    service = compose["services"]["spark-connect"]
    assert service["command"] == ["python", "-m", "sda.lake.server", "run"]
    e = env(service)
    assert e["SDA_SPARK_MASTER"] == "spark://spark-master:7077"
    # on its own loopback, plaintext with the token; its TLS proxy in its network namespace serves :15002
    assert (e["SDA_CONNECT_BIND"], e["SDA_CONNECT_PORT"], e["SDA_CONNECT_TLS_CA"]) == ("127.0.0.1", "15003", "")
    proxy = compose["services"]["spark-connect-tls"]
    assert proxy["network_mode"] == "service:spark-connect"
    assert env(proxy) == {"SDA_TLS_LISTEN": "15002", "SDA_TLS_UPSTREAM": "127.0.0.1:15003"}
    assert "ports" not in service and "15002" in [str(p) for p in service["expose"]]
    assert service["depends_on"]["spark-master"]["condition"] == "service_healthy"
    assert compose["services"]["airflow-scheduler"]["depends_on"]["spark-connect"]["condition"] == "service_healthy"
    assert compose["services"]["airflow-scheduler"]["depends_on"]["spark-connect-tls"]["condition"] == "service_healthy"
    # healthy = warmed up with the tables created (sda server run's ready file), not just a port answering
    assert service["healthcheck"]["test"] == ["CMD", "python", "-m", "sda.lake.server", "ready"]


DOCKERFILE = COMPOSE.parent / "Dockerfile"
LOOPBACK = COMPOSE.parent / "tests" / "compose" / "loopback.yaml"


@pytest.mark.parametrize("name", [*AIRFLOW, "airflow-init", *SPARK])
def test_every_airflow_and_spark_service_runs_the_project_image_built_here(compose, name):
    service = compose["services"][name]
    assert service["build"]["context"] == "." and service["build"]["target"] == "sda"
    assert service["build"]["args"]["BASE_IMAGE"] == "${SDA_BASE_IMAGE:-python:3.11-slim-bookworm}"
    assert service["image"] == "${SDA_IMAGE:-sda-fusion:latest}"


def test_the_dockerfile_builds_on_a_base_argument_and_runs_as_a_non_root_user():
    text = DOCKERFILE.read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim-bookworm" in text
    assert "openjdk-17-jre-headless" in text and "uv pip sync" in text and "requirements.lock" in text
    assert "python -m sda.lake.spark" in text  # Delta's jars resolved at build time
    final = text.split("AS sda", 1)[1]
    users = [line.split()[1] for line in final.splitlines() if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0", "0:0")
    ignored = {line.strip().rstrip("/") for line in (COMPOSE.parent / ".dockerignore").read_text().splitlines()}
    assert {"var", ".venv", ".git"} <= ignored


def test_the_live_tests_override_keeps_every_service_on_loopback(compose):
    override = yaml.safe_load(LOOPBACK.read_text())
    assert set(override["services"]) == set(compose["services"])
    for name, service in override["services"].items():
        assert service["network_mode"] == "host", name
    assert "0.0.0.0" not in LOOPBACK.read_text()


def test_only_the_ui_ports_are_published_and_only_in_the_default_override():
    """docker-compose.override.yaml (read when no -f is given) publishes the Airflow UI and the master's
    UI on the host's 127.0.0.1; docker-compose.yaml publishes nothing, so the host-network override can run
    without it."""
    base = yaml.safe_load(COMPOSE.read_text())
    assert not [name for name, s in base["services"].items() if "ports" in s]
    override = yaml.safe_load((COMPOSE.parent / "docker-compose.override.yaml").read_text())
    published = {name: s["ports"] for name, s in override["services"].items()}
    # on the host's loopback only (a bare "8080:8080" would publish on every interface)
    assert published == {"airflow-apiserver": ["127.0.0.1:8080:8080"], "spark-master": ["127.0.0.1:8081:8081"],
                         "prometheus": ["127.0.0.1:9090:9090"]}


def test_tls_material_is_made_at_first_start_and_every_tls_service_waits_for_it(compose):
    """certs-init makes the CA, the server certificate (for each service name and 127.0.0.1) and the token; the
    services that serve or verify TLS mount them read-only and start after it; PostgreSQL serves TLS and its
    pg_hba.conf rejects plaintext; the API server serves HTTPS, and its clients verify it."""
    services = compose["services"]
    init = services["certs-init"]
    assert init["command"][:4] == ["python", "-m", "sda.orchestration.certs", "--out"]
    assert "spark-connect,postgres,airflow-apiserver,localhost" in init["command"][init["command"].index("--dns") + 1]
    for name in ("postgres", "spark-connect", "spark-connect-tls", *AIRFLOW):
        assert services[name]["depends_on"]["certs-init"]["condition"] == "service_completed_successfully", name
        assert "certs:/opt/sda/certs:ro" in services[name]["volumes"], name
    pg = services["postgres"]["command"]
    assert {"ssl=on", "ssl_key_file=/opt/sda/certs/postgres.key", "hba_file=/etc/sda/pg_hba.conf"} <= set(pg)
    hba = [line.split() for line in (COMPOSE.parent / "docker" / "postgres" / "pg_hba.conf").read_text().splitlines()
           if line.strip() and not line.startswith("#")]
    assert ["hostnossl", "all", "all", "all", "reject"] in hba and not [r for r in hba if r[0] == "host"]
    for name in AIRFLOW:
        e = env(services[name])
        assert e["AIRFLOW__API__SSL_CERT"] == "/opt/sda/certs/server.crt"
        assert e["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].startswith("https://")
        assert e["AIRFLOW__API__SSL_CA_FILE"] == "/opt/sda/certs/ca.crt"
