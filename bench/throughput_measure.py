"""What bench/throughput.py reads off a run besides its clock: peak memory of the Spark server's processes
and of the client (``/proc/<pid>/status`` VmHWM), and the seconds and rows of the MERGEs that wrote
each layer (Delta's own commit metrics in ``_delta_log``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

# what normalize, dedup and correlate write, one row per observation
LAYERS = ("observations", "observations_dedup", "correlated")


def _process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _name_and_hwm_kb(pid: int) -> tuple[str, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return fields.get("Name", "").strip(), int(fields.get("VmHWM", "0 kB").split()[0])


def server_memory(pid: int | None) -> dict:
    """Peak resident memory (MB) of the server's JVM and of its Python workers alive now."""
    jvm_kb = workers_kb = workers = 0
    for p in _process_tree(pid) if pid else []:
        try:
            name, hwm = _name_and_hwm_kb(p)
        except (OSError, ValueError):
            continue
        if name == "java":
            jvm_kb += hwm
        elif name.startswith("python"):
            workers_kb, workers = workers_kb + hwm, workers + 1
    return {"server_peak_mb": round(jvm_kb / 1024), "server_workers_peak_mb": round(workers_kb / 1024),
            "server_workers": workers}


def memory_now(server_pid: int | None) -> dict:
    """The server's peaks and this process's: its VmHWM, not ru_maxrss, which a spawned child inherits
    from its parent's address space at the fork before exec."""
    return {**server_memory(server_pid), "client_peak_mb": round(_name_and_hwm_kb(os.getpid())[1] / 1024)}



def layer_writes(settings) -> dict:
    """Per layer the flow writes (silver, deduplicated silver, gold ``correlated``): the seconds its MERGEs
    took (Delta's own ``executionTimeMs``, most of it writing the rows) and the rows they inserted."""
    from sda.lake.tables import TABLES

    out = {}
    for name in LAYERS:
        ms = rows = 0
        for log in sorted((Path(TABLES[name].path(settings)) / "_delta_log").glob("*.json")):
            for line in log.read_text().splitlines():
                metrics = (json.loads(line).get("commitInfo") or {}).get("operationMetrics", {})
                ms += int(metrics.get("executionTimeMs", 0))
                rows += int(metrics.get("numTargetRowsInserted", 0))
        rows_per_s = round(rows / (ms / 1000), 1) if ms else None
        out[name] = {"seconds": round(ms / 1000, 2), "rows": rows, "rows_per_s": rows_per_s}
    return out
