"""The comparison's building blocks called directly: worded boxes, numeric evaluation, the lenient rules."""

from __future__ import annotations

import logging

import pytest

from evalsuite.graders.equiv import check_equivalence, normalize, parse_boxed
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


# A grade explains itself: each branch of the check gives its own reason. Expected values are worked by hand
# from the rule each row names (60°42' is 60 + 42/60 = 607/10 degrees; `1, -2` is two answers).
@pytest.mark.parametrize(
    ("gold", "pred", "equal", "reason"),
    [
        ("", "3", False, "the reference answer is empty"),
        ("3", " 3 ", True, "identical after normalisation"),
        ("\\text{(C)}", "(C)", True, "choice letters equal: (C) vs (C)"),
        ("B", "d", False, "choice letters differ: (B) vs (D)"),
        ("B", "7", False, "the reference is choice (B); the prediction is not a choice letter"),
        ("\\text{north}", "South", False, "word answer differs: 'north' vs 'south'"),
        ("\\text{The North}", "north", True, "word answer equal: 'north' vs 'north'"),
        ("52_8", "52", True, "base-8 numerals equal: 52 vs 52"),
        ("5 \\text{ cm}", "5", True, "identical after removing words and units"),
        ("1,000", "1000", True, "integers equal: 1000 vs 1000"),
        ("10{,}000", "1\\!0000", True, "integers equal: 10000 vs 10000"),
        ("7", "-7", False, "integers differ: 7 vs -7"),
        ("\\frac{3}{4}", "0.75", True, "numbers equal: 3/4"),
        ("-\\frac{3}{4}", "-0.75", True, "numbers equal: -3/4"),
        ("-3/4", "-\\dfrac34", True, "numbers equal: -3/4"),
        ("\\tfrac{3}{4}", "\\frac{6}{8}", True, "numbers equal: 3/4"),
        ("\\frac34", "3/5", False, "numbers differ: 3/4 vs 3/5"),
        ("3", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", False, "a number against a matrix"),
        ("3", "(1, 2)", False, "a number against an interval or tuple"),
        ("(1, 2)", "3", False, "a number against an interval or tuple"),
        ("@@", "3", False, "the reference did not parse as math and the strings differ"),
        ("x+1", "@@", False, "the prediction did not parse as math"),
        ("1, -2", "1", False, "the reference has 2 answers; the prediction gives 1"),
        ("x = 1, 2", "x = 1", False, "the reference has 2 answers; the prediction gives 1"),
        ("2\\pm\\sqrt3", "2+\\sqrt3", False, "the reference has 2 answers; the prediction gives 1"),
        ("1, 3", "2 \\pm 1", True, "numeric evaluation: equal"),
        ("2\\mp 1", "1, 3", True, "numeric evaluation: equal"),
        ("\\sqrt{2}", "2^{1/2}", True, "numeric evaluation: equal"),
        ("\\sqrt{2}", "2^{1/3}", False, "numeric evaluation: not equal"),
        ("0.5", "\\frac{1}{3}", False, "numeric evaluation: not equal"),  # a decimal: past the exact-number rule
        ("25\\%", "25", True, "math-verify: equal"),  # a percent sign: math-verify's reading, not evaluation
        ("\\frac13", "0.333", False, "math-verify: not equal"),
        ("90^\\circ", "\\frac{\\pi}{2}", True, "degrees: the same angle in degrees and radians"),
    ],
)
def test_each_branch_gives_its_reason(gold: str, pred: str, equal: bool, reason: str) -> None:
    equivalence = check_equivalence(gold, pred)
    assert (equivalence.equal, equivalence.reason) == (equal, reason)


def test_the_parsed_forms_are_shown_and_cut_at_200_characters() -> None:
    equivalence = check_equivalence("x+1", "@@")
    assert equivalence.details == {"gold_parsed": "x + 1", "pred_parsed": "None"}
    assert check_equivalence("\\sqrt{2}", "2^{1/3}").details == {
        "gold_parsed": "sqrt(2)",
        "pred_parsed": "2**(1/3)",
        "numeric": True,
    }
    long = " + ".join(f"x^{{{i}}}" for i in range(1, 61))
    shown = check_equivalence(long, long + " + 1").details["gold_parsed"]
    assert len(shown) == 200 and shown.endswith("...") and shown.startswith("x**60 + x**59")


def test_an_equal_value_in_the_wrong_form_says_which_form() -> None:
    equivalence = check_equivalence("\\frac{1}{16}", "\\frac{2}{32}", forms=frozenset({"simplest"}))
    assert not equivalence.equal
    assert equivalence.reason.startswith("equal value, but not in the form the problem asks for: ")
    assert equivalence.details["form"] == equivalence.reason.split(": ", 1)[1]
    radical = check_equivalence("3\\sqrt{2}", "\\sqrt{18}", forms=frozenset({"simplest"}))
    assert not radical.equal and radical.details["gold_parsed"] == "3*sqrt(2)"  # the value check's evidence kept
    joined = check_equivalence("1, -2", "1", joined="1, -2", forms=frozenset({"simplest"}))
    assert joined.equal  # the form is read from the joined answers the value check used


@pytest.mark.parametrize(
    ("answer", "normal"),
    [
        ("60^\\circ 42'", "\\frac{607}{10}^\\circ"),
        ("12^\\circ 30' 36''", "\\frac{1251}{100}^\\circ"),
        ("35° 20′", "\\frac{106}{3}^\\circ"),
        ("60°30'", "\\frac{121}{2}^\\circ"),
        ("45° 0'", "45^\\circ"),  # a whole number of degrees stays a whole number
        ("45°", "45^\\circ"),
        ("\\varnothing", "\\emptyset"),
        ("−3", "-3"),
        ("2×3", "2\\times 3"),
        ("\\textbf{A}", "\\text{A}"),
        ("\\displaystyle\\frac12", "\\frac12"),
        ("\\mathbf{v}", "{v}"),
        ("\\$5", "5"),
        ("$5$", "5"),
        ("\\(x\\)", "x"),
        ("\\[y\\]", "y"),
        ("x.", "x"),
        ("5.", "5."),  # a trailing point after a digit is left to the number parser
        (" 3.5 ", "3.5"),
    ],
)
def test_normalize(answer: str, normal: str) -> None:
    assert normalize(answer) == normal
