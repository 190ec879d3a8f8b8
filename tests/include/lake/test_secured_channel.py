"""sda.lake.spark.channel_builder: the gRPC channel a stage opens to Spark Connect, against a gRPC server of the
test's own that answers with the bearer token it received -- over TLS with a certificate from the deployment's own
CA (sda.orchestration.certs), and plaintext. The oracle is gRPC's own TLS verification and metadata."""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest

from sda.config.settings import SettingsError, load_settings
from sda.lake.spark import SparkServerUnavailable, channel_builder
from sda.orchestration import certs

METHOD = "/spark.connect.SparkConnectService/Config"


def _echo_token(request: bytes, context) -> bytes:
    return dict(context.invocation_metadata()).get("authorization", "none").encode()


@pytest.fixture
def server(tmp_path):
    """Two ports of one gRPC server on loopback: TLS (the generated server certificate) and plaintext."""
    certs.ensure(tmp_path, ["spark-connect"], ["127.0.0.1"])
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    srv.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("spark.connect.SparkConnectService", {
        "Config": grpc.unary_unary_rpc_method_handler(_echo_token)})])
    pair = ((tmp_path / "server.key").read_bytes(), (tmp_path / "server.crt").read_bytes())
    creds = grpc.ssl_server_credentials([pair])
    tls, plain = srv.add_secure_port("127.0.0.1:0", creds), srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    yield tmp_path, tls, plain
    srv.stop(None)


def _call(url: str, settings) -> str:
    channel = channel_builder(url, settings, []).toChannel()
    try:
        return channel.unary_unary(METHOD)(b"", timeout=10).decode()
    finally:
        channel.close()


def _settings(root, **kw):
    return load_settings(env={}, **{k: root / v for k, v in kw.items()})


def test_tls_trusting_the_deployments_ca_carries_the_token(server):
    root, tls, _ = server
    settings = _settings(root, connect_tls_ca="ca.crt", connect_token_file="connect.token")
    token = (root / "connect.token").read_text().strip()
    assert _call(f"sc://127.0.0.1:{tls}", settings) == f"Bearer {token}"


def test_tls_does_not_trust_gRPCs_default_roots_alone(server):
    """Without the deployment's CA the certificate is not trusted: the client's own roots are not enough."""
    root, tls, _ = server
    other = root / "other"
    certs.ensure(other, ["spark-connect"], ["127.0.0.1"])  # another deployment's CA
    with pytest.raises(grpc.RpcError) as refused:
        _call(f"sc://127.0.0.1:{tls}", _settings(other, connect_tls_ca="ca.crt"))
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_token_goes_plaintext_only_to_loopback(server):
    root, _, plain = server
    settings = _settings(root, connect_token_file="connect.token")
    assert _call(f"sc://127.0.0.1:{plain}", settings).startswith("Bearer ")  # local credentials, the server's own
    with pytest.raises(SparkServerUnavailable, match="a token is sent over TLS only"):
        channel_builder("sc://spark-connect:15002", settings, []).toChannel()
    assert _call(f"sc://127.0.0.1:{plain}", load_settings(env={})) == "none"  # nothing set: plaintext, no token


def test_a_token_file_that_is_missing_or_not_one_token_is_refused(tmp_path):
    with pytest.raises(SettingsError, match="no such file"):
        load_settings(env={"SDA_CONNECT_TOKEN_FILE": str(tmp_path / "absent")})
    (tmp_path / "two").write_text("a b\n")
    with pytest.raises(SettingsError, match="expected one token"):
        load_settings(env={"SDA_CONNECT_TOKEN_FILE": str(tmp_path / "two")}).connect_token()
