"""Free TCP ports on loopback for the servers tests start (Spark Connect, Airflow, PostgreSQL, a browser)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the OS's pick for an ephemeral bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
