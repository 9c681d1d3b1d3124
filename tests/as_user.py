"""The sandbox as an unprivileged user sees it, driven from a root test process (CI runs as root).

`UserSandbox` starts `user_server.py` under a uid of its own (never an
account, never a sandbox uid) with a private home, from a world-readable
copy of evalsuite's sandbox package and a Python any user may run, and
forwards `run` calls to it, so the same tests drive a root sandbox and a
user's.  `programs()` lists the processes the user's runs have left: any
process of that uid other than the server and the launchers and inits
under it.
"""

from __future__ import annotations

import atexit
import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from evalsuite.sandbox import Limits, Program
from evalsuite.sandbox.calls import decode_value
from evalsuite.sandbox.isolation import interpreter, state_dir
from evalsuite.sandbox.limits import ExecResult
from evalsuite.sandbox.procs import descendants, processes_of

USER_UIDS = range(62000, 62064)
PROBE_UID = 62100  # a short-lived probe's: outside every test user's range
PACKAGE = Path(__file__).resolve().parents[1] / "evalsuite"
STARTED: list[UserSandbox] = []
"""Every user sandbox this test process started, for the host check and the clean-up at exit."""
_held: list[int] = []


class NoUserSandbox(RuntimeError):
    """The user's server could not build the sandbox asked for (its message says why)."""


