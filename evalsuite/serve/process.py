"""Start one server process on a free loopback port, wait for it to be healthy, stop it.

Used by targets that declare `serve` (a llama-server, `vllm serve` or
`python -m sglang.launch_server` command line with `{port}`) and by the
reference rig, so there is one way to serve.  A server that exits or never
answers its health check raises `ServeError` with the last lines of its log;
servers are stopped with SIGTERM, then SIGKILL, whatever happens in the
`with` body, and on Linux they die with the Python process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from evalsuite.blas import user_environ
from evalsuite.errors import EndpointError
from evalsuite.serve.memory import MemoryPeak, MemoryWatch

STOP_GRACE_S = 10.0
BIND_FAILURES = ("couldn't bind HTTP server socket", "Address already in use", "address already in use")
"""Log lines that mean the chosen port was taken before the server bound it: retry on a new one."""
BIND_RETRIES = 2


class ServeError(EndpointError):
    """A server the suite started did not come up (exit code 3: the endpoint, not the input)."""


@dataclass(frozen=True)
class ServerCommand:
    """What to run: argv with `{port}` in one or more arguments, extra environment, working folder."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    health_path: str = "/health"
    startup_timeout_s: float = 600.0

    def formatted(self, port: int) -> list[str]:
        """argv with the port filled in (only `{port}` is substituted; other braces are left alone)."""
        return [a.replace("{port}", str(port)) for a in self.argv]


@dataclass
class RunningServer:
    """A started, healthy server: what a client needs and what provenance records."""

    name: str
    base_url: str  # e.g. http://127.0.0.1:38113 (no /v1)
    model: str  # the served model name, when the command sets one ("" otherwise)
    args: list[str]  # the exact command line
    log_path: Path
    process: subprocess.Popen[bytes] = field(repr=False)
    cwd: Path | None = None  # where relative paths in args are taken from
    model_files: dict[str, str] = field(default_factory=dict)  # digests of its model files, once it serves a run
    memory: MemoryWatch | None = field(default=None, repr=False)  # reads its memory from start to stop

    @property
    def pid(self) -> int:
        return self.process.pid

    def memory_peak(self) -> MemoryPeak:
        """Its peak memory so far (the whole run once it is stopped)."""
        return self.memory.peak() if self.memory is not None else MemoryPeak(None, None, 0, "not measured")

    def stop(self) -> None:
        """Take the last memory reading, then stop the process (SIGTERM, then SIGKILL)."""
        if self.memory is not None:
            self.memory.stop()
        stop_server(self.process)


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    os.setsid()  # a Ctrl-C in the terminal reaches us, and we stop the server ourselves


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file ("(no log)" when unreadable)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_server(process: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to the server's process group, wait up to grace_s, then SIGKILL."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _model_name(args: Sequence[str]) -> str:
    for flag in ("--alias", "--served-model-name"):
        if flag in args[:-1]:
            return args[list(args).index(flag) + 1]
    return ""


def start(command: ServerCommand, log_dir: Path) -> RunningServer:
    """Launch the command on a free port, its output appended to `<log_dir>/<name>.log`."""
    port = free_port()
    args = command.formatted(port)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{command.name}.log"
    env = {**user_environ(), **command.env}
    with log_path.open("ab") as log:
        log.write(("\n$ " + " ".join(args) + "\n").encode())
        log.flush()
        try:
            process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=command.cwd,
                env=env,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            raise ServeError(f"Could not start the server for '{command.name}' ({args[0]}): {exc.strerror}.") from None
    return RunningServer(
        command.name,
        f"http://127.0.0.1:{port}",
        _model_name(args),
        args,
        log_path,
        process,
        command.cwd,
        memory=MemoryWatch(process.pid).start(),
    )


def wait_healthy(server: RunningServer, health_path: str = "/health", timeout_s: float = 600.0) -> None:
    """Poll the health path until 200; raise with the log's last lines if the process exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while True:
            code = server.process.poll()
            if code is not None:
                raise ServeError(
                    f"The server for '{server.name}' exited with code {code} before it was ready.\n"
                    f"Command: {' '.join(server.args)}\nLast lines of {server.log_path}:\n{tail(server.log_path)}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if client.get(server.base_url + health_path).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise ServeError(
                    f"The server for '{server.name}' was not healthy after {timeout_s:.0f} s.\n"
                    f"Command: {' '.join(server.args)}\nLast lines of {server.log_path}:\n{tail(server.log_path)}"
                )
            time.sleep(0.2)


@contextlib.contextmanager
def served(commands: Sequence[ServerCommand], log_dir: Path) -> Iterator[dict[str, RunningServer]]:
    """Start every command (all launched first, then each awaited), yield them by name, stop them all."""
    running: dict[str, RunningServer] = {}
    try:
        for command in commands:
            running[command.name] = start(command, log_dir)
        for command in commands:
            server = running[command.name]
            for attempt in range(BIND_RETRIES + 1):
                try:
                    wait_healthy(server, command.health_path, command.startup_timeout_s)
                    break
                except ServeError:
                    server.stop()
                    lost_port = any(m in tail(server.log_path, 5) for m in BIND_FAILURES)
                    if not lost_port or attempt == BIND_RETRIES:
                        raise
                    server = running[command.name] = start(command, log_dir)
        yield running
    finally:
        for server in running.values():
            server.stop()
