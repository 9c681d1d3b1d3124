"""What isolation this machine allows this user, where its sandbox state lives, and which uid a run gets.

Three levels, best first:

- `namespaces`: fresh network, mount, pid, IPC and UTS namespaces; a minimal
  read-only root holding only the system libraries, the interpreter and the
  job; a private size-limited /tmp.  Root also gives each run an
  unprivileged uid of its own; any other user builds the same inside a user
  namespace of the run's own that maps only its own uid.  No network at all
  (the namespace's loopback is down).
- `uid` (root without namespaces): an unprivileged uid, so root-only files
  and other users' processes are out of reach, but world-readable files are
  visible and world-writable folders writable; sockets blocked by an audit
  hook inside the interpreter, which a program using ctypes could bypass.
- `none`: only rlimits, the process group and the audit hook; used only when
  asked for (see levels.py).

Each concurrent root run holds its own uid (a file lock per uid, shared by
every root evaluator on the machine), so RLIMIT_NPROC bounds that run alone
and every process left with that uid after a run is certainly the run's.
"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from evalsuite.sandbox.procs import sweep_uid

Isolation = Literal["namespaces", "uid", "none"]

UID_BASE = 61000
UID_COUNT = 256
STATE_DIR = Path("/tmp/evalsuite-sandbox")  # root's; see state_path
LAUNCHER = Path(__file__).with_name("launcher.py")
LAUNCH_ENV = "EVALSUITE_LAUNCH"  # the launcher's configuration: in its environment, which only root can read
BLOCK = 16
_held_blocks: dict[int, int] = {}


@dataclass(frozen=True)
class Slot:
    """An unprivileged uid reserved for one run; the lock is released by `release`."""

    uid: int
    gid: int
    fd: int

    def release(self) -> None:
        os.close(self.fd)


class StateDirError(RuntimeError):
    """The sandbox's state folder cannot be trusted (another owner, group/world writable, a link)."""


def _trusted_dir(path: Path, mode: int) -> None:
    """Create `path` (ours, `mode`) or accept it only when it is a real folder we own that no one else can write."""
    try:
        path.mkdir(mode=mode)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise StateDirError(f"The sandbox state folder {path} is not a plain folder; {_way_out()}")
    if info.st_uid != os.geteuid():
        raise StateDirError(
            f"The sandbox state folder {path} belongs to uid {info.st_uid}, not to this user "
            f"(uid {os.geteuid()}); someone else may control it, so {_way_out()}"
        )
    if info.st_mode & 0o022:
        raise StateDirError(
            f"The sandbox state folder {path} is group- or world-writable "
            f"(mode {oct(info.st_mode & 0o777)}); {_way_out()}"
        )
    if info.st_mode & 0o777 != mode:
        os.chmod(path, mode)


def _way_out() -> str:
    """What a user can do about an untrusted state folder: root removes it; others may also move elsewhere."""
    if os.geteuid() == 0:
        return "remove it and retry."
    return "remove it if you can, or point TMPDIR at a folder of your own, and retry."


def _private_runtime_dir() -> Path | None:
    """$XDG_RUNTIME_DIR when it is a real folder of this user's that nobody else may enter (systemd's /run/user/UID)."""
    value = os.environ.get("XDG_RUNTIME_DIR")
    if not value or not os.path.isabs(value):
        return None
    try:
        info = os.lstat(value)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        return None
    return Path(value)


def state_path() -> Path:
    """Where this user's sandbox state lives.

    Root's is one folder for the machine, because every root evaluator
    takes its sandbox uids from the same locks.  Any other user gets a
    folder of its own (in $XDG_RUNTIME_DIR, else `evalsuite-sandbox-<uid>`
    in the temporary folder), so users never stand in each other's way.
    """
    if os.geteuid() == 0:
        return STATE_DIR
    runtime = _private_runtime_dir()
    if runtime is not None:
        return runtime / "evalsuite-sandbox"
    return Path(tempfile.gettempdir()) / f"evalsuite-sandbox-{os.geteuid()}"


def state_dir() -> Path:
    """Folder for job folders and uid locks: ours, and writable by no one else (refused otherwise)."""
    path = state_path()
    _trusted_dir(path, 0o711 if os.geteuid() == 0 else 0o700)
    _trusted_dir(path / "locks", 0o700)
    return path