def lock_user_uid() -> int:
    """A test-user uid no other test process on this machine holds (a lock held until this process exits)."""
    import fcntl

    locks = state_dir() / "locks"
    for uid in USER_UIDS:
        fd = os.open(locks / f"test-user-{uid}.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _held.append(fd)
        return uid
    raise RuntimeError(f"every test-user uid in {USER_UIDS.start}..{USER_UIDS.stop - 1} is taken")


@cache
def user_tree() -> Path:
    """A world-readable copy of evalsuite's sandbox package and the server, for a user who cannot enter the
    project (a checkout under /root, a 0750 worktree)."""
    tree = Path(tempfile.mkdtemp(prefix="evalsuite-user-tree-"))
    (tree / "evalsuite").mkdir()
    shutil.copy(PACKAGE / "__init__.py", tree / "evalsuite" / "__init__.py")
    shutil.copytree(PACKAGE / "sandbox", tree / "evalsuite" / "sandbox", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(Path(__file__).with_name("user_server.py"), tree / "user_server.py")
    for folder, _, files in os.walk(tree):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return tree


def make_home(uid: int) -> Path:
    """A private home for `uid`, as a real account has."""
    home = Path(tempfile.mkdtemp(prefix=f"evalsuite-home-{uid}-"))
    os.chown(home, uid, uid)
    return home


@dataclass
class UserSandbox:
    """A sandbox built and run by `uid` (see module doc); `setting` is the sandbox setting it asks for."""

    uid: int
    home: Path
    limits: Limits
    setting: str = "auto"
    no_userns: bool = False
    env: dict[str, str] = field(default_factory=dict)
    cgroup: Path | None = None
    """A cgroup folder (delegated to `uid`) the server starts in, as a systemd user service would."""
    description: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        argv = [interpreter("uid"), "-I", str(user_tree() / "user_server.py")]
        argv += ["--no-userns"] if self.no_userns else []
        argv += [self.setting, json.dumps(asdict(self.limits))]
        self.proc = subprocess.Popen(
            argv,
            preexec_fn=self._become_user,
            env={"HOME": str(self.home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **self.env},
            cwd=self.home,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        first = self.proc.stdout.readline()
        if not first:
            stderr = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"the user's sandbox server exited: {stderr[-2000:]}")
        hello = json.loads(first)
        if not hello["ready"]:
            self.close()
            raise NoUserSandbox(f"{hello['error']}: {hello['message']}")
        self.description = hello["describe"]
        self._ids = itertools.count()
        self._waiting: dict[int, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _become_user(self) -> None:
        """In the server's process before it execs: join the delegated cgroup (as root), then drop to the user."""
        if self.cgroup is not None:
            (self.cgroup / "cgroup.procs").write_text("0")
        os.setgroups([])
        os.setresgid(self.uid, self.uid, self.uid)
        os.setresuid(self.uid, self.uid, self.uid)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def memory_mode(self) -> str:
        return str(self.description["memory"])

    def describe(self) -> dict[str, Any]:
        return self.description

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            answer = json.loads(line)
            with self._lock:
                waiting = self._waiting.pop(answer["id"])
            waiting.set_result(answer)
        with self._lock:
            for waiting in self._waiting.values():
                waiting.set_exception(RuntimeError("the user's sandbox server exited"))

    def run(self, program: Program, limits: Limits | None = None) -> ExecResult:
        """Run `program` in the user's sandbox; the ExecResult it got, as it got it."""
        given = asdict(program)
        given["stdin"] = base64.b64encode(program.stdin).decode()
        waiting: Future[dict[str, Any]] = Future()
        with self._lock:
            number = next(self._ids)
            self._waiting[number] = waiting
            request = {"id": number, "program": given, "limits": asdict(limits) if limits else None}
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        answer = waiting.result()
        if "error" in answer:
            raise RuntimeError(f"the user's sandbox failed: {answer['error']}")
        fields = answer["result"]
        fields["stdout"] = base64.b64decode(fields["stdout"])
        fields["stderr"] = base64.b64decode(fields["stderr"])
        fields["calls"] = decode_value(fields["calls"])
        return ExecResult(**fields)

    def map(self, programs: list[Program], *, workers: int = 2) -> list[ExecResult]:
        """Run many programs at once in the user's sandbox, as `Sandbox.map` does; results in input order."""
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(self.run, programs))

    def programs(self) -> list[int]:
        """Processes of this uid other than the server and the launchers and inits under it."""
        helpers = {self.pid, *descendants(self.pid, min_depth=1)} - set(descendants(self.pid, min_depth=3))
        return [pid for pid in processes_of(self.uid) if pid not in helpers]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_user(
    setting: str = "auto",
    *,
    no_userns: bool = False,
    limits: Limits | None = None,
    env: dict[str, str] | None = None,
    uid: int | None = None,
    cgroup: Path | None = None,
) -> UserSandbox:
    """A user sandbox under a fresh test uid (or `uid`); skips when this machine has no Python a user may run."""
    try:
        python = interpreter("uid")
    except RuntimeError as exc:
        pytest.skip(f"no Python an unprivileged user may run here ({exc})")
    check = subprocess.run([python, "-c", "import sys; print(sys.version_info >= (3, 11))"], capture_output=True)
    if check.stdout.strip() != b"True":
        pytest.skip(f"{python}, the Python an unprivileged user may run here, is older than 3.11")
    uid = uid if uid is not None else lock_user_uid()
    home, env = make_home(uid), env or {}
    try:
        user = UserSandbox(uid, home, limits or Limits(), setting=setting, no_userns=no_userns, env=env, cgroup=cgroup)
    except BaseException:  # a refused or failed server leaves nothing behind either
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(Path(env.get("TMPDIR", "/tmp")) / f"evalsuite-sandbox-{uid}", ignore_errors=True)
        raise
    STARTED.append(user)
    return user


def user_namespaces_work() -> bool:
    """Whether an unprivileged uid may create a user namespace here, asked of the kernel without evalsuite."""
    probe = "import ctypes\nraise SystemExit(ctypes.CDLL(None).unshare(0x10000000) != 0)"
    uid = PROBE_UID
    done = subprocess.run([interpreter("uid"), "-I", "-c", probe], user=uid, group=uid, extra_groups=[], check=False)
    return done.returncode == 0


LEVELS = ("namespaces", "uid", "none", "user")
"""The levels a gold check grades at: root's three, and an unprivileged user's (a user namespace)."""


def sandbox_at(level: str, limits: Limits) -> Any:
    """Root's sandbox at `level`, or (`user`) a user's, which the caller closes; skips a level this machine lacks."""
    if level != "user":
        from evalsuite.sandbox import Sandbox
        from evalsuite.sandbox.levels import SandboxRefused

        try:
            return Sandbox(limits=limits, isolation=level)  # type: ignore[arg-type]
        except SandboxRefused as exc:
            pytest.skip(str(exc))
    try:
        return start_user(limits=limits)
    except NoUserSandbox as exc:
        if user_namespaces_work():
            raise
        pytest.skip(f"this kernel refuses unprivileged users a user namespace: {exc}")


@atexit.register
def _clean_up() -> None:
    """Stop every user's server and remove its home and state folder, and the copied tree."""
    for user in STARTED:
        if user.proc.poll() is None:
            user.close()
        shutil.rmtree(user.home, ignore_errors=True)
        shutil.rmtree(user.description.get("state", "/nonexistent"), ignore_errors=True)
    if user_tree.cache_info().currsize:
        shutil.rmtree(user_tree(), ignore_errors=True)
