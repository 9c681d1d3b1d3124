"""Helpers for the sandbox tests: small limits, and what a host check looks at."""

from __future__ import annotations

from evalsuite.sandbox import Limits
from evalsuite.sandbox.isolation import STATE_DIR, UID_BASE, UID_COUNT, process_uids

SMALL = Limits(wall_s=3.0, memory_mb=256, processes=8, file_size_mb=1, open_files=32, output_bytes=1 << 20,
               scratch_mb=8)


def sandbox_processes() -> list[tuple[int, int]]:
    """(pid, uid) of every process running under a sandbox uid (real, effective or saved)."""
    sandbox = range(UID_BASE, UID_BASE + UID_COUNT)
    return [(pid, uids[0]) for pid, uids in process_uids() if any(u in sandbox for u in uids)]


def job_dirs() -> set[str]:
    return {p.name for p in STATE_DIR.glob("job-*")} if STATE_DIR.exists() else set()


