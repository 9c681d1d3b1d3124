"""The code grader: extract the program from a completion and run it against the tests in the sandbox.

The grader knows no dataset: the task's adapter, named in each sample's
reference, turns that reference into `CodeTests` (see
evalsuite/tasks/adapters.py and evalsuite/sandbox/cases.py), and the checker
runs them.  A completion is correct when every test passes (pass@1 for one
sample).  Per-test outcomes go into `Grade.details`: passed, wrong_answer,
time_limit, memory_limit, runtime_error, or no_code when nothing could be
extracted.  A failure of the sandbox itself, or a reference without tests,
is `ungraded`, never `incorrect`.  `pass_at_k` gives the unbiased estimator
for problems sampled n > 1 times.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from evalsuite.errors import ConfigError, DatasetError, HostError
from evalsuite.graders import GradeInput
from evalsuite.records import Grade
from evalsuite.sandbox import Limits, Sandbox
from evalsuite.sandbox.checker import Checker, OutputMatcher, SandboxBusy, SandboxFailure, TestOutcome
from evalsuite.sandbox.levels import SandboxRefused
from evalsuite.serialize import to_jsonable
from evalsuite.tasks.adapters import code_tests

VERSION = "1"


def last_code_block(text: str) -> str | None:
    """Code between the last two lines containing a ``` fence (LiveCodeBench's rule); None if under two fences."""
    lines = text.split("\n")
    fences = [i for i, line in enumerate(lines) if "```" in line]
    if len(fences) < 2:
        return None
    return "\n".join(lines[fences[-2] + 1 : fences[-1]])


EXTRACTORS: dict[str, Callable[[str], str | None]] = {"last_code_block": last_code_block}

