"""A headless Chromium driven over the DevTools protocol (no Selenium, no Playwright): open a URL
with cookies set, wait for the page to load, and read the DOM back. Used by tests/test_end_to_end.py
to follow the Airflow UI's "Run report" link the way a logged-in user's browser does.

Chromium comes from Debian's ``chromium`` package (``.ci/run`` installs it when missing); where it
is absent :func:`find_chromium` says so and the test skips with that message.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.ports import free_port


def find_chromium() -> tuple[str | None, str]:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path, ""
    return None, "Chromium not found: install Debian's package with `apt-get install -y chromium` (.ci/run does this)"


class Browser:
    def __init__(self, binary: str):
        self.binary = binary
        self.profile = Path(tempfile.mkdtemp(prefix="sda-chromium-"))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.ws = None
        self._ids = itertools.count(1)
        self._events: list[dict] = []

    def __enter__(self) -> "Browser":
        from websockets.sync.client import connect

        args = [self.binary, "--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                f"--remote-debugging-port={self.port}", "--remote-allow-origins=*", f"--user-data-dir={self.profile}",
                "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=5) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"Chromium did not open its DevTools port {self.port}")
            time.sleep(0.5)
        self.ws = connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        for domain in ("Page", "Network", "Runtime"):
            self.call(f"{domain}.enable")
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=30)
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, timeout: float = 60, **params):
        """Send one DevTools command and return its result (events met on the way are kept)."""
        call_id = next(self._ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._events.append(message)


    def set_cookie(self, name: str, value: str, url: str) -> None:
        self.call("Network.setCookie", name=name, value=value, url=url)

    def open(self, url: str, timeout: float = 60) -> dict:
        """Navigate and wait for the load event; returns the page's final URL, status and HTML."""
        self._events = []
        status: dict = {}
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            self._events.append(message)
        for event in self._events:
            if event.get("method") == "Network.responseReceived" and event["params"].get("type") == "Document":
                status = event["params"]["response"]
        html = self.call("Runtime.evaluate", expression="document.documentElement.outerHTML", returnByValue=True)
        return {"url": status.get("url"), "status": status.get("status"), "html": html["result"]["value"]}

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")
