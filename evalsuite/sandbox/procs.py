"""What the kernel says about a run's processes: which they are and their CPU time; and killing them."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator


def process_uids() -> Iterator[tuple[int, tuple[int, ...]]]:
    """(pid, (real, effective, saved uid)) of every process visible in /proc."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        yield int(entry.name), tuple(int(u) for u in line.split()[1:4])
                        break
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue


def processes_of(uid: int) -> list[int]:
    """Pids whose real, effective or saved uid is `uid`."""
    return [pid for pid, uids in process_uids() if uid in uids]


def sweep_uid(uid: int, timeout_s: float = 5.0) -> list[int]:
    """SIGKILL every process of `uid` until none is left; returns pids still there at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        pids = processes_of(uid)
        if not pids:
            return []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            return processes_of(uid)
        time.sleep(0.002)


_TICK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


def cpu_of(pids: list[int]) -> float:
    """CPU seconds of these processes and of the children they have reaped (user + system)."""
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields and len(fields) > 14:
            total += sum(int(x) for x in fields[11:15])
    return total / _TICK


def session_members(sid: int) -> list[int]:
    """Pids of the processes in session `sid` (the `none` level has no uid of its own to look for)."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and len(fields) > 3 and fields[3] == str(sid):
                out.append(int(entry.name))
    return out
