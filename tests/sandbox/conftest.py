"""Sandbox fixtures: small limits, and a host check after every test that nothing was left behind."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterator

import pytest

from evalsuite.sandbox import Sandbox, detect_isolation
from sandbox_helpers import SMALL, job_dirs, sandbox_processes


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
