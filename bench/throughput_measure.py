"""What bench/throughput.py reads off a run besides its clock: peak memory of the Spark server's JVM and
of the client (``/proc/<pid>/status`` VmHWM) and of the server's Python workers (sampled through the
run), the CPU seconds each of them used per stage (``/proc/<pid>/stat``), and the seconds and rows of
the MERGEs that wrote each layer (Delta's own commit metrics in ``_delta_log``)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

# what normalize, dedup and correlate write, one row per observation
LAYERS = ("observations", "observations_dedup", "correlated")
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _process_tree(root: int) -> dict[int, str]:
    """``root`` and its descendants, each with its ``/proc/<pid>/stat`` line as read to find its parent."""
    children: dict[int, list[int]] = {}
    stats: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            stats[int(entry.name)] = stat
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            out[pid] = stats[pid]
        todo += children.get(pid, [])
    return out


def _name_and_kb(pid: int, field: str) -> tuple[str, int]:
    """The process's name and one of its ``/proc/<pid>/status`` sizes (``VmHWM``, the peak resident size), kB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return fields.get("Name", "").strip(), int(fields.get(field, "0 kB").split()[0])


def _cpu_fields(stat: str) -> tuple[str, int, int]:
    """(name, start time, CPU ticks used: user + system) from a ``/proc/<pid>/stat`` line."""
    fields = stat.rsplit(")", 1)[1].split()
    return stat[stat.index("(") + 1:stat.rindex(")")], int(fields[19]), int(fields[11]) + int(fields[12])


class WorkerPeak:
    """The server's Python workers come and go with its tasks, so a reading at the end misses them: this
    thread samples them every ``every_s`` while the block runs. Memory: it sums their proportional set
    size (``Pss`` of ``/proc/<pid>/smaps_rollup``: a page the forked workers share is split between them,
    not counted in each) and keeps the largest sum and the most workers alive at once. CPU: it keeps the
    ticks each worker had used when last seen, so one that ends between samples loses at most its last
    ``every_s`` (its parent's ``cutime`` would not have it: a worker nobody waits for is never added there)."""

    def __init__(self, server_pid: int | None, every_s: float = 0.5) -> None:
        self.server_pid, self.every_s = server_pid, every_s
        self.peak_kb = self.most = self._since_mark_kb = 0
        self.by_stage: dict[str, int] = {}  # MB, the largest sum while each stage ran (see mark)
        self._worker_ticks: dict[tuple[int, int], int] = {}  # (pid, start time): CPU ticks when last seen
        self._jvm_ticks = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-peak", daemon=True)

    def sample(self) -> None:
        total = alive = jvm = 0
        ticks: dict[tuple[int, int], int] = {}
        for p, stat in (_process_tree(self.server_pid) if self.server_pid else {}).items():
            try:
                name, started, used = _cpu_fields(stat)
                if name == "java":
                    jvm += used
                if not name.startswith("python"):
                    continue
                ticks[(p, started)] = used
                pss = next(line for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines()
                           if line.startswith("Pss:"))
            except (OSError, ValueError, StopIteration):
                continue  # gone between the listing and the read
            total, alive = total + int(pss.split()[1]), alive + 1
        with self._lock:
            self._worker_ticks.update(ticks)
            self._jvm_ticks = max(self._jvm_ticks, jvm)
            self.peak_kb, self.most = max(self.peak_kb, total), max(self.most, alive)
            self._since_mark_kb = max(self._since_mark_kb, total)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) used so far by the server's JVM (``jvm``: all its threads), by its
        Python workers while they were sampled (``python``) and by this process (``client``: the stages'
        driver code, Arrow conversions included, and this sampler)."""
        self.sample()
        user, system = os.times()[:2]
        with self._lock:
            return {"jvm": self._jvm_ticks / _TICKS_PER_S, "python": sum(self._worker_ticks.values()) / _TICKS_PER_S,
                    "client": user + system}

    def mark(self, stage: str) -> None:
        """``stage`` has just ended: its peak is the largest sum since the previous mark."""
        self.sample()
        with self._lock:
            self.by_stage[stage], self._since_mark_kb = round(self._since_mark_kb / 1024), 0

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def __enter__(self) -> "WorkerPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def figures(self) -> dict:
        return {"server_workers_peak_mb": round(self.peak_kb / 1024), "server_workers": self.most,
                "server_workers_peak_mb_by_stage": dict(self.by_stage)}


def cpu_used(before: dict[str, float], after: dict[str, float], wall_s: float) -> dict[str, float | None]:
    """What :meth:`WorkerPeak.cpu_seconds` counted between two readings, and the cores kept busy over ``wall_s``."""
    used = {k: round(after[k] - before[k], 1) for k in before}
    return {**used, "cores_busy": round(sum(used.values()) / wall_s, 2) if wall_s else None}


def memory_now(server_pid: int | None, workers: WorkerPeak) -> dict:
    """The peaks so far: the server JVM's VmHWM, its workers' largest summed Pss (``workers``), and this
    process's VmHWM, not ru_maxrss, which a spawned child inherits from its parent's address space at
    the fork before exec."""
    jvm_kb = 0
    for p in _process_tree(server_pid) if server_pid else []:
        try:
            name, hwm = _name_and_kb(p, "VmHWM")
        except (OSError, ValueError):
            continue
        jvm_kb += hwm if name == "java" else 0
    workers.sample()
    return {"server_peak_mb": round(jvm_kb / 1024), **workers.figures(),
            "client_peak_mb": round(_name_and_kb(os.getpid(), "VmHWM")[1] / 1024)}


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
