"""What the kernel says about a run's processes: which they are, their CPU time, their wait for a CPU; and killing them.

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


def process_tree(root: int) -> dict[int, int]:
    """Every process below `root` with its depth (its children are 1; `root` itself is 0), from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(pid)
    depths, level = {root: 0}, [root]
    for depth in range(1, 1 << 16):
        level = [child for parent in level for child in children.get(parent, ()) if child not in depths]
        if not level:
            break
        depths.update((pid, depth) for pid in level)
    return depths


def descendants(root: int, min_depth: int = 1) -> list[int]:
    """Pids at least `min_depth` generations below `root`."""
    return [pid for pid, depth in process_tree(root).items() if depth >= min_depth]


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


def threads(pids: list[int]) -> dict[int, tuple[int, int, bool]]:
    """Per thread of these processes: (ns on a CPU, ns waiting for one, runnable now), by thread id.

    The first two fields of /proc/PID/task/TID/schedstat are the scheduler's
    own counts.  The wait is added when a wait ends, so a thread still
    waiting shows it only as being runnable (state R) without gaining CPU
    time; `StarvedClock` reads both.
    """
    out: dict[int, tuple[int, int, bool]] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                    on_cpu, waiting = (int(x) for x in fh.read().split()[:2])
            except (OSError, ValueError):
                continue
            fields = _stat_fields(pid, int(tid))
            out[int(tid)] = (on_cpu, waiting, fields is not None and fields[:1] == ["R"])
    return out


def run_queue_accounting() -> bool:
    """Whether this kernel counts run-queue waits (schedstat, CONFIG_SCHED_INFO)."""
    return os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat")


class StarvedClock:
    """Seconds of a run's wall time during which it was starved: some thread of it was runnable and got no CPU.

    Sampled by the executor.  Between two samples a thread was starved for
    the run-queue wait it gained, or, when it was runnable at both samples,
    for the part of the interval it did not spend on a CPU (a wait still
    under way is not in its count yet); the run counts as starved for the
    most starved thread's share, at most the time between the samples.  A
    program that sleeps, blocks or is stopped is not runnable and gains no
    wait, so its wall time stays its own.
    """

    def __init__(self, started: float) -> None:
        self.at = started
        self.seen: dict[int, tuple[int, int, bool]] = {}
        self.starved_s = 0.0

    def sample(self, pids: list[int], now: float) -> float:
        """Take a sample of the run's threads; returns the starved seconds so far."""
        interval = max(now - self.at, 0.0)
        worst = 0.0
        current = threads(pids)
        for tid, (on_cpu, waiting, runnable) in current.items():
            before = self.seen.get(tid, (0, 0, False))
            starved = (waiting - before[1]) / 1e9
            if runnable and before[2]:
                starved = max(starved, interval - (on_cpu - before[0]) / 1e9)
            worst = max(worst, starved)
        self.starved_s += min(max(worst, 0.0), interval)
        self.seen.update(current)
        self.at = now
        return self.starved_s