def _lock(path: Path) -> int | None:
    """An exclusive, non-blocking lock on `path` (no links followed); the fd, or None when someone holds it."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def reserve_uid_block(wait_s: float = 30.0) -> range:
    """Reserve a block of BLOCK uids for this process alone (held until it exits), highest blocks first.

    A process that reserves a block knows that every process with one of those
    uids is its own, so its checks never count another evaluator's programs.
    """
    locks = state_dir() / "locks"
    deadline = time.monotonic() + wait_s
    while True:
        for start in range(UID_BASE + UID_COUNT - BLOCK, UID_BASE - 1, -BLOCK):
            fd = _lock(locks / f"block-{start}.lock")
            if fd is not None:
                _held_blocks[start] = fd
                return range(start, start + BLOCK)
        if time.monotonic() > deadline:
            raise RuntimeError(f"No free block of {BLOCK} sandbox uids after {wait_s:.0f} s.")
        time.sleep(0.05)


def _reserved_by_others(uid: int) -> bool:
    start = UID_BASE + (uid - UID_BASE) // BLOCK * BLOCK
    if start in _held_blocks:
        return False
    fd = _lock(state_dir() / "locks" / f"block-{start}.lock")
    if fd is None:
        return True
    os.close(fd)
    return False


def acquire_slot(wait_s: float = 30.0, uids: range | None = None) -> Slot:
    """Lock a free uid that no account uses, from `uids` (a reserved block) or from blocks nobody reserved."""
    locks = state_dir() / "locks"
    deadline = time.monotonic() + wait_s
    if uids is None and _held_blocks:  # a process that reserved blocks runs its programs in them
        pool: Sequence[int] = [u for start in sorted(_held_blocks) for u in range(start, start + BLOCK)]
    else:
        pool = uids if uids is not None else range(UID_BASE, UID_BASE + UID_COUNT)
    while True:
        for uid in pool:
            try:
                pwd.getpwuid(uid)
                continue  # a real account owns it
            except KeyError:
                pass
            if uids is None and not _held_blocks and _reserved_by_others(uid):
                continue
            fd = _lock(locks / f"uid-{uid}.lock")
            if fd is None:
                continue
            sweep_uid(uid)  # a crashed earlier holder may have left processes
            return Slot(uid=uid, gid=uid, fd=fd)
        if time.monotonic() > deadline:
            raise RuntimeError(f"No free sandbox uid in {min(pool)}..{max(pool)} after {wait_s:.0f} s.")
        time.sleep(0.05)


def _world_usable(path: str) -> bool:
    """True when an unprivileged user can reach and run `path` (others' x bit along the way)."""
    real = Path(os.path.realpath(path))
    for part in [*reversed(real.parents), real]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return False
        if not mode & 0o001:
            return False
    return bool(real.stat().st_mode & 0o004)


@cache
def interpreter(isolation: Isolation) -> str:
    """The Python that runs programs: this one's base interpreter when reachable there, else a system one."""
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    if isolation == "namespaces" or isolation == "none" or _world_usable(base):
        return base
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        if os.path.exists(candidate) and _world_usable(candidate):
            return os.path.realpath(candidate)
    raise RuntimeError(f"No Python interpreter usable by an unprivileged uid (tried {base} and /usr/bin/python3).")


def system_binds() -> list[str]:
    """Host paths mirrored read-only into the sandbox root: system libraries and the interpreter's prefix."""
    paths = ["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/localtime"]
    prefix = os.path.realpath(sys.base_prefix)
    if not any(prefix == p or prefix.startswith(p + "/") for p in paths):
        paths.append(prefix)
    return paths


def detect_isolation() -> Isolation:
    """The best level this machine allows this user (probed once per process; see `probe_isolation`)."""
    return probe_isolation()[0]


@cache
def probe_isolation() -> tuple[Isolation, str]:
    """(best level, why namespaces are not available or ""), by building a real sandbox for `pass` once.

    Root probes namespaces with a uid drop and falls back to `uid`; any other
    user probes a user namespace of its own and has nothing to fall back to.
    """
    root = os.geteuid() == 0
    read_fd, write_fd = os.pipe()
    job = state_dir() / f"probe-{os.getpid()}"
    (job / "root").mkdir(parents=True, exist_ok=True)
    (job / "box").mkdir(exist_ok=True)
    cfg = {
        "isolation": "namespaces",
        "userns": not root,
        "status_fd": write_fd,
        "root": str(job / "root"),
        "box": str(job / "box"),
        "binds": system_binds(),
        "uid": 65534 if root else os.geteuid(),
        "gid": 65534 if root else os.getegid(),
        "drop": root,
        "keep_keys": True,
        "workdir": "/",
        "limits": {
            "cpu_s": 5,
            "memory_mb": 512,
            "file_size_mb": 1,
            "open_files": 32,
            "processes": 8,
            "scratch_mb": 1,
            "wall_s": 10,
            "backstop_s": 10,
        },
        "argv": [interpreter("namespaces"), "-S", "-c", "pass"],
        "env": {},
    }
    lines: list[dict] = []
    try:
        with os.fdopen(read_fd, "rb") as status:
            try:
                subprocess.run(
                    [sys.executable, "-I", "-S", str(LAUNCHER)],
                    env={LAUNCH_ENV: json.dumps(cfg)},
                    pass_fds=(write_fd,),
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=20,
                    check=False,
                )
            finally:
                os.close(write_fd)
            lines = [json.loads(x) for x in status.read().splitlines() if x.strip()]
    except subprocess.TimeoutExpired:
        lines = [{"setup_error": "the probe did not finish within 20 s"}]
    finally:
        shutil.rmtree(job, ignore_errors=True)
    errors = [str(line["setup_error"]) for line in lines if "setup_error" in line]
    if any(line.get("exit") == 0 for line in lines) and not errors:
        return "namespaces", ""
    why = errors[0] if errors else "the probe program did not run"
    return ("uid" if root else "none"), why
