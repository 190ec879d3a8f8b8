"""The local Airflow that ``make run`` (``scripts/run.sh``) and ``bench/latency.py`` start, listening on
``SDA_BIND_HOST`` only (default ``127.0.0.1``: this machine).

``airflow standalone`` cannot do that: its API server takes ``[api] host``, but in Airflow 3.3 the
scheduler's and the triggerer's task-log servers (``airflow.utils.serve_logs``, ports ``[logging]
worker_log_server_port`` 8793 and ``trigger_log_server_port`` 8794) bind every interface and have no
setting for it. So this runs what standalone runs -- ``airflow db migrate``, then the API server,
scheduler, DAG processor and triggerer, each a process of its own -- with the two components' log
servers off (``--skip-serve-logs``) and one log server of its own (:func:`serve_logs`: Airflow's log
app, on both log ports, bound to ``SDA_BIND_HOST``). Each component's output goes to stdout, every
line prefixed with its name, as standalone's does. SIGINT or SIGTERM stops them all; so does one of
them exiting (the exit status is then 1), except the log server: the UI then reads the task logs
from their files, as it does for finished tasks.

The components' host name (``[core] hostname_callable`` = :func:`hostname`) is the bind address, so
the API server fetches a running task's log from the log server where it listens (the machine's own
name may resolve to another address, such as Debian's 127.0.1.1). ``SDA_BIND_HOST=0.0.0.0`` offers
the UI, the REST API and the task logs to the network, on purpose only.

    python -m sda.orchestration.local_stack              # run until SIGINT or SIGTERM
    python -m sda.orchestration.local_stack serve-logs   # the log server alone

Imports only the standard library and :mod:`sda.config` (Airflow only in :func:`serve_logs`): a task
process imports it for :func:`hostname`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from sda.config.settings import load_settings

WILDCARD_HOSTS = ("0.0.0.0", "::", "")
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer", "log-server")
# without it the UI still shows every task's log from the log files (one machine): its end is reported,
# the stack goes on
OPTIONAL = ("log-server",)
STOP_GRACE_S = 45


def hostname() -> str:
    """``[core] hostname_callable`` of the local stack: the bind address, or the machine's name when
    the stack listens on every interface."""
    host = load_settings().bind_host
    return socket.getfqdn() if host in WILDCARD_HOSTS else host


def component_commands(bind_host: str, api_port: int) -> dict[str, list[str]]:
    """The command of each component (:data:`COMPONENTS`), for the venv this Python runs in."""
    airflow = str(Path(sys.executable).parent / "airflow")
    return {
        "api-server": [airflow, "api-server", "--host", bind_host, "--port", str(api_port)],
        "scheduler": [airflow, "scheduler", "--skip-serve-logs"],
        "dag-processor": [airflow, "dag-processor"],
        "triggerer": [airflow, "triggerer", "--skip-serve-logs"],
        "log-server": [sys.executable, "-m", "sda.orchestration.local_stack", "serve-logs"],
    }


def component_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default ``os.environ``) with the stack's host name callable, unless one is set."""
    out = dict(os.environ if env is None else env)
    out.setdefault("AIRFLOW__CORE__HOSTNAME_CALLABLE", "sda.orchestration.local_stack.hostname")
    return out


def serve_logs() -> None:
    """Airflow's task-log app on ``SDA_BIND_HOST`` at both log ports, until stopped."""
    import uvicorn
    from airflow.configuration import conf

    host = load_settings().bind_host
    ports = sorted({conf.getint("logging", "worker_log_server_port", fallback=8793),
                    conf.getint("logging", "trigger_log_server_port", fallback=8794)})
    sockets = []
    for port in ports:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.set_inheritable(True)
        sockets.append(sock)
    print(f"serving task logs on {host} ports {', '.join(map(str, ports))}", flush=True)
    config = uvicorn.Config("airflow.utils.serve_logs.log_server:get_app", factory=True, log_config=None,
                            access_log=False, log_level=conf.get("logging", "uvicorn_logging_level",
                                                                 fallback="info").lower())
    uvicorn.Server(config).run(sockets=sockets)


def _forward(name: str, stream, lock: threading.Lock) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip()
        with lock:
            print(f"{name:13} | {line}", flush=True)


def _stop(procs: dict[str, subprocess.Popen]) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run() -> int:
    """Migrate the metadata database, start every component, and supervise them until a signal."""
    settings = load_settings()
    env = component_env()
    airflow = str(Path(sys.executable).parent / "airflow")
    print(f"local stack: airflow db migrate (AIRFLOW_HOME={env.get('AIRFLOW_HOME', '~/airflow')})", flush=True)
    if subprocess.run([airflow, "db", "migrate"], env=env, stdin=subprocess.DEVNULL).returncode != 0:
        print("local stack: airflow db migrate failed", flush=True)
        return 1
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    api_port = int(env.get("AIRFLOW__API__PORT", "8080"))
    lock = threading.Lock()
    procs: dict[str, subprocess.Popen] = {}
    for name, cmd in component_commands(settings.bind_host, api_port).items():
        procs[name] = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT)
        threading.Thread(target=_forward, args=(name, procs[name].stdout, lock), daemon=True).start()
    print(f"local stack: {', '.join(f'{n} (pid {p.pid})' for n, p in procs.items())} on {settings.bind_host}",
          flush=True)
    status, reported = 0, set()
    while not stopping.wait(0.5):
        dead = {name for name, proc in procs.items() if proc.poll() is not None}
        if dead - set(OPTIONAL):
            print(f"local stack: {', '.join(sorted(dead))} exited; stopping the others", flush=True)
            status = 1
            break
        for name in dead - reported:
            print(f"local stack: {name} exited (status {procs[name].returncode}); the others go on", flush=True)
            reported.add(name)
    print("local stack: stopping", flush=True)
    _stop(procs)
    return status


if __name__ == "__main__":
    if sys.argv[1:] == ["serve-logs"]:
        serve_logs()
    elif not sys.argv[1:]:
        sys.exit(run())
    else:
        sys.exit("usage: python -m sda.orchestration.local_stack [serve-logs]")
