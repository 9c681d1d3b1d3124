"""Run untrusted Python programs, one process tree per execution, many in a bounded pool.

`Sandbox.run` takes a `Program` (source, stdin, or functional calls) and
returns an `ExecResult`.  Per execution: a uid of its own (root) or a user
namespace of its own (any other user), a job folder (deleted afterwards)
holding the program, the launcher in a new session, a memory cgroup for the
whole run where the machine gives one, real pipes read with caps so a flood
cannot exhaust our memory, the run's CPU time and its own wall time measured
here and enforced (per test, and per call for functional programs), and a
sweep afterwards so nothing the program started survives it.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from evalsuite.sandbox import cgroup
from evalsuite.sandbox.calls import CallDriver
from evalsuite.sandbox.exposure import THREAD_ENV, reachable_by_others, seal_evaluator_files, vetted_packages
from evalsuite.sandbox.isolation import (
    LAUNCH_ENV,
    LAUNCHER,
    Isolation,
    Slot,
    acquire_slot,
    interpreter,
    state_dir,
    system_binds,
)
from evalsuite.sandbox.levels import PROTECTS, choose, current_setting
from evalsuite.sandbox.limits import ExecResult, Limits
from evalsuite.sandbox.procs import run_queue_accounting, sweep_uid
from evalsuite.sandbox.pump import Pump

RUNNER = Path(__file__).with_name("runner.py")
BACKSTOP_S = 3.0  # beyond the launcher's own wall limit, before we kill the group ourselves
_serial = itertools.count()


def _remove(job: Path) -> None:
    """Delete a job folder; its box is read-only, which stops its owner (not root) from emptying it."""
    try:
        os.chmod(job / "box", 0o700)
    except OSError:
        pass
    shutil.rmtree(job, ignore_errors=True)


@dataclass(frozen=True)
class Program:
    """One execution.  `script`: run `source` with `stdin`.  `functional`: call `fn_name` once per entry of `calls`.

    Each call is a list of arguments, each argument a JSON text (LiveCodeBench's
    functional input is one JSON value per line).  `result_caps[i]` bounds the
    bytes of call i's reply (default: the limits' `result_bytes`); the caps
    never enter the sandbox.
    """

    source: str
    mode: Literal["script", "functional"] = "script"
    stdin: bytes = b""
    fn_name: str | None = None
    calls: tuple[tuple[str, ...], ...] = ()
    result_caps: tuple[int, ...] = ()


@dataclass
class Sandbox:
    """Executor for untrusted programs at an isolation level (see evalsuite/sandbox/levels.py).

    `isolation` None follows the setting in force (`levels.requested`; by
    default the best this machine allows, refused where there is none); a
    level that is not available raises `levels.SandboxRefused`.  `uids`
    restricts the uids this sandbox uses (a block from
    `isolation.reserve_uid_block`), so its owner knows which processes are its own.
    """

    limits: Limits = field(default_factory=Limits)
    isolation: Isolation | None = None
    python: str | None = None
    uids: range | None = None

    def __post_init__(self) -> None:
        self.isolation = choose(self.isolation or current_setting())
        # Root gives each run a uid of its own; any other user runs it under its own uid in a user namespace.
        self.userns = self.isolation == "namespaces" and os.geteuid() != 0
        if self.python is None:
            self.python = interpreter(self.isolation)
        self._runner_source = RUNNER.read_bytes()
        self._memory = cgroup.detect() if self.isolation != "none" else None
        self.sealed = seal_evaluator_files(self.python) if self.isolation == "uid" else []
        self.vendor = [
            (name, path)
            for name, path in vetted_packages(self.python)
            if self.isolation != "uid" or reachable_by_others(path)
        ]

    @property
    def memory_mode(self) -> str:
        """How `memory_mb` is enforced: a cgroup for the run's total, or per process (total <= processes x memory)."""
        return self._memory.mode if self._memory else "per-process address space"

    def describe(self) -> dict[str, Any]:
        """Which protections are active, for run records, reports and `evalsuite sandbox`."""
        network = {"namespaces": "network namespace (no interfaces up)", "uid": "audit hook", "none": "audit hook"}
        uid = {"namespaces": "a uid of its own", "uid": "a uid of its own", "none": "the evaluating user's"}
        level = self.isolation or "none"
        return {
            "isolation": self.isolation,
            "user_namespace": self.userns,
            "uid": "the evaluating user's, in a user namespace of its own" if self.userns else uid[level],
            "network": network[level],
            **PROTECTS[level],
            "unprivileged_uid": self.isolation in ("namespaces", "uid") and not self.userns,
            "memory": self.memory_mode,
            "starvation": "run-queue wait (schedstat)" if run_queue_accounting() else "not measured by this kernel",
            "state": str(state_dir()),
            "packages": sorted(name for name, _ in self.vendor if not name.endswith(".libs")),
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
        if self.isolation == "uid":
            self.sealed += seal_evaluator_files(self.python or sys.executable)  # files opened since
        slot = acquire_slot(uids=self.uids) if self.isolation != "none" and not self.userns else None
        job = Path(tempfile.mkdtemp(prefix="job-", dir=state_dir()))
        group = None
        leftovers: list[int] = []
        try:
            if self._memory is not None:
                group = self._memory.create(f"run-{os.getpid()}-{next(_serial)}", limits.memory_mb, limits.processes)
            result = self._run_in(job, slot, group, program, limits)
        finally:
            leftovers = sweep_uid(slot.uid) if slot else []
            if group is not None:
                result_hit = group.limit_hit()
                group.remove()
            _remove(job)
            if slot is not None and not leftovers:
                slot.release()  # a uid with survivors stays locked until this process exits
        result.leftover_pids = leftovers
        if group is not None:
            result.memory_exceeded = result_hit
        else:  # address-space limit: failed with a peak within half of it (an exit code alone proves nothing)
            result.memory_exceeded = result.exit_code != 0 and result.maxrss_kb >= limits.memory_mb * 512
        return result

    def _prepare(
        self, job: Path, slot: Slot | None, program: Program, fds: tuple[int, int] | None
    ) -> tuple[list[str], dict[str, str], str]:
        box = job / "box"
        box.mkdir()
        (job / "root").mkdir()
        (box / "runner.py").write_bytes(self._runner_source)
        (box / "solution.py").write_text(program.source, encoding="utf-8", errors="surrogatepass")
        os.chmod(job, 0o711)
        for f in box.iterdir():
            os.chmod(f, 0o400 if slot is not None else 0o444)
        os.chmod(box, 0o500 if slot is not None else 0o555)
        if slot is not None:  # readable by this run's uid alone
            for f in [box, *box.iterdir()]:
                os.chown(f, slot.uid, slot.gid)
        inside = "/box" if self.isolation == "namespaces" else str(box)
        workdir = job / "work"
        workdir.mkdir(mode=0o700)
        if slot is not None:
            os.chown(workdir, slot.uid, slot.gid)
        argv = [
            self.python or sys.executable,
            "-S",
            "-P",
            "-B",
            f"{inside}/runner.py",
            program.mode,
            f"{inside}/solution.py",
        ]
        if program.mode == "functional" and fds is not None:
            argv += [str(program.fn_name), str(fds[0]), str(fds[1])]
        home = "/tmp" if self.isolation == "namespaces" else str(workdir)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": home,
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",
            "PYTHONIOENCODING": "utf-8",
            **THREAD_ENV,
        }
        if self.vendor:
            where = [[n, f"/vendor/{n}" if self.isolation == "namespaces" else p] for n, p in self.vendor]
            env["EVALSUITE_VENDOR"] = json.dumps(where)
        if self.isolation != "namespaces":
            env["EVALSUITE_NETGUARD"] = "1"
        return argv, env, str(workdir)

    def _run_in(
        self, job: Path, slot: Slot | None, group: cgroup.RunGroup | None, program: Program, limits: Limits
    ) -> ExecResult:
        driver, whole, fds = None, limits, None
        if program.mode == "functional":
            n = len(program.calls)
            caps = [program.result_caps[i] if i < len(program.result_caps) else limits.result_bytes for i in range(n)]
            driver = CallDriver(program.calls, caps, limits.cpu_s, limits.effective_wall_s)
            phases = n + 2  # the import, each call, the exit
            whole = replace(limits, cpu_s=limits.cpu_s * phases, wall_s=limits.effective_wall_s * phases)
            req_r, req_w = os.pipe()
            rep_r, rep_w = os.pipe()
            fds = (req_r, rep_w)
        argv, env, workdir = self._prepare(job, slot, program, fds)
        status_r, status_w = os.pipe()
        cfg = {
            "isolation": self.isolation,
            "status_fd": status_w,
            "root": str(job / "root"),
            "box": str(job / "box"),
            "binds": system_binds(),
            "userns": self.userns,
            "uid": slot.uid if slot else os.geteuid(),
            "gid": slot.gid if slot else os.getegid(),
            "drop": slot is not None,
            "workdir": workdir,
            "limits": whole.as_launcher_dict(),
            "argv": argv,
            "env": env,
            "keep_fds": list(fds or ()),
            "cgroup_procs": group.procs if group else None,
            "vendor": [list(v) for v in self.vendor] if self.isolation == "namespaces" else [],
        }
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(LAUNCHER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(status_w, *(fds or ())),
                start_new_session=True,
                env={LAUNCH_ENV: json.dumps(cfg)},
                cwd=str(job),
            )
        finally:
            os.close(status_w)
            for fd in fds or ():
                os.close(fd)
        pump = Pump(proc, program.stdin, whole, slot, status_r, tree=self.userns)
        if driver is not None:
            driver.started_wall = started
            pump.attach_calls(driver, req_w, rep_r)
        pump.run(started=started, deadline=started + whole.starved_cap_s + 1.0 + BACKSTOP_S)
        report = pump.report
        exit_code = report.get("exit")
        if exit_code is None and report.get("setup_error") is None:
            exit_code = -signal.SIGKILL  # the wall-clock backstop or the executor stopped it before init reported
        cpu_s = max(float(report.get("cpu_s", 0.0)), pump.cpu_seen)
        over_cpu = driver is None and cpu_s > limits.cpu_s
        cpu_exceeded = pump.stopped_for == "cpu" or exit_code == -signal.SIGXCPU or over_cpu
        stops = {c.get("timeout") for c in driver.results} if driver else set()
        # A backstop firing means the executor did not get to stop the run itself: the machine's doing.
        backstop = bool(report.get("timed_out")) or pump.backstop_fired
        starved = not cpu_exceeded and "cpu" not in stops and (pump.stopped_for == "starved" or backstop)
        return ExecResult(
            exit_code=exit_code,
            stdout=bytes(pump.stdout),
            stderr=bytes(pump.stderr),
            wall_s=float(report.get("wall_s", time.monotonic() - started)),
            cpu_s=cpu_s,
            maxrss_kb=int(report.get("maxrss_kb", 0)),
            timed_out=pump.stopped_for == "wall",
            cpu_exceeded=cpu_exceeded,
            output_exceeded=pump.output_exceeded,
            setup_error=report.get("setup_error"),
            isolation=str(self.isolation),
            memory_mode=self.memory_mode,
            calls=driver.results if driver else [],
            protocol_error=driver.violation if driver else None,
            starved=starved or "starved" in stops,
            starved_s=pump.clock.starved_s,
        )
