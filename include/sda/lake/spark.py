"""The pipeline's Spark: a Spark Connect client session on the long-lived server, and the Delta jar cache.

Every stage is a thin client: :func:`connect` opens a session on the Spark Connect server that
:mod:`sda.lake.server` keeps running (``sda server start``), so a task pays neither a JVM start nor
Delta's warm-up. The server is started with :func:`server_conf` (Delta's SQL extension and catalog,
the jars from ``settings.jars_dir``, the session settings below); each client session then sets the
runtime settings of :func:`session_conf` for itself, so a client's ``SDA_SHUFFLE_PARTITIONS`` wins.

Stage code uses only what a Connect session offers: DataFrames, SQL (``MERGE INTO``, ``DESCRIBE
HISTORY``, ``CREATE TABLE ... USING delta``) and the reader/writer; no ``sparkContext``, RDDs,
broadcast variables, ``_jvm`` or Delta's Python ``DeltaTable`` (it needs the Delta Connect server
plugin, which is not published for this Delta). ``tests/include/lake/test_connect_only.py`` enforces it.

``make setup`` calls :func:`resolve_jars` once: Spark's own Ivy resolver fetches the Delta artifact
and its dependencies from Maven Central into ``var/ivy`` and the jars are copied to
``settings.jars_dir``. From then on the server loads those files and needs no network.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from sda.config.settings import Settings, load_settings


def _delta_package() -> str:
    # The JVM artifact must match the installed Python package (requirements.txt pins both).
    from importlib.metadata import version

    return f"io.delta:delta-spark_4.1_2.13:{version('delta-spark')}"


DELTA_PACKAGE = _delta_package()

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
# Spark's metrics system in Prometheus's format at <UI>/metrics/prometheus (the driver's; a standalone master's at
# /metrics/master/prometheus and /metrics/applications/prometheus): docker-compose.yaml passes the same to the
# master and workers (SPARK_MASTER_OPTS, SPARK_WORKER_OPTS), and its Prometheus scrapes them.
PROMETHEUS_SERVLET = {
    "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    "spark.metrics.conf.master.sink.prometheusServlet.path": "/metrics/master/prometheus",
    "spark.metrics.conf.applications.sink.prometheusServlet.path": "/metrics/applications/prometheus",
}
# A stage whose server dies mid-call must fail in seconds, not after the client's default ten
# minutes of reconnect attempts: about 50 ms, 0.2, 0.8, 3.2 and 5 s between tries.
CLIENT_RETRIES = 5
CLIENT_MAX_BACKOFF_MS = 5000


class SparkServerUnavailable(RuntimeError):
    """No Spark Connect server answers at the configured address (or it stopped answering)."""


def session_conf(settings: Settings) -> dict[str, str]:
    """Runtime SQL settings every session uses; the server starts with them as defaults and each
    client session sets them again for itself (they are per session in Spark Connect)."""
    partitions = str(settings.shuffle_partitions)
    return {
        "spark.sql.shuffle.partitions": partitions,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        # Delta rebuilds a table's snapshot with 50 tasks by default: far too many for the small
        # per-run batches of a micro-batch pipeline on a few cores (delta-io's own test setup does this too).
        "spark.databricks.delta.snapshotPartitions": str(max(2, settings.shuffle_partitions)),
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        # Delta's optimistic commits retry on their own; keep the retention check on.
        "spark.databricks.delta.retentionDurationCheck.enabled": "true",
        # Projections outside whole-stage code generation (Delta's per-task statistics, a wide
        # project, an aggregate's result) are interpreted, not generated and compiled for every
        # task: on micro-batches generating their Java source cost more than the rows (a JFR profile
        # of the server: 21% of its CPU in GenerateUnsafeProjection, mostly regexes over the source).
        # Measured on tests/jobs/test_dedup.py alone: 99 s -> 71 s. Whole-stage code generation stays.
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        # A MERGE repartitions its output by the table's partition columns before writing: a batch
        # of one event date then went through one task, one core (bench/throughput.py: a 144,000-row
        # silver MERGE wrote for 7 s on one core). Written as the source is partitioned instead.
        "spark.databricks.delta.merge.repartitionBeforeWrite.enabled": "false",
    }


@contextmanager
def temporary_conf(spark: "SparkSession", key: str, value: str) -> Iterator[None]:
    """``key`` set to ``value`` in this session for the block, then put back as it was (unset if it was)."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def server_conf(settings: Settings) -> dict[str, str]:
    """The Spark Connect server's configuration (``spark-submit --conf``), besides master and memory."""
    conf = dict(DELTA_CONF)
    conf.update(session_conf(settings))
    conf.update({
        "spark.connect.grpc.binding.address": settings.connect_bind,
        "spark.connect.grpc.binding.port": str(settings.connect_port),
        "spark.ui.showConsoleProgress": "false",
        # SDA_SPARK_UI=true: the UI on SDA_SPARK_UI_PORT (4040; SPARK_LOCAL_IP's address, else all interfaces),
        # with Spark's Prometheus endpoints: /metrics/prometheus (the driver) and /metrics/executors/prometheus
        "spark.ui.enabled": os.environ.get("SDA_SPARK_UI", "false"),
        "spark.ui.port": os.environ.get("SDA_SPARK_UI_PORT", "4040"),
        "spark.log.level": "WARN",
        "spark.default.parallelism": partitions_for(settings),
        # A client's Python functions (mapInPandas / applyInPandas) run in Python workers forked from
        # one daemon per environment; keep them between tasks.
        "spark.python.worker.reuse": "true",
        # The server is CPU-bound on small batches (JIT, GC, task (de)serialisation); the throughput
        # collector cost about 10 % less server CPU than G1 on bench/stage_costs.py (docs/performance.md).
        "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
        "spark.executor.extraJavaOptions": "-XX:+UseParallelGC",
    })
    if conf["spark.ui.enabled"].strip().lower() == "true":
        conf.update({"spark.ui.prometheus.enabled": "true", **PROMETHEUS_SERVLET})
    jars = settings.spark_jars()
    if jars:
        conf["spark.jars"] = ",".join(jars)
    else:  # before `make setup` resolved them: Spark's Ivy fetches the package
        conf["spark.jars.packages"] = DELTA_PACKAGE
        conf["spark.jars.ivy"] = str(settings.jars_dir.parent / "ivy")
    return conf


