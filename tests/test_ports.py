"""tests/ports.py's listening-socket census (what the end-to-end test's loopback check relies on) sees
this process's own sockets with the addresses they were bound to."""

from __future__ import annotations

import os
import socket

from tests.ports import is_loopback, listening_sockets, process_tree


def test_listening_sockets_reports_each_bound_address():
    with socket.socket() as loop, socket.socket() as anywhere, socket.socket() as idle, \
            socket.socket(socket.AF_INET6) as loop6:
        loop.bind(("127.0.0.1", 0))
        anywhere.bind(("0.0.0.0", 0))
        loop6.bind(("::1", 0))
        idle.bind(("127.0.0.1", 0))  # bound, not listening: not reported
        for s in (loop, anywhere, loop6):
            s.listen()
        ours = {s.getsockname()[1] for s in (loop, anywhere, loop6, idle)}
        found = {(addr, port) for addr, port, pid in listening_sockets({os.getpid()}) if port in ours}
        expected = {("127.0.0.1", loop.getsockname()[1]), ("0.0.0.0", anywhere.getsockname()[1]),
                    ("::1", loop6.getsockname()[1])}
        assert found == expected


def test_is_loopback():
    assert [is_loopback(a) for a in ("127.0.0.1", "127.0.1.1", "::1", "::ffff:127.0.0.1")] == [True] * 4
    assert [is_loopback(a) for a in ("0.0.0.0", "::", "192.168.1.10", "::ffff:10.0.0.1")] == [False] * 4


def test_process_tree_holds_the_roots_children():
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert {os.getpid(), child.pid} <= process_tree([os.getpid()])
        assert os.getpid() not in process_tree([child.pid])
    finally:
        child.kill()
        child.wait()