_OPTIONS: dict[str, tuple[type, ...]] = {
    "timeout_s": (int, float),
    "memory_mb": (int,),
    "processes": (int,),
    "float_tolerance": (int, float, type(None)),
    "stop_on_first_failure": (bool,),
}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c passed: 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}.")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_at_k_by_problem(grades: Iterable[Grade], k: int = 1) -> dict[str, float]:
    """pass@k per problem (sample id) over its graded samples; ungraded samples are left out."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for grade in grades:
        if grade.status == "ungraded":
            continue
        counts[grade.sample_id][0] += 1
        counts[grade.sample_id][1] += grade.correct
    return {sid: pass_at_k(n, c, k) for sid, (n, c) in counts.items() if n >= k}


class CodeGrader:
    """Grader `code`: options timeout_s (CPU seconds per test, and per call of a functional problem; default 6),
    memory_mb (the whole run's), processes, float_tolerance, stop_on_first_failure."""

    name = "code"

    def __init__(self, extraction: Sequence[str] | None = None, **options: Any) -> None:
        steps = list(extraction or ["last_code_block"])
        unknown = [s for s in steps if s not in EXTRACTORS]
        if unknown:
            raise ConfigError(
                f"Grader 'code': unknown extraction step(s) {', '.join(unknown)} (known: {', '.join(EXTRACTORS)})."
            )
        for key, value in options.items():
            kinds = _OPTIONS.get(key)
            if kinds is None:
                raise ConfigError(f"Grader 'code': unknown option '{key}' (accepted: {', '.join(sorted(_OPTIONS))}).")
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                raise ConfigError(f"Grader 'code': option '{key}' = {value!r} has the wrong type.")
        self.extraction = steps
        tolerance = options.get("float_tolerance")
        self.version = f"{VERSION};cmp={'exact' if tolerance is None else f'tol{tolerance:g}'}"
        self._options = options
        self._sandbox: Sandbox | None = None

    @property
    def sandbox(self) -> Sandbox:
        """Built on first use, so constructing a grader never probes the machine; at the level the sandbox
        setting in force gives (`evalsuite.sandbox.levels`), or HostError saying why there is none."""
        if self._sandbox is None:
            try:
                self._sandbox = Sandbox(limits=self.sandbox_limits())
            except SandboxRefused as exc:
                raise HostError(str(exc)) from None
        return self._sandbox

    def sandbox_limits(self) -> Limits:
        """The sandbox's limits from the grader's options (CPU time is the checker's, per test)."""
        return Limits(memory_mb=self._options.get("memory_mb", 1024), processes=self._options.get("processes", 16))

    def ready(self) -> None:
        """Build the sandbox now, so a machine that cannot run model-written code says so before generation."""
        self.sandbox  # noqa: B018 - built for its check

    def checker(self) -> Checker:
        return Checker(
            self.sandbox,
            timeout_s=float(self._options.get("timeout_s", 6.0)),
            matcher=OutputMatcher(self._options.get("float_tolerance")),
            stop_on_first_failure=self._options.get("stop_on_first_failure", True),
        )

    def extract(self, text: str) -> tuple[str | None, str | None]:
        """(code, step) from the first extraction step that finds a non-blank block."""
        for step in self.extraction:
            code = EXTRACTORS[step](text)
            if code is not None and code.strip():
                return code, step
        return None, None

    def grading_key(self, item: GradeInput) -> dict[str, Any]:
        """What this grader's grade depends on: the tests (in the reference) and the program, not the prose
        around it, so each distinct program is run once however many completions contain it."""
        code, step = self.extract(item.text)
        return {"reference": item.sample.reference, "program": code, "step": step, "truncated": item.truncated}

    def grade_batch(self, items: Sequence[GradeInput], *, workers: int | None = None) -> list[Grade]:
        """Grade items in parallel, one checker thread per worker (each runs its tests in the sandbox)."""
        if not items:
            return []
        checker = self.checker()
        workers = max(1, min(workers or os.cpu_count() or 1, len(items)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="code-grader") as pool:
            return list(pool.map(lambda item: self._grade_one(checker, item), items))

    def _grade_one(self, checker: Checker, item: GradeInput) -> Grade:
        sid = item.sample.id
        try:
            tests = code_tests(item.sample.reference, where=f"sample {sid}")
        except DatasetError as exc:
            return Grade(sid, "ungraded", None, str(exc))
        if not tests.cases:
            return Grade(sid, "ungraded", None, "the sample's reference has no tests")
        code, step = self.extract(item.text)
        base: dict[str, Any] = {"n_tests": len(tests.cases), "extraction": step, "truncated": item.truncated}
        if code is None:
            details = {**base, "outcome": "no_code", "tests": [], "n_passed": 0}
            return Grade(sid, "incorrect", "", "no fenced code block in the completion", 0.0, details)
        try:
            outcomes = checker.run(code, tests)
        except SandboxBusy as exc:  # counted and named in reports: the machine's failure, not the program's
            return Grade(sid, "ungraded", code, str(exc), 0.0, {**base, "starved": True, "sandbox": self._level()})
        except SandboxFailure as exc:
            return Grade(sid, "ungraded", code, str(exc), 0.0, {**base, "sandbox": self._level()})
        except Exception as exc:  # noqa: BLE001 - one program must never fail the grading of a run
            return Grade(
                sid, "ungraded", code, f"the checker failed on this program: {type(exc).__name__}: {exc}", 0.0, base
            )
        return self._grade_from_outcomes(sid, code, outcomes, base)

    def _level(self) -> dict[str, Any]:
        """What protected this grade's runs, recorded with it: the isolation level, network and memory modes."""
        return {k: v for k, v in self.sandbox.describe().items() if k in ("isolation", "network", "memory")}

    def _grade_from_outcomes(self, sid: str, code: str, outcomes: list[TestOutcome], base: dict[str, Any]) -> Grade:
        n_passed = sum(o.outcome == "passed" for o in outcomes)
        first_bad = next((o for o in outcomes if o.outcome != "passed"), None)
        details = {
            **base,
            "outcome": first_bad.outcome if first_bad else "passed",
            "n_passed": n_passed,
            "tests": to_jsonable(outcomes),
            "sandbox": self._level(),
        }
        if first_bad is None and n_passed == base["n_tests"]:
            return Grade(sid, "correct", code, f"all {n_passed} tests passed", 1.0, details)
        reason = f"test {first_bad.index}: {first_bad.outcome}" if first_bad else "not every test ran"
        if first_bad and first_bad.detail:
            reason += f" ({first_bad.detail[:200]})"
        return Grade(sid, "incorrect", code, reason, 0.0, details)
