"""Sandbox fixtures: small limits, a uid block of this test process's own, root's sandbox and a user's, and a
host check after every test.

Tests that take `sandbox` run twice: against root's sandbox (as CI runs) and
against the sandbox an unprivileged user gets (a user namespace), driven
through `as_user.UserSandbox` from this root process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from as_user import STARTED, NoUserSandbox, UserSandbox, start_user, user_namespaces_work
from sandbox_helpers import SMALL, job_dirs, sandbox_processes

from evalsuite.sandbox import Sandbox, detect_isolation
from evalsuite.sandbox.isolation import STATE_DIR, reserve_uid_block


@pytest.fixture(scope="session")
def isolation() -> str:
    if os.geteuid() != 0:
        pytest.skip("the sandbox tests run as root (as in CI): they check the uid drop and drop to other users")
    return detect_isolation()


@pytest.fixture(scope="session")
def uid_block(isolation: str) -> range:
    """Every sandbox in this process runs in this block, so the host check counts only our own programs."""
    return reserve_uid_block()


@pytest.fixture(scope="session")
def user_sandbox(isolation: str) -> Iterator[UserSandbox]:
    try:
        user = start_user(limits=SMALL)
    except NoUserSandbox as exc:
        if user_namespaces_work():
            pytest.fail(f"user namespaces work for an unprivileged user here, yet the sandbox refused one: {exc}")
        pytest.skip(f"this kernel refuses unprivileged users a user namespace, so they get no sandbox: {exc}")
    yield user
    user.close()


@pytest.fixture(scope="session", params=["root", "user"])
def sandbox(request: pytest.FixtureRequest, isolation: str, uid_block: range) -> Any:
    """Root's sandbox, then an unprivileged user's (both with SMALL limits)."""
    if request.param == "root":
        return Sandbox(limits=SMALL)
    return request.getfixturevalue("user_sandbox")


@pytest.fixture
def owner(sandbox: Any) -> int:
    """The uid of the evaluator the sandbox protects: root, or the user."""
    return sandbox.uid if isinstance(sandbox, UserSandbox) else 0


@pytest.fixture
def evaluator_pid(sandbox: Any) -> int:
    """The process that runs the sandbox: this test process, or the user's server."""
    return sandbox.pid if isinstance(sandbox, UserSandbox) else os.getpid()


@pytest.fixture
def home(sandbox: Any, tmp_path: Path) -> Path:
    """The evaluating user's home (private, its own): the user's, or a root-owned stand-in for root's."""
    if isinstance(sandbox, UserSandbox):
        return sandbox.home
    folder = tmp_path / "home"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def live_programs(sandbox: Any, uid_block: range) -> Callable[[], list[int]]:
    """Lists the sandboxed programs' processes alive now."""
    if isinstance(sandbox, UserSandbox):
        return sandbox.programs
    return lambda: [pid for pid, _ in sandbox_processes(uid_block)]


@pytest.fixture
def namespaces(isolation: str) -> None:
    if isolation != "namespaces":
        pytest.skip(f"needs namespace isolation; this machine gives '{isolation}'")


@pytest.fixture(autouse=True)
def host_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test: none of our sandbox processes alive (root's uid block, every test user's processes but its
    server), no job folder of ours left; this process still here."""
    block = request.getfixturevalue("uid_block") if os.geteuid() == 0 else range(0)
    before = job_dirs()
    users_before = {job for user in STARTED for job in _user_jobs(user)}
    yield

    def alive() -> list[Any]:
        return [*sandbox_processes(block), *(p for user in STARTED for p in user.programs())]

    deadline = time.monotonic() + 60.0  # killed processes are gone at once on an idle machine; a loaded one lags
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive() == [], "a sandboxed process outlived its run"
    assert {d for d in job_dirs() - before if _ours(d, block)} == set(), "a job folder was not deleted"
    left = {job for user in STARTED for job in _user_jobs(user)} - users_before
    assert left == set(), "a user's job folder was not deleted"
    assert Path(f"/proc/{os.getpid()}").exists()


def _ours(job: str, block: range) -> bool:
    """A job folder's box belongs to the uid that ran it; other evaluators' runs are not ours to check."""
    try:
        return (STATE_DIR / job / "box").stat().st_uid in block
    except OSError:
        return False


def _user_jobs(user: UserSandbox) -> list[Path]:
    """Job folders in a test user's own state folder (only that user's runs write there)."""
    return sorted(Path(user.description["state"]).glob("job-*"))