def partitions_for(settings: Settings) -> str:
    return str(max(2, settings.shuffle_partitions))


def task_slots(spark, fallback: int) -> int:
    """How many tasks the server runs at once: N of a ``local[N]`` master (the machine's cores for
    ``local[*]``), else ``fallback`` (a cluster's executors are not known from here). Work of a few
    seconds is cut into this many tasks: each Python task costs ~0.1 s of its own."""
    match = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", str(spark.conf.get("spark.master", "") or ""))
    if match is None:
        return max(1, fallback)
    threads = match.group(1) or "1"
    return max(1, os.cpu_count() or 1) if threads == "*" else max(1, int(threads))


def observed(observation, frame: "DataFrame", *exprs: "Column") -> dict:
    """The metrics of ``frame.observe(observation, *exprs)`` once a query over it has run; when the
    server did not deliver them, the same aggregate run on ``frame``. Spark 4.1's Connect server waits
    100 ms for an observation's listener and sends an empty row when it is later (SPARK-54279; 4.1.3's
    server still does), which a busy machine sees now and then: the CI run of 836b1e5 lost one."""
    got = dict(observation.get)
    return got if got else frame.agg(*exprs).first().asDict()


def parse_url(url: str) -> tuple[str, int]:
    """``sc://host:port[/;params]`` -> (host, port); Spark Connect's default port is 15002."""
    parsed = urlparse(url)
    if parsed.scheme != "sc" or not parsed.hostname:
        raise SparkServerUnavailable(f"{url!r} is not a Spark Connect URL (sc://host:port)")
    return parsed.hostname, parsed.port or 15002


