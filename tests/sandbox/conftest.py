"""Sandbox fixtures: small limits, and a host check after every test that nothing was left behind."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterator

import pytest

from evalsuite.sandbox import Limits, Sandbox, detect_isolation
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


@pytest.fixture(scope="session")
def isolation() -> str:
    if os.geteuid() != 0:
        pytest.skip("the sandbox tests run as root (as in CI): they check the uid drop")
    return detect_isolation()


@pytest.fixture(scope="session")
def sandbox(isolation: str) -> Sandbox:
    return Sandbox(limits=SMALL)


@pytest.fixture
def namespaces(isolation: str) -> None:
    if isolation != "namespaces":
        pytest.skip(f"needs namespace isolation; this machine gives '{isolation}'")


@pytest.fixture(autouse=True)
def host_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test: no sandbox process alive and no job folder left; this process is still here."""
    before = job_dirs()
    yield
    deadline = time.monotonic() + 2.0
    while sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox_processes() == [], "a sandboxed process outlived its run"
    assert job_dirs() - before == set(), "a job folder was not deleted"
    assert Path(f"/proc/{os.getpid()}").exists()
