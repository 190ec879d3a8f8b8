"""``sda metrics-bridge``: one scrape target for Prometheus on an internal port, with no login -- the pipeline's KPIs
(every stage's textfile, :mod:`sda.pipeline.exposition`) and Airflow's own metrics, which its components push here
over OTLP/HTTP (:mod:`sda.orchestration.otlp_metrics`).

    python -m sda.orchestration.metrics_bridge [--bind 127.0.0.1] [--port 9464]

    GET  /metrics     the pipeline's series, then Airflow's (Prometheus text format 0.0.4)
    POST /v1/metrics  an OTLP ExportMetricsServiceRequest (application/x-protobuf, gzip or not)
    GET  /healthz     200 "ok"

docker-compose.yaml runs it as the ``metrics-bridge`` service, reached on the compose network only (``expose``, never
published): the port is how a scrape is authorised (docs/operating.md, "For Prometheus"). The API server's
``/sda-metrics/metrics`` serves the same pipeline series behind Airflow's login. A bad argument exits with status 2
and says which.
"""

from __future__ import annotations

import argparse
import gzip
import logging
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from sda.orchestration.otlp_metrics import OtlpStore
from sda.pipeline.exposition import EXPOSITION_TYPE, exposition

log = logging.getLogger("sda")
MAX_BODY = 16 * 1024 * 1024  # an OTLP export of a few hundred series is tens of kB


def handler_for(store: OtlpStore, metrics_root: Callable[[], Path]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "sda-metrics-bridge"

        def log_message(self, fmt: str, *args) -> None:  # one line per request is noise at a 15 s scrape
            log.debug("metrics-bridge: " + fmt, *args)

        def _reply(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/metrics":
                text = exposition(metrics_root()) + store.exposition()
                self._reply(200, text.encode(), EXPOSITION_TYPE)
            elif self.path == "/healthz":
                self._reply(200, b"ok\n")
            else:
                self._reply(404, b"not found: GET /metrics, GET /healthz, POST /v1/metrics\n")

        def do_POST(self) -> None:  # noqa: N802
            if self.path != "/v1/metrics":
                self._reply(404, b"not found: POST /v1/metrics\n")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                self._reply(413 if length else 411, f"a body of 1..{MAX_BODY} bytes is required\n".encode())
                return
            body = self.rfile.read(length)
            try:
                if self.headers.get("Content-Encoding", "").lower() == "gzip":
                    body = gzip.decompress(body)
                store.add(body)
            except (ValueError, OSError) as exc:
                self._reply(400, f"{exc}\n".encode())
                return
            from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse

            self._reply(200, ExportMetricsServiceResponse().SerializeToString(), "application/x-protobuf")

    return Handler


def serve(bind: str, port: int, metrics_root: Callable[[], Path],
          store: OtlpStore | None = None) -> ThreadingHTTPServer:
    """The bridge's server, bound (``serve_forever()`` to run it)."""
    return ThreadingHTTPServer((bind, port), handler_for(store or OtlpStore(), metrics_root))


def main(argv: list[str] | None = None) -> None:
    from sda.config.settings import SettingsError, load_settings
    from sda.pipeline.exposition import metrics_root

    parser = argparse.ArgumentParser(prog="sda metrics-bridge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9464, help="port (default 9464)")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port {args.port}: expected 1..65535")
    try:
        settings = load_settings()
    except SettingsError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        server = serve(args.bind, args.port, lambda: metrics_root(settings))
    except OSError as exc:
        parser.exit(1, f"{parser.prog}: cannot listen on {args.bind}:{args.port}: {exc}\n")
    log.info("metrics-bridge: GET http://%s:%d/metrics, OTLP to POST /v1/metrics", args.bind, args.port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main(sys.argv[1:])
