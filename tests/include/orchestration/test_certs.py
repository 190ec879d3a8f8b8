"""sda.orchestration.certs: the deployment's CA, server certificate and Spark Connect token. The oracle is OpenSSL
itself (Python's ssl module): a TLS handshake against the generated certificate, verified against the generated CA,
for a name and an address clients use, and refused for one they do not."""

from __future__ import annotations

import os
import socket
import ssl
import stat
import threading

import pytest

from sda.orchestration import certs


def _handshake(tmp_path, server_hostname: str) -> None:
    """Serve one TLS connection with server.crt on loopback; connect verifying against ca.crt as ``server_hostname``."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve():
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"ok")
        except (ssl.SSLError, OSError):
            pass
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with client_ctx.wrap_socket(raw, server_hostname=server_hostname) as tls:
                assert tls.recv(2) == b"ok"
    finally:
        thread.join(timeout=10)
        listener.close()


def test_the_certificate_verifies_for_each_name_and_address_clients_use(tmp_path):
    made = certs.ensure(tmp_path, ["spark-connect", "postgres"], ["127.0.0.1"])
    assert set(made) == {"ca.key", "ca.crt", "server.key", "server.crt", "connect.token"}
    for name in ("spark-connect", "postgres", "127.0.0.1"):
        _handshake(tmp_path, name)
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tmp_path, "elsewhere.example")


def test_keys_are_not_world_readable_and_what_exists_is_kept(tmp_path):
    certs.ensure(tmp_path, ["spark-connect"], [])
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes["ca.key"] == 0o600 and modes["server.key"] == 0o640 and modes["connect.token"] == 0o640
    assert modes["ca.crt"] == modes["server.crt"] == 0o644
    token = (tmp_path / "connect.token").read_text().strip()
    assert len(token) >= 40
    (tmp_path / "server.crt").write_bytes((tmp_path / "server.crt").read_bytes())  # "your own", put there first
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert certs.ensure(tmp_path, ["other-name"], []) == []
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_the_postgres_key_belongs_to_postgres_alone(tmp_path):
    certs.ensure(tmp_path, ["postgres"], [], postgres_uid=os.getuid())
    key = tmp_path / "postgres.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_uid == os.getuid()
    assert key.read_bytes() == (tmp_path / "server.key").read_bytes()


@pytest.mark.parametrize("argv, message", [
    (["--out", "x"], "give the names clients use"),
    (["--out", "x", "--ip", "300.1.1.1"], "--ip '300.1.1.1' is not an IP address"),
])
def test_bad_arguments_are_refused_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        certs.main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
