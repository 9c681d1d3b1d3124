"""The memory a server the suite started holds: peak resident memory of its processes, and GPU memory.

A watch runs beside each server from its start to its stop.  Once a second
it sums the resident memory (`VmRSS`) of the server's process and every
process below it (vLLM runs its engine in a child), and, where `nvidia-smi`
is on PATH, the GPU memory those processes hold (`--query-compute-apps`).
At the end it also reads each process's own peak (`VmHWM`, the kernel's
high-water mark), so a one-process server such as llama-server reports its
exact peak even if it lasted between two readings.  The peak reported is the
larger of the two: the highest sum seen, or the highest single high-water
mark.  Linux only (`/proc`); elsewhere nothing is measured and it says so.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
INTERVAL_S = 1.0
GPU_QUERY = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class MemoryPeak:
    """Peak memory of one server in MiB (None: not measured), and how it was measured."""

    rss_mb: float | None
    gpu_mb: float | None
    readings: int
    how: str


def _status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of one process in MiB ({} once it is gone)."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = float(value.split()[0]) / 1024.0  # kB
    return out


def process_tree(pid: int) -> list[int]:
    """The process and every live process below it (parents read from /proc/*/stat)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir() if PROC.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # the command name may hold spaces and parentheses
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def gpu_memory(pids: set[int]) -> float | None:
    """MiB of GPU memory the given processes hold, by `nvidia-smi`; None without it or when it fails."""
    if shutil.which(GPU_QUERY[0]) is None:
        return None
    try:
        text = subprocess.run(GPU_QUERY, capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    used = 0.0
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) in pids:
            with contextlib.suppress(ValueError):
                used += float(parts[1])
    return used


class MemoryWatch:
    """Reads a server's memory once a second on a thread of its own, from `start()` to `stop()`."""

    def __init__(self, pid: int, interval_s: float = INTERVAL_S) -> None:
        self.pid, self.interval_s = pid, interval_s
        self._rss = 0.0
        self._hwm = 0.0
        self._gpu: float | None = None
        self._readings = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"memory-{pid}", daemon=True)

    def start(self) -> MemoryWatch:
        self._thread.start()
        return self

    def read(self) -> None:
        """One reading: the tree's summed resident memory, each process's high-water mark, its GPU memory."""
        pids = process_tree(self.pid)
        status = [_status(p) for p in pids]
        alive = [s for s in status if s]
        if not alive:
            return
        gpu = gpu_memory(set(pids))
        with self._lock:
            self._readings += 1
            self._rss = max(self._rss, sum(s.get("VmRSS", 0.0) for s in alive))
            self._hwm = max([self._hwm, *(s.get("VmHWM", 0.0) for s in alive)])
            if gpu is not None:
                self._gpu = max(self._gpu or 0.0, gpu)

    def _run(self) -> None:
        self.read()
        while not self._stop.wait(self.interval_s):
            self.read()

    def stop(self) -> MemoryPeak:
        """A last reading (call it while the server still runs), then the peak."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.read()
        return self.peak()

    def peak(self) -> MemoryPeak:
        with self._lock:
            if not self._readings:
                return MemoryPeak(None, None, 0, "not measured: no /proc to read (Linux only)")
            rss = max(self._rss, self._hwm)
            how = (
                f"peak resident memory of the server's processes over {self._readings} reading(s) a "
                f"{self.interval_s:g} s apart (the kernel's high-water mark where one process held more)"
            )
            if self._gpu is not None:
                how += "; GPU memory of those processes by nvidia-smi"
            return MemoryPeak(rss, self._gpu, self._readings, how)
