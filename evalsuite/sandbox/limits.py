"""Resource limits of one sandboxed execution, and what an execution produced."""

from __future__ import annotations

import math
import signal
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Limits:
    """Per-execution limits.

    `cpu_s` is the budget that decides a time limit: CPU seconds of the whole
    run (every process of it), and of each call for functional programs.  CPU
    time does not depend on how busy the machine is.  `wall_s` is only a
    backstop for programs that sleep or block; by default twice the CPU budget
    plus five seconds.  `memory_mb` bounds the whole run: a memory cgroup when
    the machine gives one, otherwise each process's address space, with
    `processes` of them at most (see docs/sandbox.md).
    """

    cpu_s: float = 6.0
    wall_s: float | None = None
    memory_mb: int = 1024
    file_size_mb: int = 16
    open_files: int = 64
    processes: int = 16
    output_bytes: int = 32 << 20
    stderr_bytes: int = 64 << 10
    scratch_mb: int = 64
    result_bytes: int = 16 << 20

    def __post_init__(self) -> None:
        for name in (
            "cpu_s",
            "memory_mb",
            "file_size_mb",
            "open_files",
            "processes",
            "output_bytes",
            "scratch_mb",
            "result_bytes",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"Sandbox limit '{name}' must be a positive number, got {value!r}.")
        if self.wall_s is not None and not self.wall_s > 0:
            raise ValueError(f"Sandbox limit 'wall_s' must be positive, got {self.wall_s!r}.")
        if self.processes < 2:
            raise ValueError("Sandbox limit 'processes' must be at least 2 (the interpreter itself counts).")

    @property
    def effective_wall_s(self) -> float:
        """The wall-clock backstop: given, or twice the CPU budget plus five seconds."""
        return float(self.wall_s) if self.wall_s is not None else 2.0 * self.cpu_s + 5.0

    @property
    def rlimit_cpu_s(self) -> int:
        """RLIMIT_CPU of each process: whole seconds above the budget (the executor enforces the exact budget)."""
        return int(math.ceil(self.cpu_s)) + 1

    def as_launcher_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cpu_s"] = self.rlimit_cpu_s
        out["wall_s"] = self.effective_wall_s
        return out


@dataclass
class ExecResult:
    """What one execution did.

    `exit_code` is the program's real wait status: negative for a signal (-6:
    SIGABRT, -9: SIGKILL).  `cpu_exceeded` and `memory_exceeded` come from
    the kernel's accounting (CPU seconds, the cgroup's OOM kills or peak),
    never from anything the program printed or the code it exited with.
    `calls` holds the functional calls' replies as the executor accepted them.
    """

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    wall_s: float
    cpu_s: float = 0.0
    maxrss_kb: int = 0
    timed_out: bool = False
    cpu_exceeded: bool = False
    memory_exceeded: bool = False
    output_exceeded: bool = False
    setup_error: str | None = None
    isolation: str = ""
    memory_mode: str = ""
    leftover_pids: list[int] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    protocol_error: str | None = None

    @property
    def signal_name(self) -> str | None:
        """SIGABRT, SIGKILL, ... when a signal ended the program."""
        if self.exit_code is None or self.exit_code >= 0:
            return None
        try:
            return signal.Signals(-self.exit_code).name
        except ValueError:
            return f"signal {-self.exit_code}"

    @property
    def wall_clock_only(self) -> bool:
        """The wall-clock backstop stopped the run while no CPU budget (the run's, or a call's) was spent.

        Not a time limit: the machine was too busy to give the program its
        CPU time, or the program waited (slept, blocked).  The checker retries
        such a run and, when it keeps happening, leaves the program ungraded.
        """
        if self.setup_error or self.cpu_exceeded or any(c.get("timeout") == "cpu" for c in self.calls):
            return False
        return self.timed_out or any(c.get("timeout") == "wall" for c in self.calls)

    @property
    def memory_error(self) -> bool:
        """The run failed because it reached its memory limit (kernel accounting, not the program's word)."""
        return self.memory_exceeded and self.exit_code != 0
