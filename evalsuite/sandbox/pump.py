"""The executor's loop for one execution: pipes, the run's CPU and wall time, functional calls, backstops.

Feeds stdin and drains stdout/stderr with caps; reads the launcher's status
lines as they come; about twenty times a second measures the CPU time of
every process of the run (its uid at the root levels, the process tree
under the launcher in a user namespace, its session at `none`) and how long
the run waited for a CPU, and stops the run when it passes its CPU budget
(`cpu`), when its own wall time (wall less that wait) passes `wall_s`
(`wall`: it slept or blocked), or when the machine starved it past
`starved_cap_s` (`starved`); drives the functional-call protocol
(evalsuite/sandbox/calls.py), whose phases have the same three limits; and
kills everything at the backstop if the launcher itself overruns.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from typing import Any

from evalsuite.sandbox.calls import CallDriver
from evalsuite.sandbox.isolation import Slot
from evalsuite.sandbox.limits import Limits
from evalsuite.sandbox.procs import StarvedClock, cpu_of, process_tree, processes_of, session_members, sweep

TICK_S = 0.05


class Pump:
    """One execution's I/O and watchdog (see module doc)."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        stdin: bytes,
        limits: Limits,
        slot: Slot | None,
        status_fd: int,
        *,
        tree: bool = False,
    ) -> None:
        self.proc, self.limits, self.slot, self.tree = proc, limits, slot, tree
        self.pending = memoryview(stdin)
        self.stdout, self.stderr, self.status = bytearray(), bytearray(), bytearray()
        self.status_fd = status_fd
        self.output_exceeded = self.backstop_fired = False
        self.stopped_for: str | None = None
        self.cpu_seen = 0.0
        self.report: dict[str, Any] = {}
        self.driver: CallDriver | None = None
        self.req_fd = self.rep_fd = -1
        self.requests = bytearray()
        self.close_requests = False
        self.started = 0.0
        self.clock = StarvedClock(0.0)

    def attach_calls(self, driver: CallDriver, req_fd: int, rep_fd: int) -> None:
        self.driver, self.req_fd, self.rep_fd = driver, req_fd, rep_fd
        os.set_blocking(req_fd, False)

    def members(self, family: dict[int, int] | None = None) -> list[int]:
        """The program's processes: its uid's, those below init (launcher -> init -> program), or its session's.

        `family`: the launcher's process tree, when the caller has just read it."""
        if self.slot is not None:
            return processes_of(self.slot.uid)
        if self.tree:
            family = family if family is not None else process_tree(self.proc.pid)
            return [pid for pid, depth in family.items() if depth >= 2]
        return session_members(self.proc.pid)

    def measure(self, now: float) -> tuple[float, float]:
        """(CPU seconds of the program, seconds the run was starved of a CPU) so far.

        The launcher's and init's waits count as the run's: until the program
        starts they are all of it, and their setup is the machine's work."""
        family = process_tree(self.proc.pid)
        pids = self.members(family)
        cpu = cpu_of(pids)
        self.cpu_seen = max(self.cpu_seen, cpu)
        return cpu, self.clock.sample(sorted({*pids, *family}), now)

    def stop_program(self) -> None:
        """Kill the program's processes (init survives to report the real wait status) or, at `none`, the group."""
        if self.slot is not None or self.tree:
            sweep(self.members)
        else:
            self.kill_all()

    def kill_all(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.slot is not None or self.tree:
            sweep(self.members)

    def _exited(self) -> bool:
        """Whether the launcher has exited, without reaping it (its pid stays our process group's id)."""
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def run(self, started: float, deadline: float) -> None:
        self.started = started
        self.clock = StarvedClock(started)
        sel = selectors.DefaultSelector()
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        os.set_blocking(self.proc.stdin.fileno(), False)
        if self.pending:
            sel.register(self.proc.stdin, selectors.EVENT_WRITE, "stdin")
        else:
            self.proc.stdin.close()
        sel.register(self.proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(self.proc.stderr, selectors.EVENT_READ, "stderr")
        sel.register(self.status_fd, selectors.EVENT_READ, "status")
        if self.driver is not None:
            sel.register(self.rep_fd, selectors.EVENT_READ, "reply")
        exited, next_tick = False, 0.0
        try:
            while any(key.data in ("stdout", "stderr", "status") for key in sel.get_map().values()):
                now = time.monotonic()
                if now > deadline:
                    self.backstop_fired = True
                    self.kill_all()
                    deadline = now + 5.0  # pipes close once everything is dead
                if not exited and self._exited():
                    exited = True
                    self.kill_all()  # the program ended: whatever it left behind goes now
                if now >= next_tick and not exited and self.stopped_for is None:
                    next_tick = now + TICK_S
                    self._watch(now)
                for key, _ in sel.select(timeout=TICK_S):
                    self._event(sel, key)
        finally:
            sel.close()
            for fd in (self.req_fd, self.rep_fd, self.status_fd):
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            if not self._exited():
                self.kill_all()
            self.proc.wait()

    def _watch(self, now: float) -> None:
        cpu, starved = self.measure(now)
        if self.driver is not None:
            why = self.driver.over_budget(cpu, now, starved)
            if why is not None:
                self.driver.overrun(why, cpu, now, starved)
                self.stop_program()
            return
        wall = now - self.started
        if cpu > self.limits.cpu_s:
            self.stopped_for = "cpu"
        elif wall - starved > self.limits.effective_wall_s:
            self.stopped_for = "wall"
        elif wall > self.limits.starved_cap_s:
            self.stopped_for = "starved"
        if self.stopped_for is not None:
            self.stop_program()

    def _event(self, sel: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
        if key.data == "stdin":
            self._write_stdin(sel)
        elif key.data == "requests":
            self._write_requests(sel)
        elif key.data == "reply":
            chunk = os.read(self.rep_fd, 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
                return
            assert self.driver is not None
            now = time.monotonic()
            cpu, starved = self.measure(now)
            out = self.driver.feed(chunk, cpu, now, starved)
            if out is None:
                sel.unregister(key.fileobj)
                self.stop_program()
                return
            for request in out:
                if request:
                    self.requests += request
                else:
                    self.close_requests = True
            self._write_requests(sel)
        else:
            chunk = os.read(key.fd, 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
                if key.data == "status":
                    self._parse_status()
                return
            self._keep(key.data, chunk)

    def _keep(self, which: str, chunk: bytes) -> None:
        if which == "status":
            self.status += chunk[: (1 << 20) - len(self.status)]
        elif which == "stdout":
            self.stdout += chunk
            if len(self.stdout) > self.limits.output_bytes:
                del self.stdout[self.limits.output_bytes :]
                self.output_exceeded = True
                self.stop_program()
        elif len(self.stderr) < self.limits.stderr_bytes:
            self.stderr += chunk[: self.limits.stderr_bytes - len(self.stderr)]

    def _parse_status(self) -> None:
        for line in bytes(self.status).splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                self.report.update(record)

    def _write_stdin(self, sel: selectors.BaseSelector) -> None:
        assert self.proc.stdin
        try:
            n = os.write(self.proc.stdin.fileno(), self.pending[: 1 << 16])
            self.pending = self.pending[n:]
        except BrokenPipeError:
            self.pending = self.pending[:0]
        if not self.pending:
            sel.unregister(self.proc.stdin)
            self.proc.stdin.close()

    def _write_requests(self, sel: selectors.BaseSelector) -> None:
        registered = any(k.data == "requests" for k in sel.get_map().values())
        try:
            while self.requests:
                n = os.write(self.req_fd, self.requests[: 1 << 16])
                del self.requests[:n]
        except BlockingIOError:
            pass
        except BrokenPipeError:
            self.requests.clear()
        if self.requests and not registered:
            sel.register(self.req_fd, selectors.EVENT_WRITE, "requests")
        elif not self.requests:
            if registered:
                sel.unregister(self.req_fd)
            if self.close_requests and self.req_fd >= 0:
                os.close(self.req_fd)
                self.req_fd = -1
