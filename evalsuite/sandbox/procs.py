"""What the kernel says about a run's processes: which they are and their CPU time; and killing them.

A run's processes are found three ways, by level: its own uid (the root
levels), the process tree under the launcher (a user namespace, whose pid
namespace keeps every orphan inside it), or the launcher's session (`none`).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator

_TICK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int, tid: int | None = None) -> list[str] | None:
    """/proc/PID/stat (or a thread's, /proc/PID/task/TID/stat) after the command name: state, ppid, pgrp, ..."""
    try:
        with open(f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


def _pids() -> Iterator[int]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            yield int(entry.name)


def process_uids() -> Iterator[tuple[int, tuple[int, ...]]]:
    """(pid, (real, effective, saved uid)) of every process visible in /proc."""
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        yield pid, tuple(int(u) for u in line.split()[1:4])
                        break
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue


def processes_of(uid: int) -> list[int]:
    """Pids whose real, effective or saved uid is `uid`."""
    return [pid for pid, uids in process_uids() if uid in uids]


def session_members(sid: int) -> list[int]:
    """Pids of the processes in session `sid` (the `none` level has no uid of its own to look for)."""
    out = []
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields and len(fields) > 3 and fields[3] == str(sid):
            out.append(pid)
    return out


def descendants(root: int, min_depth: int = 1) -> list[int]:
    """Pids at least `min_depth` generations below `root` (its children are depth 1), from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(pid)
    out, level = [], [root]
    for depth in range(1, 1 << 16):
        level = [child for parent in level for child in children.get(parent, ())]
        if not level:
            break
        if depth >= min_depth:
            out += level
    return out


def sweep(find: Callable[[], list[int]], timeout_s: float = 5.0) -> list[int]:
    """SIGKILL whatever `find` returns until it returns nothing; returns pids still there at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        pids = find()
        if not pids:
            return []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            return find()
        time.sleep(0.002)


def sweep_uid(uid: int, timeout_s: float = 5.0) -> list[int]:
    """SIGKILL every process of `uid` until none is left; returns pids still there at the timeout."""
    return sweep(lambda: processes_of(uid), timeout_s)


def cpu_of(pids: list[int]) -> float:
    """CPU seconds of these processes and of the children they have reaped (user + system)."""
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields and len(fields) > 14:
            total += sum(int(x) for x in fields[11:15])
    return total / _TICK
