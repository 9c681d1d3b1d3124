"""A memory cgroup per run, so the limit bounds the run's total, not each process alone.

cgroup v2 is used where its memory controller can be delegated to a folder of
ours; otherwise the v1 memory hierarchy when we may create groups in it.  The
launcher moves the program's first process into the run's group before it
drops privileges; every child it forks stays there.  After the run the
group's counters tell whether the limit was reached (OOM kills, failed
charges), which is how a memory limit is told from any other crash, and the
group is removed.

A user other than root has run groups only where its own cgroup was
delegated to it (its folder is its own, as systemd does for user@UID.service
and for units with Delegate=yes): under that group in the v1 memory
hierarchy, or in cgroup v2 under that group once the evaluator has moved
itself into a leaf of it (a v2 group hands controllers to its children only
while no process sits in it).

Where none of this works (an unprivileged container, a user without a
delegated group), `detect` returns None and the sandbox falls back to
per-process address-space limits: a run then uses at most
`processes x memory_mb` (documented in docs/sandbox.md).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

GROUP = "evalsuite-sandbox"


@dataclass(frozen=True)
class Hierarchy:
    """Where run groups are created: `base` (ours) in a v1 or v2 hierarchy."""

    version: int
    base: Path

    @property
    def mode(self) -> str:
        return f"cgroup v{self.version}"

    def create(self, name: str, memory_mb: int, processes: int) -> RunGroup:
        path = self.base / name
        path.mkdir(mode=0o700, exist_ok=True)
        limit = str(int(memory_mb) << 20)
        if self.version == 2:
            (path / "memory.max").write_text(limit)
            _try_write(path / "memory.swap.max", "0")
            _try_write(path / "memory.oom.group", "1")
            _try_write(path / "pids.max", str(processes + 1))
        else:
            (path / "memory.limit_in_bytes").write_text(limit)
            _try_write(path / "memory.memsw.limit_in_bytes", limit)
        return RunGroup(self.version, path)


@dataclass(frozen=True)
class RunGroup:
    """One run's memory group."""

    version: int
    path: Path

    @property
    def procs(self) -> str:
        return str(self.path / "cgroup.procs")

    def limit_hit(self) -> bool:
        """Whether the run reached its memory limit: an OOM kill or a refused charge."""
        if self.version == 2:
            events = _counters(self.path / "memory.events")
            return events.get("oom_kill", 0) > 0 or events.get("oom", 0) > 0 or events.get("max", 0) > 0
        oom = _counters(self.path / "memory.oom_control")
        failcnt = _read_int(self.path / "memory.failcnt")
        return oom.get("oom_kill", 0) > 0 or failcnt > 0

    def peak_kb(self) -> int:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        return _read_int(self.path / name) // 1024

    def remove(self, timeout_s: float = 5.0) -> None:
        """Kill whatever is left in the group and delete it."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.version == 2:
                _try_write(self.path / "cgroup.kill", "1")
            try:
                pids = [int(p) for p in Path(self.procs).read_text().split()]
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)


def _try_write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _counters(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                out[parts[0]] = int(parts[1])
    except OSError:
        pass
    return out


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fstype, options) of every cgroup mount."""
    out = []
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                out.append((parts[1], parts[2], parts[3]))
    except OSError:
        pass
    return out


def _own_path(version: int, controller: str = "memory") -> str:
    """This process's group path in the v2 (`0::`) or the v1 `controller` hierarchy."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        num, controllers, path = line.split(":", 2)
        if version == 2 and num == "0" and controllers == "":
            return path
        if version == 1 and controller in controllers.split(","):
            return path
    return "/"


def _v2(mount: str) -> Hierarchy | None:
    """Our folder at the top of a v2 hierarchy with memory delegated to it (the top is exempt from
    the no-internal-processes rule, so enabling the controller there works while we run)."""
    root = Path(mount)
    if "memory" not in (root / "cgroup.controllers").read_text().split():
        return None
    base = root / GROUP
    base.mkdir(mode=0o700, exist_ok=True)
    if "memory" not in (root / "cgroup.subtree_control").read_text().split():
        (root / "cgroup.subtree_control").write_text("+memory")
    if "memory" not in (base / "cgroup.subtree_control").read_text().split():
        wanted = "+memory +pids" if "pids" in (base / "cgroup.controllers").read_text().split() else "+memory"
        (base / "cgroup.subtree_control").write_text(wanted)
    return Hierarchy(2, base)


def _v2_delegated(mount: str) -> Hierarchy | None:
    """Our folder in this process's own v2 group when that group was delegated to this user (see module doc)."""
    root = Path(mount)
    own = root / _own_path(2).lstrip("/")
    if own == root or own.stat().st_uid != os.geteuid():
        return None
    if "memory" not in (own / "cgroup.controllers").read_text().split():
        return None
    wanted = "+memory +pids" if "pids" in (own / "cgroup.controllers").read_text().split() else "+memory"
    if "memory" not in (own / "cgroup.subtree_control").read_text().split():
        leaf = own / "evalsuite-evaluator"
        leaf.mkdir(mode=0o755, exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
        (own / "cgroup.subtree_control").write_text(wanted)  # refused (EBUSY) while other processes sit in `own`
    base = own / GROUP
    base.mkdir(mode=0o700, exist_ok=True)
    if "memory" not in (base / "cgroup.subtree_control").read_text().split():
        (base / "cgroup.subtree_control").write_text(wanted)
    return Hierarchy(2, base)


def _v1(mount: str) -> Hierarchy | None:
    """Our folder under this process's own group of the v1 memory hierarchy (so outer limits still apply)."""
    own = Path(mount) / _own_path(1).lstrip("/")
    base = own / GROUP
    base.mkdir(mode=0o700, exist_ok=True)
    if not (base / "memory.limit_in_bytes").exists():
        return None
    return Hierarchy(1, base)


@cache
def detect() -> Hierarchy | None:
    """The hierarchy run groups go in, or None when this machine lets us use none (probed once)."""
    if os.environ.get("EVALSUITE_SANDBOX_NO_CGROUP") == "1":
        return None
    mounts = _mounts()
    v2 = _v2 if os.geteuid() == 0 else _v2_delegated
    candidates = [(m, v2) for m, kind, _ in mounts if kind == "cgroup2"]
    candidates += [(m, _v1) for m, kind, opts in mounts if kind == "cgroup" and "memory" in opts.split(",")]
    for mount, make in candidates:
        try:
            hierarchy = make(mount)
        except (OSError, ValueError):
            continue
        if hierarchy is not None and _works(hierarchy):
            return hierarchy
    return None


def _works(hierarchy: Hierarchy) -> bool:
    """Create and remove a probe group: the limit must be writable."""
    try:
        group = hierarchy.create(f"probe-{os.getpid()}", 64, 4)
    except OSError:
        return False
    group.remove()
    return True
