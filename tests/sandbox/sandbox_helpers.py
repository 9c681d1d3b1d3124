"""Helpers for the sandbox tests: small limits, and what a host check looks at."""

from __future__ import annotations

import os

from evalsuite.sandbox import Limits
from evalsuite.sandbox.isolation import STATE_DIR, UID_BASE, UID_COUNT

SMALL = Limits(wall_s=3.0, memory_mb=256, processes=8, file_size_mb=1, open_files=32, output_bytes=1 << 20,
               scratch_mb=8)


def sandbox_processes() -> list[tuple[int, int]]:
    """(pid, uid) of every process running under a sandbox uid."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        uid = int(line.split()[1])
                        if UID_BASE <= uid < UID_BASE + UID_COUNT:
                            found.append((int(entry.name), uid))
                        break
        except OSError:
            continue
    return found


def job_dirs() -> set[str]:
    return {p.name for p in STATE_DIR.glob("job-*")} if STATE_DIR.exists() else set()


