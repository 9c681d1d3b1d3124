"""A program that waits has failed; a program the machine starves of CPU has not.

Told apart by the kernel's run-queue accounting: a program that sleeps or
blocks past its wall-clock limit gets `time_limit` at the first try, on a
quiet machine and on a saturated one; a program that was runnable but got
no CPU is retried, and left ungraded (with the reason) only when it stays
starved.  Real starvation is made, not waited for: the program puts itself
in the idle scheduling class (and its session's group at nice 19) on a CPU
where a normal-priority loop of the test's runs, so the kernel gives it
next to nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from sandbox_helpers import SMALL

from evalsuite.graders import GradeInput
from evalsuite.graders.code import CodeGrader
from evalsuite.records import Sample
from evalsuite.sandbox import Limits
from evalsuite.sandbox.checker import Checker, SandboxBusy
from evalsuite.sandbox.executor import Program
from evalsuite.sandbox.limits import ExecResult
from evalsuite.sandbox.procs import cpu_of, run_queue_accounting

STDIN_TEST = [{"input": "", "output": "ok"}]
CALL_TEST = [{"input": "1", "output": "1"}]

WAITING_SCRIPTS = {
    "sleeps": "import time\ntime.sleep(60)\nprint('ok')",
    "answers, then sleeps ignoring SIGTERM": (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ok', flush=True)\ntime.sleep(60)"
    ),
    "blocks on a pipe it never writes": "import os\nr, w = os.pipe()\nos.read(r, 1)\nprint('ok')",
    "deadlocks on its own lock": "import threading\nlock = threading.Lock()\nlock.acquire()\nlock.acquire()",
    "pauses for a signal": "import signal\nsignal.pause()",
    "waits for a child that sleeps": "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nos.wait()",
    "stops itself": "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\nprint('ok')",
}

WAITING_CALLS = {
    "sleeps in the call, ignoring its alarm": (
        "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "class Solution:\n    def f(self, x):\n        time.sleep(60)\n        return x\n"
    ),
    "catches the call's timeout and sleeps again": (
        "import time\nclass Solution:\n    def f(self, x):\n        while True:\n            try:\n"
        "                time.sleep(60)\n            except BaseException:\n                pass\n"
    ),
    "answers, then sleeps at exit ignoring SIGTERM": (
        "import atexit, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "atexit.register(time.sleep, 60)\nclass Solution:\n    def f(self, x):\n        return x\n"
    ),
    "sleeps at import": "import time\ntime.sleep(60)\nclass Solution:\n    def f(self, x):\n        return x\n",
}


@dataclass
class CountingSandbox:
    """Counts real executions of a sandbox."""

    inner: Any
    runs: int = 0

    @property
    def limits(self) -> Limits:
        return self.inner.limits

    def run(self, program: Program, limits: Limits | None = None) -> ExecResult:
        self.runs += 1
        return self.inner.run(program, limits)


@dataclass
class ScriptedSandbox:
    """Answers each run with the next scripted result (the last one repeats)."""

    results: list[ExecResult]
    limits: Limits = field(default_factory=Limits)
    runs: int = 0

    def run(self, program: Program, limits: Limits | None = None) -> ExecResult:
        self.runs += 1
        return self.results[min(self.runs, len(self.results)) - 1]

    def describe(self) -> dict[str, Any]:
        return {"isolation": "namespaces", "network": "network namespace (no interfaces up)", "memory": "cgroup v2"}


def starved(cpu_s: float = 0.1) -> ExecResult:
    return ExecResult(-9, b"", b"", wall_s=34.0, cpu_s=cpu_s, starved=True, starved_s=30.0)


@pytest.fixture
def hogs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """One normal-priority busy loop per CPU and one more, each seen burning CPU before the test goes on."""
    loops = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(len(os.sched_getaffinity(0)) + 1)
    ]
    try:
        while any(cpu_of([p.pid]) < 0.05 for p in loops):
            os.sched_yield()
        yield loops
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


@pytest.mark.parametrize("name", WAITING_SCRIPTS)
def test_a_waiting_program_is_a_time_limit_at_the_first_try(sandbox: Any, name: str) -> None:
    counting = CountingSandbox(sandbox)
    checker = Checker(counting, timeout_s=0.5, wall_s=1.0, tries=3, backoff_s=0.1)  # type: ignore[arg-type]
    outcome = checker.run(WAITING_SCRIPTS[name], STDIN_TEST)[0]
    assert (outcome.outcome, counting.runs) == ("time_limit", 1), outcome.detail
    assert "slept or blocked" in outcome.detail


@pytest.mark.parametrize("name", WAITING_CALLS)
def test_a_waiting_call_is_a_time_limit_at_the_first_try(sandbox: Any, name: str) -> None:
    counting = CountingSandbox(sandbox)
    checker = Checker(counting, timeout_s=0.5, wall_s=1.0, tries=3, backoff_s=0.1)  # type: ignore[arg-type]
    outcome = checker.run(WAITING_CALLS[name], CALL_TEST, "f")[0]
    assert (outcome.outcome, counting.runs) == ("time_limit", 1), outcome.detail


def test_a_sleeping_program_on_a_saturated_machine_is_still_a_time_limit(sandbox: Any, hogs: list[Any]) -> None:
    """Every CPU taken by a busy loop: the sleeper never waits for a CPU it does not ask for."""
    counting = CountingSandbox(sandbox)
    checker = Checker(counting, timeout_s=0.5, wall_s=1.0, tries=3, backoff_s=0.1)  # type: ignore[arg-type]
    outcome = checker.run(WAITING_SCRIPTS["sleeps"], STDIN_TEST)[0]
    assert (outcome.outcome, counting.runs) == ("time_limit", 1), outcome.detail
    call = checker.run(WAITING_CALLS["sleeps in the call, ignoring its alarm"], CALL_TEST, "f")[0]
    assert call.outcome == "time_limit", call.detail


IDLE_ON_CPU = (
    "import os\nos.sched_setaffinity(0, {%d})\n"
    "try:\n    open('/proc/self/autogroup', 'w').write('19')\nexcept OSError:\n    pass\n"
    "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\nn = 0\nwhile n < 10 ** 9:\n    n += 1\n"
)
"""Runnable on one CPU, with the least weight the scheduler knows: idle class, and (where the kernel groups each
session, sched_autogroup) its session's group at nice 19, so the test's loop in another session keeps the CPU."""


@pytest.fixture
def hog_on_one_cpu() -> Iterator[int]:
    """A normal-priority busy loop pinned to one CPU (returned), seen running before the test goes on."""
    cpu = min(os.sched_getaffinity(0))
    loop = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        while cpu_of([loop.pid]) < 0.05:
            os.sched_yield()
        yield cpu
    finally:
        loop.kill()
        loop.wait()


def test_a_starved_program_is_retried_then_left_ungraded(sandbox: Any, hog_on_one_cpu: int) -> None:
    if not run_queue_accounting():
        pytest.skip("this kernel does not count run-queue waits (schedstat), so starvation cannot be told")
    limits = replace(SMALL, cpu_s=2.0, wall_s=1.0)
    result = sandbox.run(Program(IDLE_ON_CPU % hog_on_one_cpu), limits)
    if result.cpu_exceeded:
        pytest.skip("the kernel gave an idle-class program its CPU here (a CPU controller shares it between groups)")
    assert result.starved and not result.timed_out, result
    assert result.starved_s > limits.effective_wall_s  # the kernel's run-queue wait is what kept it from its limit
    counting = CountingSandbox(sandbox)
    checker = Checker(counting, timeout_s=2.0, wall_s=1.0, tries=2, backoff_s=0.1)  # type: ignore[arg-type]
    with pytest.raises(SandboxBusy, match="starved the program of CPU on all 2 tries"):
        checker.run(IDLE_ON_CPU % hog_on_one_cpu, STDIN_TEST)
    assert counting.runs == 2


def test_a_cpu_bound_loop_is_a_time_limit_at_the_first_try(sandbox: Any) -> None:
    """Its CPU budget stops it, however small a share of a CPU a loaded machine gives it (no timed wall limit)."""
    counting = CountingSandbox(sandbox)
    checker = Checker(counting, timeout_s=0.5, tries=3, backoff_s=0.1)  # type: ignore[arg-type]
    outcome = checker.run("while True:\n    pass", STDIN_TEST)[0]
    assert outcome.outcome == "time_limit" and counting.runs == 1


def test_a_starved_run_that_finishes_on_a_retry_is_graded() -> None:
    ok = ExecResult(0, b"ok\n", b"", wall_s=0.2, cpu_s=0.1)
    scripted = ScriptedSandbox([starved(), ok])
    checker = Checker(scripted, tries=3, backoff_s=0.0)  # type: ignore[arg-type]
    assert [o.outcome for o in checker.run("print('ok')", STDIN_TEST)] == ["passed"]
    assert scripted.runs == 2


def test_a_starved_call_is_retried() -> None:
    stopped = {"i": 0, "timeout": "starved", "cpu_s": 0.05, "wall_s": 34.0, "during": "call"}
    first = ExecResult(-9, b"", b"", wall_s=34.0, cpu_s=0.1, calls=[stopped], starved=True)
    second = ExecResult(0, b"", b"", wall_s=0.2, cpu_s=0.1, calls=[{"i": 0, "ok": 1, "cpu_s": 0.01}])
    scripted = ScriptedSandbox([first, second])
    checker = Checker(scripted, tries=2, backoff_s=0.0)  # type: ignore[arg-type]
    assert [o.outcome for o in checker.run("", CALL_TEST, "f")] == ["passed"]
    assert scripted.runs == 2


@pytest.mark.parametrize(
    "result",
    [
        ExecResult(-9, b"", b"", wall_s=17.0, cpu_s=6.5, cpu_exceeded=True),
        ExecResult(-9, b"", b"", wall_s=9.0, cpu_s=6.1, calls=[{"i": 0, "timeout": "cpu", "during": "call"}]),
        ExecResult(-9, b"", b"", wall_s=17.0, cpu_s=0.1, timed_out=True),
        ExecResult(-9, b"", b"", wall_s=17.0, cpu_s=0.1, calls=[{"i": 0, "timeout": "wall", "during": "call"}]),
    ],
)
def test_a_spent_budget_is_a_time_limit_and_never_retried(result: ExecResult) -> None:
    scripted = ScriptedSandbox([result])
    checker = Checker(scripted, tries=3, backoff_s=0.0)  # type: ignore[arg-type]
    fn = "f" if result.calls else None
    assert checker.run("", CALL_TEST if fn else STDIN_TEST, fn)[0].outcome == "time_limit"
    assert scripted.runs == 1


def test_the_code_grader_reports_a_starved_program_as_ungraded_with_its_reason() -> None:
    grader = CodeGrader()
    grader._sandbox = ScriptedSandbox([starved()])  # type: ignore[assignment]
    grader.checker = lambda: Checker(grader._sandbox, tries=2, backoff_s=0.0)  # type: ignore[arg-type,method-assign]
    reference = {"public_test_cases": json.dumps([{**STDIN_TEST[0], "testtype": "stdin"}])}
    sample = Sample("s", "t", ({"role": "user", "content": "q"},), reference)
    grade = grader.grade_batch([GradeInput(sample, "```python\nprint('ok')\n```")])[0]
    assert grade.status == "ungraded" and "not a time limit" in grade.reason, grade.reason
    assert grade.details["starved"] is True
