"""Run a program against tests and compare outputs the way LiveCodeBench does.

stdin tests: one execution per test, stdout compared line by line after
stripping; lines that differ still match when both split into the same list
of Decimals (so `1.0` equals `1` but `0.3333` does not equal `0.33333`).
Functional tests: one execution for all calls, driven call by call by the
executor (CPU limit per call, size cap per reply, see sandbox/calls.py); each
call's return value is compared with `==` against the JSON-decoded expected
value, a top-level tuple read as a list.  The checker never raises because of a
program's output: anything it cannot compare is a wrong answer.  An opt-in `float_tolerance` also accepts numbers within that relative
or absolute distance; it is part of the grader version, so runs graded with
and without it never compare.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal

from evalsuite.sandbox.calls import default_cap
from evalsuite.sandbox.cases import CodeTests, TestCase
from evalsuite.sandbox.executor import Program, Sandbox
from evalsuite.sandbox.limits import ExecResult, Limits

Outcome = Literal["passed", "wrong_answer", "time_limit", "memory_limit", "runtime_error", "no_code"]
OUTCOMES: tuple[Outcome, ...] = ("passed", "wrong_answer", "time_limit", "memory_limit", "runtime_error", "no_code")


class SandboxFailure(RuntimeError):
    """The sandbox itself could not run the program (not the program's fault): grade as ungraded."""


class SandboxBusy(SandboxFailure):
    """Every try of an execution was starved of CPU by the machine, inside its budgets: no verdict."""


@dataclass(frozen=True)
class TestOutcome:
    """One test's outcome; stored in a grade's details through `evalsuite.serialize` under short keys."""

    index: int
    outcome: Outcome
    wall_s: float = 0.0
    detail: str = ""

    def __json__(self) -> dict[str, Any]:
        return {"i": self.index, "outcome": self.outcome, "wall_s": round(self.wall_s, 4), "detail": self.detail}


@dataclass(frozen=True)
class OutputMatcher:
    """How outputs are compared; `float_tolerance=None` is LiveCodeBench's exact comparison."""

    float_tolerance: float | None = None

    def lines_match(self, got: str, expected: str) -> tuple[bool, str]:
        """LiveCodeBench's line comparison; never raises, whatever the program printed."""
        try:
            return self._lines_match(got, expected)
        except (ArithmeticError, ValueError, TypeError, MemoryError, RecursionError) as exc:
            return False, f"output could not be compared ({type(exc).__name__})"

    def _lines_match(self, got: str, expected: str) -> tuple[bool, str]:
        got_lines = [line.strip() for line in got.strip().split("\n")]
        exp_lines = [line.strip() for line in expected.strip().split("\n")]
        if len(got_lines) != len(exp_lines):
            return False, f"{len(got_lines)} output line(s), expected {len(exp_lines)}"
        for n, (a, b) in enumerate(zip(got_lines, exp_lines), 1):
            if a == b:
                continue
            da, db = _decimals(a), _decimals(b)
            if da is None or db is None or len(da) != len(db):
                return False, f"line {n}: got {a[:80]!r}, expected {b[:80]!r}"
            if da == db:
                continue
            if self.float_tolerance is not None and all(self._close(float(x), float(y)) for x, y in zip(da, db)):
                continue
            return False, f"line {n}: got {a[:80]!r}, expected {b[:80]!r}"
        return True, ""

    def values_match(self, got: Any, expected: Any) -> bool:
        """`==` as LiveCodeBench compares (or within the tolerance); never raises."""
        try:
            return self._values_match(got, expected)
        except (ArithmeticError, ValueError, TypeError, MemoryError, RecursionError):
            return False

    def _values_match(self, got: Any, expected: Any) -> bool:
        if self.float_tolerance is None:
            return bool(got == expected)
        if isinstance(got, (int, float)) and isinstance(expected, (int, float)) and not isinstance(got, bool):
            return got == expected or self._close(float(got), float(expected))
        if isinstance(got, (list, tuple)) and isinstance(expected, list):
            return len(got) == len(expected) and all(self._values_match(a, b) for a, b in zip(got, expected))
        if isinstance(got, dict) and isinstance(expected, dict):
            return got.keys() == expected.keys() and all(self._values_match(got[k], expected[k]) for k in got)
        return bool(got == expected)

    def _close(self, a: float, b: float) -> bool:
        tol = self.float_tolerance or 0.0
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def _decimals(line: str) -> list[Decimal] | None:
    """The line as Decimals, or None when a token is not a finite number (NaN and sNaN never compare equal)."""
    try:
        values = [Decimal(token) for token in line.split()]
    except (ArithmeticError, ValueError):
        return None
    return values if all(v.is_finite() or v.is_infinite() for v in values) else None


def _tail(data: bytes, limit: int = 400) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text[-limit:]


def _failure(result: ExecResult) -> tuple[Outcome, str] | None:
    """The outcome of an execution that did not end normally, from the kernel's accounting; None when it exited 0."""
    if result.setup_error:
        raise SandboxFailure(f"the sandbox could not start the program: {result.setup_error}")
    if result.cpu_exceeded:
        return "time_limit", f"stopped after {result.cpu_s:.2f} s CPU, {result.wall_s:.2f} s wall"
    if result.timed_out:
        return "time_limit", (
            f"slept or blocked: stopped after {result.wall_s:.2f} s wall ({result.starved_s:.2f} s of it waiting "
            f"for a CPU) with {result.cpu_s:.2f} s CPU"
        )
    if result.memory_error:
        return "memory_limit", f"the run reached its memory limit ({result.memory_mode})"
    if result.output_exceeded:
        return "wrong_answer", f"output exceeded {len(result.stdout)} bytes; the program was stopped"
    if result.exit_code != 0:
        how = result.signal_name or f"exit code {result.exit_code}"
        return "runtime_error", f"{how}: {_tail(result.stderr)}"
    return None


@dataclass
class Checker:
    """Runs one program against its tests; stops at the first failure like LiveCodeBench unless told not to."""

    sandbox: Sandbox
    timeout_s: float = 6.0
    matcher: OutputMatcher = field(default_factory=OutputMatcher)
    stop_on_first_failure: bool = True
    tries: int = 3
    backoff_s: float = 2.0
    wall_s: float | None = None
    """The limit on a test's (a call's) own wall time; None: twice `timeout_s` plus five seconds."""

    def run(
        self, code: str, tests: CodeTests | Sequence[Mapping[str, Any]], fn_name: str | None = None
    ) -> list[TestOutcome]:
        """Outcomes of `code` (wrapped in the tests' prefix and suffix) on each case, in order.

        `tests` is the adapter's `CodeTests`, or plain `{input, output}` mappings with `fn_name`.
        """
        if not isinstance(tests, CodeTests):
            tests = CodeTests.from_mappings(tests, fn_name)
        if not tests.cases:
            return []
        source = tests.program(code)
        if tests.fn_name:
            return self._functional(source, tests.cases, tests.fn_name)
        return self._stdin(source, tests.cases)

    def _limits(self) -> Limits:
        return replace(self.sandbox.limits, cpu_s=self.timeout_s, wall_s=self.wall_s)

    def _execute(self, program: Program, limits: Limits) -> ExecResult:
        """Run `program`; again, after a growing pause, while the machine starved it of CPU.

        A program stopped while its own wall time (wall less its wait for a
        CPU) was still within the limit did not fail: the machine did.  Only
        a run starved on every try is left without a verdict.
        """
        for attempt in range(max(1, self.tries)):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            result = self.sandbox.run(program, limits)
            if not result.starved:
                return result
        raise SandboxBusy(
            f"the machine starved the program of CPU on all {max(1, self.tries)} tries: on the last it waited "
            f"{result.starved_s:.2f} s for a CPU in {result.wall_s:.2f} s of wall time and used "
            f"{result.cpu_s:.2f} s of CPU time, within its {limits.cpu_s:g} s budget; a busy machine is not a "
            "time limit, so it was not graded"
        )

    def _stdin(self, code: str, tests: Sequence[TestCase]) -> list[TestOutcome]:
        limits = self._limits()
        outcomes = []
        for i, test in enumerate(tests):
            result = self._execute(Program(code, stdin=test.input.encode("utf-8", "replace")), limits)
            failed = _failure(result)
            if failed is None:
                ok, why = self.matcher.lines_match(result.stdout.decode("utf-8", "replace"), test.output)
                failed = None if ok else ("wrong_answer", why)
            outcome, detail = failed or ("passed", "")
            outcomes.append(TestOutcome(i, outcome, result.wall_s, detail))
            if outcome != "passed" and self.stop_on_first_failure:
                break
        return outcomes

    def _functional(self, code: str, tests: Sequence[TestCase], fn_name: str) -> list[TestOutcome]:
        limits = self._limits()
        calls = tuple(tuple(t.input.split("\n")) if t.input else () for t in tests)
        caps = tuple(default_cap(t.output, limits.result_bytes) for t in tests)
        result = self._execute(Program(code, mode="functional", fn_name=fn_name, calls=calls, result_caps=caps), limits)
        if result.setup_error:
            raise SandboxFailure(f"the sandbox could not start the program: {result.setup_error}")
        records = {r["i"]: r for r in result.calls}
        outcomes = []
        for i, test in enumerate(tests):
            record = records.get(i)
            if record is None:
                if result.protocol_error:
                    failed: tuple[Outcome, str] = ("runtime_error", result.protocol_error)
                else:
                    failed = _failure(result) or ("runtime_error", f"the program ended before call {i} returned")
                outcomes.append(TestOutcome(i, failed[0], result.wall_s, failed[1]))
                break  # nothing after a missing call ran
            outcome, detail = self._call_outcome(record, test, result)
            outcomes.append(TestOutcome(i, outcome, float(record.get("cpu_s", 0.0)), detail))
            if outcome != "passed" and self.stop_on_first_failure:
                break
        lingered = records.get(len(tests))  # the exit phase, stopped: the program never finished
        if lingered is not None and len(outcomes) == len(tests) and outcomes[-1].outcome == "passed":
            outcome, detail = self._call_outcome(lingered, tests[-1], result)
            outcomes[-1] = replace(outcomes[-1], outcome=outcome, detail=f"after its last reply, {detail}")
        return outcomes

    def _call_outcome(self, record: dict[str, Any], test: TestCase, result: ExecResult) -> tuple[Outcome, str]:
        if "timeout" in record:
            if record["timeout"] == "cpu":
                return "time_limit", f"the {record.get('during', 'call')} exceeded {self.timeout_s:g} s of CPU time"
            return "time_limit", (
                f"the {record.get('during', 'call')} slept or blocked past its wall-clock limit "
                f"({record.get('wall_s', 0):g} s wall, {record.get('starved_s', 0):g} s of it waiting for a CPU)"
            )
        if "oversize" in record:
            return "wrong_answer", (
                f"returned {record['oversize']} bytes, more than the {record['cap']} "
                "a value equal to the expected output can take"
            )
        if "malformed" in record:
            return "wrong_answer", f"returned a value that cannot be read: {record['malformed']}"
        if "error" in record:
            error = str(record["error"])
            return ("memory_limit" if result.memory_error else "runtime_error"), error[-400:]
        try:
            expected = json.loads(test.output)
        except json.JSONDecodeError as exc:
            raise SandboxFailure(f"the expected output is not JSON ({exc.msg})") from None
        if self.matcher.values_match(record.get("ok"), expected):
            return "passed", ""
        return "wrong_answer", f"returned {_short(record.get('ok'))}, expected {test.output[:80]}"


def _short(value: Any) -> str:
    """A short, safe description of a returned value for a grade's reason."""
    try:
        text = (
            repr(value)
            if not isinstance(value, (list, dict, set, tuple)) or len(value) < 1000
            else f"a {type(value).__name__} of {len(value)} items"
        )
    except (ValueError, RecursionError):
        text = f"a {type(value).__name__}"
    return text[:80]
