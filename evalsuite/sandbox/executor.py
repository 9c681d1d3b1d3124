"""Run untrusted Python programs, one process tree per execution, many in a bounded pool.

`Sandbox.run` takes a `Program` (source, stdin, or functional calls) and
returns an `ExecResult`.  Per execution: a uid of its own, a job folder
(deleted afterwards) holding the program read-only, the launcher in a new
session, real pipes read with caps so a flood cannot exhaust our memory, a
wall-clock limit enforced by the launcher with a backstop here that kills
the whole process group, and a sweep of the uid afterwards so nothing the
program started survives it.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Sequence

from evalsuite.sandbox.isolation import (
    LAUNCHER,
    Isolation,
    Slot,
    acquire_slot,
    detect_isolation,
    interpreter,
    state_dir,
    sweep_uid,
    system_binds,
)
from evalsuite.sandbox.limits import ExecResult, Limits

RUNNER = Path(__file__).with_name("runner.py")
BACKSTOP_S = 3.0  # beyond the launcher's own wall limit, before we kill the group ourselves


@dataclass(frozen=True)
class Program:
    """One execution.  `script`: run `source` with `stdin`.  `functional`: call `fn_name` once per entry of `calls`.

    Each call is a list of arguments, each argument a JSON text (LiveCodeBench's
    functional input is one JSON value per line).
    """

    source: str
    mode: Literal["script", "functional"] = "script"
    stdin: bytes = b""
    fn_name: str | None = None
    calls: tuple[tuple[str, ...], ...] = ()
    call_timeout_s: float = 6.0


@dataclass
class Sandbox:
    """Executor for untrusted programs; `isolation` defaults to the best this machine allows."""

    limits: Limits = field(default_factory=Limits)
    isolation: Isolation | None = None
    python: str | None = None

    def __post_init__(self) -> None:
        if self.isolation is None:
            self.isolation = detect_isolation()
        if self.python is None:
            self.python = interpreter(self.isolation)
        self._runner_source = RUNNER.read_bytes()

    def describe(self) -> dict[str, Any]:
        """Which protections are active, for run records and reports."""
        network = {"namespaces": "network namespace (no interfaces up)", "uid": "audit hook", "none": "audit hook"}
        return {
            "isolation": self.isolation,
            "network": network[self.isolation or "none"],
            "unprivileged_uid": self.isolation in ("namespaces", "uid"),
            "python": self.python,
            "limits": self.limits.as_launcher_dict(),
        }

    def map(self, programs: Sequence[Program], *, workers: int | None = None) -> list[ExecResult]:
        """Run many programs, at most `workers` at once (default: one per CPU); results in input order."""
        workers = max(1, workers or os.cpu_count() or 1)
        if workers == 1 or len(programs) <= 1:
            return [self.run(p) for p in programs]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as pool:
            return list(pool.map(self.run, programs))

    def run(self, program: Program, limits: Limits | None = None) -> ExecResult:
        """Execute one program; never raises for anything the program does."""
        limits = limits or self.limits
        if program.mode == "functional":
            limits = limits.for_calls(len(program.calls), program.call_timeout_s)
        slot = acquire_slot() if self.isolation != "none" else None
        job = Path(tempfile.mkdtemp(prefix="job-", dir=state_dir()))
        leftovers: list[int] = []
        try:
            result = self._run_in(job, slot, program, limits)
        finally:
            leftovers = sweep_uid(slot.uid) if slot else []
            shutil.rmtree(job, ignore_errors=True)
            if slot is not None and not leftovers:
                slot.release()  # a uid with survivors stays locked until this process exits
        result.leftover_pids = leftovers
        return result

    def _prepare(self, job: Path, slot: Slot | None, program: Program) -> tuple[list[str], dict[str, str], str]:
        box = job / "box"
        box.mkdir()
        (job / "root").mkdir()
        (box / "runner.py").write_bytes(self._runner_source)
        (box / "solution.py").write_text(program.source, encoding="utf-8")
        if program.mode == "functional":
            spec = {"fn_name": program.fn_name, "calls": [list(c) for c in program.calls],
                    "timeout_s": program.call_timeout_s}
            (box / "calls.json").write_text(json.dumps(spec), encoding="utf-8")
        os.chmod(job, 0o711)
        os.chmod(box, 0o755)
        for f in box.iterdir():
            os.chmod(f, 0o644)
        inside = "/box" if self.isolation == "namespaces" else str(box)
        workdir = job / "work"
        workdir.mkdir(mode=0o700)
        if slot is not None:
            os.chown(workdir, slot.uid, slot.gid)
        argv = [self.python or sys.executable, "-S", "-P", "-B", f"{inside}/runner.py", program.mode,
                f"{inside}/solution.py"]
        if program.mode == "functional":
            argv.append(f"{inside}/calls.json")
        home = "/tmp" if self.isolation == "namespaces" else str(workdir)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8"}
        if self.isolation != "namespaces":
            env["EVALSUITE_NETGUARD"] = "1"
        return argv, env, str(workdir)

    def _run_in(self, job: Path, slot: Slot | None, program: Program, limits: Limits) -> ExecResult:
        argv, env, workdir = self._prepare(job, slot, program)
        status_r, status_w = os.pipe()
        cfg = {
            "isolation": self.isolation, "status_fd": status_w, "root": str(job / "root"), "box": str(job / "box"),
            "binds": system_binds(), "uid": slot.uid if slot else -1, "gid": slot.gid if slot else -1,
            "drop": slot is not None, "workdir": workdir, "limits": limits.as_launcher_dict(),
            "argv": argv, "env": env,
        }
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(LAUNCHER), json.dumps(cfg)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=(status_w,), start_new_session=True, env={}, cwd=str(job),
            )
        finally:
            os.close(status_w)
        pump = _Pump(proc, program.stdin, limits, slot)
        pump.run(deadline=started + limits.wall_s + BACKSTOP_S)
        with os.fdopen(status_r, "rb") as fh:
            lines = [json.loads(x) for x in fh.read().splitlines() if x.strip().startswith(b"{")]
        report: dict[str, Any] = {}
        for line in lines:
            report.update(line)
        exit_code = report.get("exit")
        cpu_s = float(report.get("cpu_s", 0.0))
        return ExecResult(
            exit_code=exit_code,
            stdout=bytes(pump.stdout),
            stderr=bytes(pump.stderr),
            wall_s=float(report.get("wall_s", time.monotonic() - started)),
            cpu_s=cpu_s,
            maxrss_kb=int(report.get("maxrss_kb", 0)),
            timed_out=bool(report.get("timed_out")) or pump.backstop_fired,
            cpu_exceeded=exit_code == -signal.SIGXCPU
            or (exit_code == -signal.SIGKILL and cpu_s >= limits.effective_cpu_s - 1.05),
            output_exceeded=pump.output_exceeded,
            setup_error=report.get("setup_error"),
            isolation=str(self.isolation),
        )


class _Pump:
    """Feeds stdin and drains stdout/stderr with caps until the launcher and its pipes are done."""

    def __init__(self, proc: subprocess.Popen[bytes], stdin: bytes, limits: Limits, slot: Slot | None) -> None:
        self.proc, self.limits, self.slot = proc, limits, slot
        self.pending = memoryview(stdin)
        self.stdout, self.stderr = bytearray(), bytearray()
        self.output_exceeded = self.backstop_fired = False

    def kill_all(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.slot is not None:
            sweep_uid(self.slot.uid)

    def _exited(self) -> bool:
        """Whether the launcher has exited, without reaping it (its pid stays our process group's id)."""
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def run(self, deadline: float) -> None:
        sel = selectors.DefaultSelector()
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        os.set_blocking(self.proc.stdin.fileno(), False)
        if self.pending:
            sel.register(self.proc.stdin, selectors.EVENT_WRITE)
        else:
            self.proc.stdin.close()
        sel.register(self.proc.stdout, selectors.EVENT_READ, self.stdout)
        sel.register(self.proc.stderr, selectors.EVENT_READ, self.stderr)
        exited = False
        while sel.get_map():
            now = time.monotonic()
            if now > deadline:
                self.backstop_fired = True
                self.kill_all()
                deadline = now + 5.0  # pipes close once everything is dead
            if not exited and self._exited():
                exited = True
                self.kill_all()  # the program ended: whatever it left behind goes now
            for key, _ in sel.select(timeout=0.05):
                if key.fileobj is self.proc.stdin:
                    self._write(sel)
                else:
                    self._read(sel, key)
        sel.close()
        if not self._exited():
            self.kill_all()
        self.proc.wait()

    def _write(self, sel: selectors.BaseSelector) -> None:
        assert self.proc.stdin
        try:
            n = os.write(self.proc.stdin.fileno(), self.pending[: 1 << 16])
            self.pending = self.pending[n:]
        except BrokenPipeError:
            self.pending = self.pending[:0]
        if not self.pending:
            sel.unregister(self.proc.stdin)
            self.proc.stdin.close()

    def _read(self, sel: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
        chunk = os.read(key.fd, 1 << 16)
        if not chunk:
            sel.unregister(key.fileobj)
            return
        buf: bytearray = key.data
        if buf is self.stdout:
            buf += chunk
            if len(buf) > self.limits.output_bytes:
                del buf[self.limits.output_bytes :]
                self.output_exceeded = True
                self.kill_all()
        elif len(buf) < self.limits.stderr_bytes:
            buf += chunk[: self.limits.stderr_bytes - len(buf)]

