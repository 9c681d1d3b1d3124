"""Every user gets a sandbox of its own, or a refusal that says why: never a silent downgrade.

Users are test uids driven from this root process (`as_user`); "user
namespaces refused" is made real with a seccomp filter on the user's
process tree, as container runtimes refuse them.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from as_user import NoUserSandbox, UserSandbox, lock_user_uid, make_home, start_user
from sandbox_helpers import CHILDREN, SMALL

from evalsuite.sandbox import Program, Sandbox, cgroup
from evalsuite.sandbox.checker import Checker
from evalsuite.sandbox.isolation import STATE_DIR

STDIN_TEST = [{"input": "2\n", "output": "4\n", "testtype": "stdin"}]
DOUBLE = "print(int(input()) * 2)"


def test_a_second_user_grades_after_root_and_after_another_user(isolation: str) -> None:
    """Root has used the sandbox (its state folder exists, root's own); two users then grade, each with a state
    folder of its own that only it may enter."""
    assert Sandbox(limits=SMALL).run(Program("print(1)")).stdout == b"1\n"
    assert STATE_DIR.stat().st_uid == 0
    first, second = start_user(limits=SMALL), start_user(limits=SMALL)
    try:
        for user in (first, second):
            assert [o.outcome for o in Checker(user, timeout_s=2.0).run(DOUBLE, STDIN_TEST)] == ["passed"]  # type: ignore[arg-type]
            state = Path(user.describe()["state"])
            info = state.stat()
            assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (user.uid, 0o700), state
        assert len({STATE_DIR, Path(first.describe()["state"]), Path(second.describe()["state"])}) == 3
    finally:
        first.close()
        second.close()


def test_the_state_folder_is_in_the_users_runtime_folder_when_it_has_one(isolation: str) -> None:
    uid = lock_user_uid()
    runtime = make_home(uid)  # private and the user's own, as systemd makes /run/user/UID
    user = start_user(uid=uid, env={"XDG_RUNTIME_DIR": str(runtime)}, limits=SMALL)
    try:
        assert user.describe()["state"] == str(runtime / "evalsuite-sandbox")
        assert [o.outcome for o in Checker(user, timeout_s=2.0).run(DOUBLE, STDIN_TEST)] == ["passed"]  # type: ignore[arg-type]
    finally:
        user.close()
        shutil.rmtree(runtime, ignore_errors=True)


def test_a_state_folder_someone_else_took_is_refused_with_a_way_out(isolation: str) -> None:
    """Another account created the user's folder in /tmp first: the user is told, and TMPDIR is a way out."""
    uid = lock_user_uid()
    taken = Path(f"/tmp/evalsuite-sandbox-{uid}")
    shutil.rmtree(taken, ignore_errors=True)  # an earlier test user's with this uid
    taken.mkdir(mode=0o755)
    home = make_home(uid)
    try:
        with pytest.raises(NoUserSandbox, match=f"{taken} belongs to uid 0, not to this user.*TMPDIR"):
            UserSandbox(uid, home, SMALL)
        user = start_user(uid=uid, env={"TMPDIR": str(home)}, limits=SMALL)
        assert user.describe()["state"] == str(home / f"evalsuite-sandbox-{uid}")
        assert [o.outcome for o in Checker(user, timeout_s=2.0).run(DOUBLE, STDIN_TEST)] == ["passed"]  # type: ignore[arg-type]
        user.close()
    finally:
        taken.rmdir()
        shutil.rmtree(home, ignore_errors=True)


def test_without_user_namespaces_a_user_is_refused_with_the_reason_and_the_ways_out(isolation: str) -> None:
    with pytest.raises(NoUserSandbox) as refused:
        start_user(no_userns=True, limits=SMALL)
    message = str(refused.value)
    assert message.startswith("SandboxRefused: Model-written code was not run"), message
    assert "Operation not permitted" in message  # why: the kernel's own answer
    for way_out in ("user namespaces", "as root", "--sandbox none", 'sandbox = "none"'):
        assert way_out in message, way_out
    with pytest.raises(NoUserSandbox, match="'namespaces' was asked for, but the kernel refused"):
        start_user("namespaces", no_userns=True, limits=SMALL)
    with pytest.raises(NoUserSandbox, match="'uid' was asked for, but it needs root"):
        start_user("uid", limits=SMALL)


def test_an_explicit_none_runs_as_the_user_and_says_so(isolation: str) -> None:
    """The opt-out does what it says: the program runs as the user and can read the user's files."""
    user = start_user("none", no_userns=True, limits=SMALL)
    try:
        assert user.describe()["isolation"] == "none" and user.describe()["user_namespace"] is False
        (user.home / "note").write_text("mine")
        os.chown(user.home / "note", user.uid, user.uid)
        r = user.run(Program(f"import os\nprint(os.getuid(), open({str(user.home / 'note')!r}).read())"))
        assert r.stdout == f"{user.uid} mine\n".encode(), r.stderr
    finally:
        user.close()


@pytest.fixture
def delegated() -> Iterator[tuple[int, Path, int]]:
    """(uid, folder, cgroup version): a group in the memory controller's hierarchy delegated to a test uid the way
    systemd delegates one (the folder and its process files the user's own); skips where there is none to give."""
    mounts = cgroup._mounts()
    v1 = [m for m, kind, opts in mounts if kind == "cgroup" and "memory" in opts.split(",")]
    v2 = [m for m, kind, _ in mounts if kind == "cgroup2" and "memory" in Path(m, "cgroup.controllers").read_text()]
    if v1:
        parent, version, files = Path(v1[0]) / cgroup._own_path(1).lstrip("/"), 1, ["cgroup.procs", "tasks"]
    elif v2:
        parent, version, files = Path(v2[0]), 2, ["cgroup.procs", "cgroup.subtree_control", "cgroup.threads"]
        (parent / "cgroup.subtree_control").write_text("+memory")
    else:
        pytest.skip("no cgroup hierarchy here has the memory controller")
    uid = lock_user_uid()
    folder = parent / f"evalsuite-test-delegated-{uid}"
    folder.mkdir()
    try:
        for path in [folder, *(folder / name for name in files)]:
            os.chown(path, uid, uid)
        yield uid, folder, version
    finally:
        for below, _, _ in sorted(os.walk(folder), key=lambda entry: -len(entry[0])):
            os.rmdir(below)


def test_a_user_with_a_delegated_cgroup_gets_a_memory_group_per_run(delegated: tuple[int, Path, int]) -> None:
    """Four children of 100 MiB under a 256 MiB limit: the user's run group stops them together."""
    uid, folder, version = delegated
    user = start_user(uid=uid, cgroup=folder, limits=replace(SMALL, processes=8, cpu_s=5.0, wall_s=20.0))
    try:
        assert user.memory_mode == f"cgroup v{version}", user.describe()
        r = user.run(Program(CHILDREN % 100))
        assert r.exit_code != 0 and r.memory_error, (r.exit_code, r.stdout, r.stderr[-300:])
    finally:
        user.close()
