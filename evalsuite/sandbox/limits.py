"""Resource limits of one sandboxed execution, and what an execution produced."""

from __future__ import annotations

import math
import signal
from dataclasses import asdict, dataclass, field
from typing import Any

STARVED_AFTER = 4.0
"""A test or call still within its own wall time after this many times `wall_s` of wall time is starved.

Generous, so a CPU-bound program that gets only a fraction of a CPU (a
tenth of one, for the default limits) still reaches its CPU budget, which
is the verdict that does not depend on load, rather than a retry."""


@dataclass(frozen=True)
class Limits:
    """Per-execution limits.

    `cpu_s` is the budget that decides a time limit: CPU seconds of the whole
    run (every process of it), and of each call for functional programs.  CPU
    time does not depend on how busy the machine is.  `wall_s` bounds the
    program's own wall time, for programs that sleep or block: wall time less
    the time the run waited for a CPU, so it does not depend on load either;
    by default twice the CPU budget plus five seconds.  A run the machine
    starves of CPU is stopped after `4 x wall_s` of wall time without a
    verdict (see `ExecResult.starved`).  `memory_mb` bounds the whole run: a memory cgroup when
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
        """The limit on the program's own wall time: given, or twice the CPU budget plus five seconds."""
        return float(self.wall_s) if self.wall_s is not None else 2.0 * self.cpu_s + 5.0

    @property
    def starved_cap_s(self) -> float:
        """Wall time after which a run the machine kept from its CPU is stopped as starved (`STARVED_AFTER`)."""
        return STARVED_AFTER * self.effective_wall_s

    @property
    def rlimit_cpu_s(self) -> int:
        """RLIMIT_CPU of each process: whole seconds above the budget (the executor enforces the exact budget)."""
        return int(math.ceil(self.cpu_s)) + 1

    def as_launcher_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cpu_s"] = self.rlimit_cpu_s
        out["wall_s"] = self.effective_wall_s
        out["backstop_s"] = self.starved_cap_s + 1.0  # the launcher's alarm, should the executor not stop the run
        return out


@dataclass
class ExecResult:
    """What one execution did.

    `exit_code` is the program's real wait status: negative for a signal (-6:
    SIGABRT, -9: SIGKILL).  `cpu_exceeded` and `memory_exceeded` come from
    the kernel's accounting (CPU seconds, the cgroup's OOM kills or peak),
    never from anything the program printed or the code it exited with.
    `calls` holds the functional calls' replies as the executor accepted them.
    `timed_out`: its own wall time (wall less its wait for a CPU) ran out, so
    it slept or blocked: a time limit.  `starved`: stopped while that time
    was still within the limit, because the machine gave it no CPU (or a
    backstop fired): no verdict.  `starved_s`: the run's wait for a CPU.
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
    starved: bool = False
    starved_s: float = 0.0

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
    def memory_error(self) -> bool:
        """The run failed because it reached its memory limit (kernel accounting, not the program's word)."""
        return self.memory_exceeded and self.exit_code != 0
