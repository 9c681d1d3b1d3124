"""One writer per run folder: an advisory lock that a process holds while it writes a run.

Two `evalsuite run` processes on the same target and task would both ask the
endpoint for every missing sample (the store keeps one record of each, but
the endpoint does the work twice).  So the process that opens a run for
writing takes `fcntl.flock` on `writer.lock` in the run folder and keeps it
until it closes the run; a second process is refused at once (RunBusyError,
exit 5) with a sentence naming the holder's pid and command line, read from
the lock file, before it asks the endpoint for any sample.

The kernel drops the lock when its holder exits, however it exits (`kill -9`
included), so a lock is never stale and nothing has to be cleaned up; the
file itself stays (deleting it would let two processes lock two different
files).  Within one process the lock is shared: a library caller that opens
the same run twice is one writer.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from evalsuite.errors import RunBusyError, writing

LOCK = "writer.lock"

_held: dict[tuple[int, int], list[int]] = {}  # (device, inode) of a lock file -> [fd, holders in this process]
_guard = threading.Lock()


def command_line() -> str:
    """This process's command line as a user would type it again (`python -m evalsuite run ...`)."""
    try:
        argv = Path("/proc/self/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        return shlex.join(a.decode(errors="replace") for a in argv)
    except OSError:
        return shlex.join([sys.executable, *sys.argv])


class WriterLock:
    """The writer lock of one run folder, held from `acquire` until `release` (or this process's exit)."""

    def __init__(self, path: Path, key: tuple[int, int]):
        self.path = path
        self._key: tuple[int, int] | None = key

    @classmethod
    def acquire(cls, folder: Path) -> WriterLock:
        """Take the run folder's writer lock, or raise RunBusyError naming the process that has it."""
        path = folder / LOCK
        with writing(path, "create the writer lock"):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        kept = False
        try:
            stat = os.fstat(fd)
            key = (stat.st_dev, stat.st_ino)
            with _guard:
                if key in _held:  # this process writes the run already
                    _held[key][1] += 1
                    return cls(path, key)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise RunBusyError(_busy(folder, _holder(fd))) from None
                with writing(path, "write the writer lock"):  # a full disk stops the run here, before any request
                    _describe(fd)
                _held[key] = [fd, 1]
                kept = True
                return cls(path, key)
        finally:
            if not kept:
                os.close(fd)  # releases the flock when it was taken

    def release(self) -> None:
        """Let go (idempotent); the lock file stays, emptied, for the next writer."""
        with _guard:
            key, self._key = self._key, None
            if key is None or key not in _held:
                return
            _held[key][1] -= 1
            if _held[key][1] > 0:
                return
            fd = _held.pop(key)[0]
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)  # closing the last descriptor releases the flock

    @property
    def held(self) -> bool:
        return self._key is not None


def _describe(fd: int) -> None:
    """Write who holds the lock, for the sentence a refused process prints."""
    info = {"pid": os.getpid(), "host": socket.gethostname(), "command": command_line(), "since": time.time()}
    data = json.dumps(info).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _holder(fd: int) -> dict[str, Any]:
    """The holder's description; it writes it just after taking the lock, so an empty file is read again briefly."""
    for _ in range(20):
        try:
            data = os.pread(fd, 65536, 0)
            if data:
                info = json.loads(data)
                if isinstance(info, dict):
                    return info
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    return {}


def _busy(folder: Path, holder: dict[str, Any]) -> str:
    pid = holder.get("pid")
    who = f"process {pid}" if pid else "another process (it did not say which)"
    host = holder.get("host")
    if host and host != socket.gethostname():
        who += f" on host {host}"
    if holder.get("command"):
        who += f" ({holder['command']})"
    since = holder.get("since")
    if isinstance(since, (int, float)):
        who += f", since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}"
    stop = f"stop it (Ctrl-C, or `kill {pid}`; its finished samples are kept)" if pid else "stop it"
    return (
        f"{folder} is being written by {who}. Two writers would ask the endpoint for the same samples, so this "
        f"one stops here without asking for any. Wait for it to finish, or {stop}, then re-run this command "
        "to resume."
    )
