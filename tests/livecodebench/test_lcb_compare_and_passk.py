"""Output comparison (LiveCodeBench-compatible, opt-in tolerance), code extraction and pass@k."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from evalsuite.errors import ConfigError
from evalsuite.graders.code import CodeGrader, last_code_block, pass_at_k, pass_at_k_by_problem
from evalsuite.records import Grade
from evalsuite.sandbox.checker import OutputMatcher

EXACT, LOOSE = OutputMatcher(), OutputMatcher(float_tolerance=1e-6)


@pytest.mark.parametrize(
    "got, expected, ok",
    [
        ("3\n", "3", True),
        ("  1 2  \n3\n\n", "1 2\n3", True),
        ("1.0 2\n", "1 2\n", True),  # Decimal equality
        ("0.3333\n", "0.33333\n", False),
        ("1 2\n", "1 2 3\n", False),
        ("Yes\n", "yes\n", False),
        ("1\n2\n", "1\n", False),
        ("", "", True),
    ],
)
def test_lines_match_like_livecodebench(got: str, expected: str, ok: bool) -> None:
    assert EXACT.lines_match(got, expected)[0] is ok


def test_float_tolerance_is_opt_in() -> None:
    assert not EXACT.lines_match("0.3333333\n", "0.33333333\n")[0]
    assert LOOSE.lines_match("0.3333333\n", "0.33333333\n")[0]
    assert not LOOSE.lines_match("0.33\n", "0.34\n")[0]
    assert not EXACT.values_match(0.30000000000000004, 0.3)
    assert LOOSE.values_match([0.30000000000000004, [1]], [0.3, [1]])
    assert EXACT.values_match([1, 2], [1, 2]) and not EXACT.values_match({1: 2}, {"1": 2})


def test_tolerance_changes_the_grader_version() -> None:
    assert CodeGrader().version != CodeGrader(float_tolerance=1e-6).version
    with pytest.raises(ConfigError, match="timeout"):
        CodeGrader(timeoutt=3)
    with pytest.raises(ConfigError, match="timeout_s"):
        CodeGrader(timeout_s="fast")
    with pytest.raises(ConfigError, match="first_block"):
        CodeGrader(extraction=["first_block"])


def test_last_code_block() -> None:
    text = "Plan:\n```python\nold()\n```\nBetter:\n```python\nnew()\nmore()\n```\ntrailing"
    assert last_code_block(text) == "new()\nmore()"
    assert last_code_block("```\nx = 1\n```") == "x = 1"
    assert last_code_block("no code here") is None
    assert last_code_block("```python\nunterminated") is None


def _brute_pass_at_k(n: int, c: int, k: int) -> float:
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    rng = random.Random(7)
    for _ in range(40):
        n = rng.randint(1, 9)
        c, k = rng.randint(0, n), rng.randint(1, n)
        assert math.isclose(pass_at_k(n, c, k), _brute_pass_at_k(n, c, k), abs_tol=1e-12)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_pass_at_k_by_problem_skips_ungraded() -> None:
    grades = [
        Grade("a", "correct", "x", ""),
        Grade("a", "incorrect", "x", ""),
        Grade("a", "ungraded", None, ""),
        Grade("b", "incorrect", "x", ""),
    ]
    assert pass_at_k_by_problem(grades, 1) == {"a": 0.5, "b": 0.0}
    assert pass_at_k_by_problem(grades, 2) == {"a": 1.0}
