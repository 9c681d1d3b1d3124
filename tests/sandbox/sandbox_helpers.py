"""Helpers for the sandbox tests: small limits, and what a host check looks at."""

from __future__ import annotations

from evalsuite.sandbox import Limits
from evalsuite.sandbox.isolation import STATE_DIR
from evalsuite.sandbox.procs import process_uids

SMALL = Limits(
    cpu_s=2.0, wall_s=4.0, memory_mb=256, processes=8, file_size_mb=1, open_files=32, output_bytes=1 << 20, scratch_mb=8
)

CHILDREN = (
    "import os, time\npids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
    "        try:\n            b = bytearray(%d << 20)\n        except MemoryError:\n            os._exit(3)\n"
    "        for i in range(0, len(b), 4096): b[i] = 1\n        time.sleep(1.0)\n        os._exit(0)\n"
    "    pids.append(pid)\n"
    "codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]\nprint(codes)\n"
    "raise SystemExit(0 if all(c == 0 for c in codes) else 1)\n"
)
"""Four children of %d MiB each, held a second: a memory group stops them together."""


def sandbox_processes(uids: range) -> list[tuple[int, int]]:
    """(pid, uid) of every process running under one of `uids` (real, effective or saved): this test
    process's own reserved block, so sandboxes that other evaluators run on the machine never count."""
    return [(pid, next(u for u in ids if u in uids)) for pid, ids in process_uids() if any(u in uids for u in ids)]


def job_dirs() -> set[str]:
    return {p.name for p in STATE_DIR.glob("job-*")} if STATE_DIR.exists() else set()