def answers(host: str, port: int, timeout_s: float = 2.0) -> bool:
    """Whether something accepts TCP connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _close_without_the_shared_pool(session) -> None:
    """``SparkSession.__del__`` of pyspark 4.1 Connect, minus one call: it closed the client, and
    ``SparkConnectClient.close`` shuts down the release thread pool that *every* session of the process
    shares, waiting for its threads. The cyclic garbage collector runs a dropped session's ``__del__``
    in whichever thread it happens to be in; in one of that pool's own threads (while it holds a gRPC
    channel's lock) the shutdown waits for a thread that waits for that lock, and every query of the
    process hangs. Seen here: a test worker idle for good inside ``DataFrame.isEmpty``. A dropped
    session now only closes its own channel; the shared pool lives as long as the process."""
    try:
        if hasattr(session, "_sqm"):
            session._sqm.close()
        client = session._client
        if not getattr(client, "_closed", False):
            client._channel.close()
            client._closed = True
    except Exception:  # noqa: BLE001 - best effort, as pyspark's own __del__
        pass


def connect(settings: Settings | None = None, url: str | None = None) -> "SparkSession":
    """A Spark Connect session on the server at ``url`` (default ``settings.connect_url``), with the
    session settings of :func:`session_conf`. Raises :class:`SparkServerUnavailable`, naming the
    address, when nothing answers there."""
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession

    SparkSession.__del__ = _close_without_the_shared_pool
    settings = settings or load_settings()
    url = url or settings.connect_url
    host, port = parse_url(url)
    if not answers(host, port):
        raise SparkServerUnavailable(
            f"no Spark Connect server answers at {url} ({host}:{port}): start it with `sda server start` "
            "(make run does), or point the spark_connect connection / SDA_CONNECT_HOST and SDA_CONNECT_PORT at one"
        )
    # create(), not getOrCreate(): the latter returns whatever session exists, whatever its URL.
    # SPARK_REMOTE makes any library in this process that asks for a session (Great Expectations'
    # Spark engine does) get a client of the same server, never a classic JVM of its own.
    os.environ["SPARK_REMOTE"] = url
    # what pyspark's own builder.remote() sets: pyspark.sql.functions and friends dispatch to the
    # Connect implementations only with it
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    # A channel of its own (no subchannel shared with earlier sessions of this process): after a
    # server restart, gRPC's shared subchannel would still be backing off from the dead server and
    # refuse the new one for up to two minutes.
    channel = channel_builder(url, settings, [("grpc.use_local_subchannel_pool", 1)])
    spark = SparkSession.builder.channelBuilder(channel).create()
    activate(spark)
    spark.client.set_retry_policies([DefaultPolicy(max_retries=CLIENT_RETRIES, max_backoff=CLIENT_MAX_BACKOFF_MS)])
    for key, value in session_conf(settings).items():
        spark.conf.set(key, value)
    spark.sda_url = url  # for error messages: which server a failing stage was talking to
    return spark


def channel_builder(url: str, settings: Settings, options: list[tuple[str, Any]]):
    """The gRPC channel to the server at ``url``: plaintext by default; with ``connect_tls_ca`` TLS, trusting that CA
    alone (PySpark's own TLS trusts only gRPC's default roots); with ``connect_token_file`` the server's pre-shared
    token as a bearer token on every call -- over TLS, or to a server on this machine's loopback (gRPC's local
    credentials: the compose Connect server's own warm-up behind its TLS proxy). The token never enters the URL,
    so it is in no log line that names the server."""
    import grpc
    from pyspark.sql.connect.client import DefaultChannelBuilder

    ca = settings.connect_tls_ca.read_bytes() if settings.connect_tls_ca is not None else None
    token = settings.connect_token()

    class SecuredChannelBuilder(DefaultChannelBuilder):
        def toChannel(self) -> "grpc.Channel":  # noqa: N802 (pyspark's name)
            if ca is not None:
                creds = grpc.ssl_channel_credentials(root_certificates=ca)
            elif token is not None and is_loopback_host(self.host):
                creds = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
            elif token is not None:
                raise SparkServerUnavailable(f"{url}: a token is sent over TLS only (set SDA_CONNECT_TLS_CA) or to "
                                             "a server on this machine's loopback")
            else:
                return super().toChannel()
            if token is not None:
                creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
            return self._secure_channel(self.endpoint, creds)

    return SecuredChannelBuilder(url, channelOptions=options)


def is_loopback_host(host: str) -> bool:
    import ipaddress

    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_GONE_MARKERS = ("StatusCode.UNAVAILABLE", "Connection refused", "failed to connect to all addresses", "Socket closed",
                 "Connection reset", "RETRIES_EXCEEDED", "Broken pipe")


def activate(spark: "SparkSession") -> None:
    """Make ``spark`` this process's default and this thread's active Connect session (every stage
    does, for the session it was given).

    ``create()`` does so only when none is set yet, yet pyspark hands results that come back from the
    server as DataFrames (``localCheckpoint()``'s) to the *active* session: with an older session
    still active (the server's warm-up, a server since restarted) such a DataFrame would be sent to a
    session that never cached it ("No DataFrame with id ... is found in the session")."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with ConnectSession._lock:
        ConnectSession._default_session = spark
    ConnectSession._active_session.session = spark


def is_server_gone(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) says the Spark Connect server cannot be
    reached: stopped, killed, restarting."""
    seen = 0
    while exc is not None and seen < 8:
        if any(marker in f"{type(exc).__name__}: {exc}" for marker in _GONE_MARKERS):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def build_session(app_name: str = "sda", settings: Settings | None = None) -> "SparkSession":
    """The session every job, command and test uses: :func:`connect` (``app_name`` is kept for callers'
    readability; Connect sessions share the server's application)."""
    return connect(settings)


def resolve_jars(settings: Settings | None = None) -> list[Path]:
    """Fetch the Delta jars once (Maven Central through Spark's Ivy) and cache them in ``jars_dir``."""
    from pyspark.sql import SparkSession

    settings = settings or load_settings()
    existing = settings.spark_jars()
    if any("delta-spark" in Path(j).name for j in existing):
        return [Path(j) for j in existing]
    ivy = settings.jars_dir.parent / "ivy"
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("sda-resolve-jars")
        .config("spark.jars.packages", DELTA_PACKAGE)
        .config("spark.jars.ivy", str(ivy))
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.stop()
    settings.jars_dir.mkdir(parents=True, exist_ok=True)
    copied = []
    shipped = {_artifact(p.name) for p in _spark_home_jars()}
    for jar in sorted((ivy / "jars").glob("*.jar")):
        # Spark already ships newer builds of jackson, parquet, hadoop, log4j...: older copies from
        # Delta's dependency tree would only shadow them.
        if _artifact(jar.name.split("_", 1)[-1]) in shipped:
            continue
        target = settings.jars_dir / jar.name
        shutil.copy2(jar, target)
        copied.append(target)
    if not any("delta-spark" in p.name for p in copied):
        raise RuntimeError(f"Delta jars were not resolved into {ivy / 'jars'}; is Maven Central reachable?")
    return copied


def _artifact(jar_name: str) -> str:
    """'jackson-core-2.13.5.jar' -> 'jackson-core'."""
    stem = jar_name.removesuffix(".jar")
    parts = stem.split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


def _spark_home_jars() -> list[Path]:
    import pyspark

    return list((Path(pyspark.__file__).parent / "jars").glob("*.jar"))


if __name__ == "__main__":  # python -m sda.lake.spark
    for path in resolve_jars():
        print(path)
