"""Reference solutions pass; deliberately broken ones fail with the outcome their fault deserves."""

from __future__ import annotations

import pytest
from as_user import LEVELS, UserSandbox, sandbox_at
from lcb_helpers import SOLUTIONS, fenced

from evalsuite.graders import GradeInput
from evalsuite.graders.code import CodeGrader
from evalsuite.records import Sample


def test_fixture_covers_both_kinds_platforms_and_difficulties(lcb_samples: dict[str, Sample]) -> None:
    assert 8 <= len(lcb_samples) <= 12
    kinds = {bool(s.reference["fn_name"]) for s in lcb_samples.values()}
    assert kinds == {True, False}
    assert {s.strata["platform"] for s in lcb_samples.values()} == {"atcoder", "codeforces", "leetcode"}
    assert {s.strata["difficulty"] for s in lcb_samples.values()} == {"easy", "medium", "hard"}


def test_prompt_is_livecodebench_chat_prompt(lcb_samples: dict[str, Sample]) -> None:
    stdin, functional = lcb_samples["abc365_a"], lcb_samples["3264"]
    assert stdin.messages[0]["role"] == "system" and stdin.messages[0]["content"].startswith("You are an expert Python")
    user = stdin.messages[1]["content"]
    assert user.startswith("### Question:\nYou are given an integer Y")
    assert "### Format: Read the inputs from stdin" in user and "# YOUR CODE HERE" in user
    assert user.endswith("### Answer: (use the provided format with backticks)")
    f_user = functional.messages[1]["content"]
    assert "### Format: You will use the following starter code" in f_user
    assert "def getFinalState(self, nums: List[int], k: int, multiplier: int) -> List[int]:" in f_user
    assert "Read the inputs from stdin" not in f_user


@pytest.mark.parametrize("level", LEVELS)
def test_reference_solutions_pass(grader: CodeGrader, lcb_samples: dict[str, Sample], level: str) -> None:
    """At every isolation level, root's and a user's: the grades do not depend on the level."""
    items = [GradeInput(s, fenced((SOLUTIONS / f"{qid}.py").read_text())) for qid, s in lcb_samples.items()]
    at_level = CodeGrader(["last_code_block"], timeout_s=2.0, memory_mb=256, processes=8)
    at_level._sandbox = sandbox_at(level, at_level.sandbox_limits())
    try:
        grades = at_level.grade_batch(items, workers=2)
    finally:
        if isinstance(at_level._sandbox, UserSandbox):
            at_level._sandbox.close()
    failed = {g.sample_id: g.reason for g in grades if g.status != "correct"}
    assert failed == {}
    assert all(g.details["outcome"] == "passed" and g.details["n_passed"] == g.details["n_tests"] for g in grades)


BROKEN = [
    ("abc365_a", "print(365)", "wrong_answer", 1),
    ("abc365_a", "y = int(input())\nwhile True:\n    y += 1", "time_limit", 0),
    ("abc365_a", "xs = []\nwhile True:\n    xs.append(' ' * 10**7)", "memory_limit", 0),
    ("abc365_a", "print(int(input()) // 0)", "runtime_error", 0),
    ("abc367_b", "print(round(float(input())))", "wrong_answer", 0),
    (
        "3264",
        "class Solution:\n    def getFinalState(self, nums, k, multiplier):\n        return nums",
        "wrong_answer",
        0,
    ),
    (
        "3264",
        "class Solution:\n    def getFinalState(self, nums, k, multiplier):\n        return nums[10]",
        "runtime_error",
        0,
    ),
    (
        "3264",
        "class Solution:\n    def getFinalState(self, nums, k, multiplier):\n        while True: pass",
        "time_limit",
        0,
    ),
    ("3264", "class Solution:\n    def getFinal(self, nums, k, multiplier):\n        return nums", "runtime_error", 0),
    (
        "3264",
        "class Solution:\n    def getFinalState(self, nums, k, multiplier):\n        return [0] * 10**9",
        "memory_limit",
        0,
    ),
]
NO_CGROUP = {"memory_limit": "runtime_error"}  # address-space limit: an instant MemoryError proves no limit was hit


@pytest.mark.parametrize(
    "qid, code, outcome, n_passed", BROKEN, ids=[f"{b[0]}-{b[2]}-{i}" for i, b in enumerate(BROKEN)]
)
def test_broken_solutions_fail_with_the_right_outcome(
    grader: CodeGrader, lcb_samples: dict[str, Sample], qid: str, code: str, outcome: str, n_passed: int
) -> None:
    if not grader.sandbox.memory_mode.startswith("cgroup") and "10**9" in code:
        outcome = NO_CGROUP.get(outcome, outcome)
    grade = grader.grade_batch([GradeInput(lcb_samples[qid], fenced(code))])[0]
    assert grade.status == "incorrect"
    assert grade.details["outcome"] == outcome, grade.reason
    assert grade.details["n_passed"] == n_passed
    assert grade.details["tests"][-1]["outcome"] == outcome


def test_no_code_is_recorded_as_such(grader: CodeGrader, lcb_samples: dict[str, Sample]) -> None:
    for text in ("I cannot solve this.", "```python\nprint(1)", "```python\n\n```"):
        grade = grader.grade_batch([GradeInput(lcb_samples["abc365_a"], text, truncated=True)])[0]
        assert (grade.status, grade.extracted, grade.details["outcome"]) == ("incorrect", "", "no_code")
        assert grade.details["truncated"] is True


def test_missing_tests_are_ungraded(grader: CodeGrader, lcb_samples: dict[str, Sample]) -> None:
    bare = Sample(id="x", task="livecodebench", messages=(), reference={"public_test_cases": "[]"})
    assert grader.grade_batch([GradeInput(bare, fenced("print(1)"))])[0].status == "ungraded"
    bad = Sample(id="y", task="livecodebench", messages=(), reference={"private_test_cases": "%%%"})
    assert grader.grade_batch([GradeInput(bad, fenced("print(1)"))])[0].status == "ungraded"


def test_decimal_equal_lines_pass_as_in_livecodebench(grader: CodeGrader, lcb_samples: dict[str, Sample]) -> None:
    """LiveCodeBench compares differing lines as Decimals, so "12.340" matches "12.34" (and "0.0" matches "0")."""
    grade = grader.grade_batch([GradeInput(lcb_samples["abc367_b"], fenced("print(float(input()))"))])[0]
    assert grade.status == "correct"


def test_one_program_never_fails_the_grading_of_a_run(
    grader: CodeGrader, lcb_samples: dict[str, Sample], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever goes wrong judging one program, that sample is ungraded and the others are graded."""
    from evalsuite.sandbox.checker import Checker

    real = Checker.run

    def flaky(self: Checker, code: str, tests: object, fn_name: str | None = None) -> list:
        if "boom" in code:
            raise ArithmeticError("an output the comparison did not expect")
        return real(self, code, tests, fn_name)

    monkeypatch.setattr(Checker, "run", flaky)
    items = [
        GradeInput(lcb_samples["abc365_a"], fenced("print('boom')")),
        GradeInput(lcb_samples["abc365_a"], fenced((SOLUTIONS / "abc365_a.py").read_text())),
    ]
    bad, good = grader.grade_batch(items)
    assert bad.status == "ungraded" and "ArithmeticError" in bad.reason
    assert good.status == "correct"
