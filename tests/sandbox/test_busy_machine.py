"""A run stopped by the wall-clock backstop inside its CPU budget is retried, then left ungraded: never a time limit.

The CPU budget decides a time limit; the wall clock only says the machine
was too busy to run the program (or the program waited).  The real-sandbox
tests use a sleeping program (wall time, no CPU) and a CPU-bound loop; the
stub tests check the retry itself without waiting for backstops.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from evalsuite.graders import GradeInput
from evalsuite.graders.code import CodeGrader
from evalsuite.records import Sample
from evalsuite.sandbox import Limits, Sandbox
from evalsuite.sandbox.checker import Checker, SandboxBusy
from evalsuite.sandbox.executor import Program
from evalsuite.sandbox.limits import ExecResult

STDIN_TEST = [{"input": "", "output": "ok"}]
CALL_TEST = [{"input": "1", "output": "1"}]


@dataclass
class CountingSandbox:
    """Counts real executions of a sandbox."""

    inner: Sandbox
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


def starved(cpu_s: float = 0.1) -> ExecResult:
    return ExecResult(-9, b"", b"", wall_s=17.0, cpu_s=cpu_s, timed_out=True)


def test_sleeping_past_the_backstop_is_retried_then_not_graded(sandbox: Sandbox) -> None:
    counting = CountingSandbox(sandbox)
    checker = Checker(counting, timeout_s=0.5, tries=2, backoff_s=0.1)  # type: ignore[arg-type]
    with pytest.raises(SandboxBusy, match="wall-clock backstop stopped the program on all 2 tries"):
        checker.run("import time\ntime.sleep(60)\nprint('ok')", STDIN_TEST)
    assert counting.runs == 2


def test_a_cpu_bound_loop_is_a_time_limit_at_the_first_try(sandbox: Sandbox) -> None:
    counting = CountingSandbox(sandbox)
    checker = Checker(counting, timeout_s=0.5, tries=3, backoff_s=0.1)  # type: ignore[arg-type]
    outcome = checker.run("while True:\n    pass", STDIN_TEST)[0]
    assert outcome.outcome == "time_limit" and counting.runs == 1


def test_a_sleeping_call_is_not_a_time_limit(sandbox: Sandbox) -> None:
    counting = CountingSandbox(sandbox)
    checker = Checker(counting, timeout_s=0.5, tries=2, backoff_s=0.1)  # type: ignore[arg-type]
    source = "import time\nclass Solution:\n    def f(self, x):\n        time.sleep(60)\n        return x\n"
    with pytest.raises(SandboxBusy):
        checker.run(source, CALL_TEST, "f")
    assert counting.runs == 2


def test_a_starved_run_that_finishes_on_a_retry_is_graded() -> None:
    ok = ExecResult(0, b"ok\n", b"", wall_s=0.2, cpu_s=0.1)
    scripted = ScriptedSandbox([starved(), ok])
    checker = Checker(scripted, tries=3, backoff_s=0.0)  # type: ignore[arg-type]
    assert [o.outcome for o in checker.run("print('ok')", STDIN_TEST)] == ["passed"]
    assert scripted.runs == 2


def test_a_call_stopped_by_the_wall_clock_is_retried() -> None:
    wall = {"i": 0, "timeout": "wall", "cpu_s": 0.05, "wall_s": 17.0, "during": "call"}
    first = ExecResult(-9, b"", b"", wall_s=17.0, cpu_s=0.1, calls=[wall])
    second = ExecResult(0, b"", b"", wall_s=0.2, cpu_s=0.1, calls=[{"i": 0, "ok": 1, "cpu_s": 0.01}])
    scripted = ScriptedSandbox([first, second])
    checker = Checker(scripted, tries=2, backoff_s=0.0)  # type: ignore[arg-type]
    assert [o.outcome for o in checker.run("", CALL_TEST, "f")] == ["passed"]
    assert scripted.runs == 2


@pytest.mark.parametrize(
    "result",
    [
        ExecResult(-9, b"", b"", wall_s=17.0, cpu_s=6.5, timed_out=True, cpu_exceeded=True),
        ExecResult(-9, b"", b"", wall_s=9.0, cpu_s=6.1, calls=[{"i": 0, "timeout": "cpu", "during": "call"}]),
    ],
)
def test_a_spent_cpu_budget_is_a_time_limit_and_never_retried(result: ExecResult) -> None:
    scripted = ScriptedSandbox([result])
    checker = Checker(scripted, tries=3, backoff_s=0.0)  # type: ignore[arg-type]
    fn = "f" if result.calls else None
    assert checker.run("", CALL_TEST if fn else STDIN_TEST, fn)[0].outcome == "time_limit"
    assert scripted.runs == 1


def test_the_code_grader_reports_a_busy_machine_as_ungraded_with_its_reason() -> None:
    grader = CodeGrader()
    grader._sandbox = ScriptedSandbox([starved()])  # type: ignore[assignment]
    grader.checker = lambda: Checker(grader._sandbox, tries=2, backoff_s=0.0)  # type: ignore[arg-type,method-assign]
    reference = {"public_test_cases": json.dumps([{**STDIN_TEST[0], "testtype": "stdin"}])}
    sample = Sample("s", "t", ({"role": "user", "content": "q"},), reference)
    item = GradeInput(sample, "```python\nprint('ok')\n```")
    grade = grader.grade_batch([item])[0]
    assert grade.status == "ungraded" and "not a time limit" in grade.reason, grade.reason
