"""HumanEval through the code grader: canonical solutions pass in both answer forms, broken ones fail rightly."""

from __future__ import annotations

from typing import Any

import pytest
from he_helpers import fenced

from evalsuite.graders import GradeInput
from evalsuite.graders.code import CodeGrader
from evalsuite.records import Sample


def _canonical(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["task_id"]: r for r in rows}


@pytest.mark.parametrize("form", ["whole function", "body only"])
def test_canonical_solutions_pass(
    grader: CodeGrader, he_samples: dict[str, Sample], he_rows: list[dict[str, Any]], form: str
) -> None:
    rows = _canonical(he_rows)
    items = []
    for tid, sample in he_samples.items():
        body = rows[tid]["canonical_solution"]
        answer = rows[tid]["prompt"] + body if form == "whole function" else body
        items.append(GradeInput(sample, fenced(answer)))
    grades = grader.grade_batch(items, workers=2)
    assert {g.sample_id: g.reason for g in grades if g.status != "correct"} == {}
    assert all(g.details["n_tests"] == 1 and g.details["outcome"] == "passed" for g in grades)


ADD = "HumanEval/53"
BROKEN = [
    ("def add(x, y):\n    return x - y", "wrong_answer"),
    ("def add(x, y):\n    return x + not_defined", "runtime_error"),
    ("def add(x, y):\n    while True:\n        pass", "time_limit"),
    ("def add(x: int, y: int):\n    return x + y + 1\n\ndef check(candidate):\n    return True", "wrong_answer"),
    ("def add(x, y):\n    return 0\n\nimport sys\nsys.exit(0)", "runtime_error"),
    ("def add(x, y):\n    return 0\n\nimport os\nos._exit(0)", "runtime_error"),
    ("def add(x, y):\n    print(True)\n    raise SystemExit(0)", "runtime_error"),
    ("def add(x, y):\n    return x +", "runtime_error"),
]


@pytest.mark.parametrize("code, outcome", BROKEN, ids=[f"{b[1]}-{i}" for i, b in enumerate(BROKEN)])
def test_broken_solutions_fail_with_the_right_outcome(
    grader: CodeGrader, he_samples: dict[str, Sample], code: str, outcome: str
) -> None:
    """Redefining `check`, exiting early or printing what a pass looks like never passes."""
    grade = grader.grade_batch([GradeInput(he_samples[ADD], fenced(code))])[0]
    assert grade.status == "incorrect", grade.reason
    assert grade.details["outcome"] == outcome, grade.reason
    assert grade.details["n_passed"] == 0


def test_a_failed_assert_says_so(grader: CodeGrader, he_samples: dict[str, Sample]) -> None:
    grade = grader.grade_batch([GradeInput(he_samples[ADD], fenced("def add(x, y):\n    return x * y"))])[0]
    assert grade.details["outcome"] == "wrong_answer" and "a test assertion failed" in grade.reason


def test_no_code_is_incorrect_and_a_bad_reference_ungraded(grader: CodeGrader, he_samples: dict[str, Sample]) -> None:
    grade = grader.grade_batch([GradeInput(he_samples[ADD], "def add(x, y): return x + y")])[0]
    assert (grade.status, grade.details["outcome"]) == ("incorrect", "no_code")
    damaged = Sample(id="d", task="humaneval", messages=(), reference={"adapter": "humaneval", "prompt": "x"})
    grade = grader.grade_batch([GradeInput(damaged, fenced("def add(x, y): return x + y"))])[0]
    assert grade.status == "ungraded" and "lacks" in grade.reason
