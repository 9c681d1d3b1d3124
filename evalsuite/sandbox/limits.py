"""Resource limits of one sandboxed execution, and what an execution produced."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Limits:
    """Per-execution limits.  `cpu_s` defaults to the wall limit rounded up plus one second.

    `processes` is RLIMIT_NPROC for the run's own uid (threads count too), so a
    fork bomb stops there; `memory_mb` is the address-space limit of each process.
    """

    wall_s: float = 6.0
    cpu_s: float | None = None
    memory_mb: int = 1024
    file_size_mb: int = 16
    open_files: int = 64
    processes: int = 16
    output_bytes: int = 32 << 20
    stderr_bytes: int = 64 << 10
    scratch_mb: int = 64

    def __post_init__(self) -> None:
        for name in ("wall_s", "memory_mb", "file_size_mb", "open_files", "processes", "output_bytes", "scratch_mb"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Sandbox limit '{name}' must be positive, got {getattr(self, name)!r}.")
        if self.processes < 2:
            raise ValueError("Sandbox limit 'processes' must be at least 2 (the interpreter itself counts).")

    @property
    def effective_cpu_s(self) -> int:
        return int(math.ceil(self.cpu_s if self.cpu_s is not None else self.wall_s)) + 1

    def as_launcher_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cpu_s"] = self.effective_cpu_s
        return out

    def for_calls(self, calls: int, per_call_s: float) -> Limits:
        """Limits for one process making `calls` timed calls (functional tests), plus two seconds to start."""
        return replace(self, wall_s=per_call_s * max(calls, 1) + 2.0, cpu_s=None)


@dataclass
class ExecResult:
    """What one execution did.  `exit_code` is negative for a signal (-9: SIGKILL)."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    wall_s: float
    cpu_s: float = 0.0
    maxrss_kb: int = 0
    timed_out: bool = False
    cpu_exceeded: bool = False
    output_exceeded: bool = False
    setup_error: str | None = None
    isolation: str = ""
    leftover_pids: list[int] = field(default_factory=list)

    @property
    def memory_error(self) -> bool:
        """The program ran out of its address space (the runner exits with a dedicated code)."""
        from evalsuite.sandbox.runner import EXIT_MEMORY

        return self.exit_code == EXIT_MEMORY
