"""Sandbox fixtures: small limits, a uid block of this test process's own, and a host check after every test."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import SMALL, job_dirs, sandbox_processes

from evalsuite.sandbox import Sandbox, detect_isolation
from evalsuite.sandbox.isolation import STATE_DIR, reserve_uid_block


@pytest.fixture(scope="session")
def isolation() -> str:
    if os.geteuid() != 0:
        pytest.skip("the sandbox tests run as root (as in CI): they check the uid drop")
    return detect_isolation()


@pytest.fixture(scope="session")
def uid_block(isolation: str) -> range:
    """Every sandbox in this process runs in this block, so the host check counts only our own programs."""
    return reserve_uid_block()


@pytest.fixture(scope="session")
def sandbox(isolation: str, uid_block: range) -> Sandbox:
    return Sandbox(limits=SMALL)


@pytest.fixture
def namespaces(isolation: str) -> None:
    if isolation != "namespaces":
        pytest.skip(f"needs namespace isolation; this machine gives '{isolation}'")


@pytest.fixture(autouse=True)
def host_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test: none of our sandbox processes alive, no job folder of ours left; this process still here."""
    block = request.getfixturevalue("uid_block") if os.geteuid() == 0 else range(0)
    before = job_dirs()
    yield
    deadline = time.monotonic() + 60.0  # killed processes are gone at once on an idle machine; a loaded one lags
    while sandbox_processes(block) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox_processes(block) == [], "a sandboxed process outlived its run"
    assert {d for d in job_dirs() - before if _ours(d, block)} == set(), "a job folder was not deleted"
    assert Path(f"/proc/{os.getpid()}").exists()


def _ours(job: str, block: range) -> bool:
    """A job folder's box belongs to the uid that ran it; other evaluators' runs are not ours to check."""
    try:
        return (STATE_DIR / job / "box").stat().st_uid in block
    except OSError:
        return False
