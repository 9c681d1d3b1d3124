"""The comparison's building blocks called directly: worded boxes, numeric evaluation, the lenient rules."""

from __future__ import annotations

import logging

import pytest

from evalsuite.graders.equiv import check_equivalence, parse_boxed
from evalsuite.graders.forms import reduce_answer, split_top_level
from evalsuite.graders.numeric import numeric_equal

logging.getLogger("math_verify").setLevel(logging.ERROR)


def math(latex: str) -> object:
    return next(p for p in parse_boxed(latex) if not isinstance(p, str))


@pytest.mark.parametrize(
    ("boxed", "reduced"),
    [
        ("12^{\\mathrm{th}} \\text{ grade}", "12"),
        ("3\\text{rd}", "3"),
        ("5 \\text{ cm}^2", "5"),
        ("40 \\text{ chickens}, 60 \\text{ cows}", "40, 60"),
        ("3 \\text{ and } 5", "3, 5"),
        ("60 \\text{ degrees}", "60^\\circ"),
        ("\\text{Evelyn}", "\\text{Evelyn}"),  # a word answer stays a word answer
        ("\\text{(C)}", "\\text{(C)}"),
        ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
        ("\\cot x", "\\cot x"),
        ("(1, 2)", "(1, 2)"),
    ],
)
def test_reduce_answer(boxed: str, reduced: str) -> None:
    assert reduce_answer(boxed) == reduced


def test_split_top_level_respects_brackets() -> None:
    assert split_top_level("(1, 2), \\{3, 4\\}, [5, 6)") == ["(1, 2)", "\\{3, 4\\}", "[5, 6)"]


@pytest.mark.parametrize(
    ("gold", "pred", "expected"),
    [
        ("\\frac{\\sqrt{3}}{2}", "\\sin(\\pi/3)", True),
        ("x^2+7x+10", "(x+5)(x+2)", True),
        ("x^2+7x+10", "(x+5)(x+3)", False),
        ("p - q", "-(q - p)", True),
        ("1", "\\omega^{1997} + \\omega^{-1997}", False),  # not constant: never equal to a number
        ("x", "y", None),  # different variables: the symbolic check (or the rename rule) decides
        ("\\frac{1}{3}", "0.333333", None),  # decimals: math-verify's rounding rules decide
    ],
)
def test_numeric_equal(gold: str, pred: str, expected: bool | None) -> None:
    assert numeric_equal(math(gold), math(pred)) is expected


def test_expressions_sympy_is_slow_on_are_decided_by_evaluation() -> None:
    """Decided by evaluation means sympy's simplify (minutes on such input) never ran."""
    equivalence = check_equivalence(
        "0", "\\omega^{2024} + \\omega^{2025} + \\omega^{2026} - \\omega^{2024}(1 + \\omega + \\omega^2)"
    )
    assert equivalence.equal and equivalence.details.get("numeric") is True


@pytest.mark.parametrize(
    ("gold", "pred", "equal"),
    [
        ("52_8", "52_8", True),
        ("52_8", "52", True),  # the base left off
        ("52_8", "52_9", False),  # math-verify drops the base and says equal
        ("52_8", "42", False),  # the value in base ten is not the numeral asked for
        ("4210_{5}", "4210_5", True),
    ],
)
def test_numerals_in_other_bases(gold: str, pred: str, equal: bool) -> None:
    assert check_equivalence(gold, pred).equal is equal


@pytest.mark.parametrize(
    ("gold", "pred", "kwargs", "rule"),
    [
        ("\\frac{14}{3}", "4.67", {"approx": True}, "approximation"),
        ("2\\sqrt{2}", "2.8", {"precision": True}, "approximation"),
        ("(3, \\infty)", "x > 3", {}, "as_set"),
        ("(5, \\infty)", "\\{x \\mid x > 5\\}", {}, "as_set"),
        ("-2, -2", "a = -2, b = -2", {}, "labelled_parts"),
        ("2x - y + 3z = 4", "-4x + 2y - 6z + 8 = 0", {}, None),  # math-verify already sees it
        ("f(x) = 3x - 1", "f(t) = 3t - 1", {}, "renamed"),
        ("\\frac{\\pi}{3}", "60^\\circ", {}, "degrees"),
    ],
)
def test_lenient_rules_accept_and_say_which(gold: str, pred: str, kwargs: dict[str, bool], rule: str | None) -> None:
    equivalence = check_equivalence(gold, pred, **kwargs)
    assert equivalence.equal, equivalence.reason
    assert equivalence.details.get("rule") == rule


@pytest.mark.parametrize(
    ("gold", "pred", "kwargs"),
    [
        ("\\frac{14}{3}", "4.67", {}),  # no approximation asked for or stated
        ("\\frac{14}{3}", "4.66", {"approx": True}),  # truncated, not rounded
        ("\\sqrt{2}", "1.4", {"approx": True}),  # too few digits when no precision is named
        ("(3, \\infty)", "x \\ge 3", {}),
        ("(3, -1)", "x = -1, y = 3", {}),
        ("x - y", "y - x", {}),  # two variables are never swapped
        ("2k + 2", "2n + 4", {}),
        ("\\frac{\\pi}{3}", "60", {}),  # no degree mark
        ("\\frac{\\pi}{3}", "30^\\circ", {}),
        ("2x - y + 3z = 4", "2x - y + 3z = -4", {}),
    ],
)
def test_lenient_rules_reject_near_misses(gold: str, pred: str, kwargs: dict[str, bool]) -> None:
    assert not check_equivalence(gold, pred, **kwargs).equal


@pytest.mark.parametrize(
    ("gold", "pred", "expected"),
    [
        ("\\{1\\pm\\sqrt{5},-2\\}", "-2, 1+\\sqrt{5}, 1-\\sqrt{5}", True),  # a set, in any order
        ("(6,31,-1)", "(6,31,-2)", False),  # a tuple, in order
        ("1, 2", "\\omega^{3}, \\omega^{2024} + 1", False),  # set elements in powers of omega stay fast
    ],
)
def test_sets_and_tuples_are_evaluated_element_by_element(gold: str, pred: str, expected: bool) -> None:
    equivalence = check_equivalence(gold, pred)
    assert equivalence.equal is expected and equivalence.details.get("numeric") is True, equivalence.reason
