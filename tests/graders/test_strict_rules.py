"""Where equivalence must not be lenient: text, choice letters, renamings, normal forms, angles in minutes.

Each group pairs answers a careful human rejects with near misses the same
human accepts, so a rule that is tightened does not start rejecting right
answers.
"""

from __future__ import annotations

import logging

import pytest
from grader_helpers import item

from evalsuite.graders.equiv import check_equivalence
from evalsuite.graders.math import MathGrader
from evalsuite.graders.normal_form import asked_forms

logging.getLogger("math_verify").setLevel(logging.ERROR)


@pytest.mark.parametrize(
    ("gold", "pred", "equal"),
    [
        # words are compared as words, whichever side is wrapped in \text{}
        ("\\text{north}", "north", True),
        ("\\text{north}", "\\text{North}", True),
        ("\\text{north}", "\\text{south}", False),
        ("parabola", "\\text{parabola}", True),
        ("parabola", "\\text{a parabola}", True),  # an article is not part of the answer
        ("The sequence must be periodic", "\\text{The sequence must be periodic}", True),
        ("The sequence must be periodic", "\\text{a sequence that repeats}", False),
        ("The tower falls over sooner.", "\\text{later}", False),
        ("width, total width", "\\text{total height}", False),
        ("\\text{odd}", "\\text{even}", False),
    ],
)
def test_word_answers_are_compared_as_words(gold: str, pred: str, equal: bool) -> None:
    equivalence = check_equivalence(gold, pred)
    assert equivalence.equal is equal, equivalence.reason
    assert "rule" not in equivalence.details


@pytest.mark.parametrize(
    ("gold", "pred", "equal"),
    [
        ("B", "D", False),
        ("B", "(B)", True),
        ("B", "\\text{B}", True),
        ("\\text{E}", "A", False),
        ("\\mathrm{(D)}", "D", True),
        ("\\textbf{(A)}", "\\text{(C)}", False),
        ("C", "\\text{(C)} 2x + 1", True),
    ],
)
def test_choice_letters_are_compared_as_letters(gold: str, pred: str, equal: bool) -> None:
    equivalence = check_equivalence(gold, pred)
    assert equivalence.equal is equal, equivalence.reason
    assert "rule" not in equivalence.details


@pytest.mark.parametrize(
    ("gold", "pred", "equal"),
    [
        ("f(x) = x^2", "f(t) = t^2", True),
        ("3k + 1", "3n + 1", True),
        ("\\frac{1}{y + 1}", "\\frac{1}{x + 1}", True),
        ("g(s) = \\sqrt{s}", "g(u) = \\sqrt{u}", True),
        # a bare letter is a name or a choice, never a renamed variable
        ("x", "t", False),
        ("a", "c", False),
        ("n", "k + 0", False),
        # letters of words are not variables
        ("\\text{fast}", "\\text{slow}", False),
        ("fast", "\\text{slow}", False),
        ("2m + 1", "2k + 1", True),
    ],
)
def test_renaming_applies_only_to_expressions_in_variables(gold: str, pred: str, equal: bool) -> None:
    equivalence = check_equivalence(gold, pred)
    assert equivalence.equal is equal, equivalence.reason


@pytest.mark.parametrize(
    ("gold", "pred", "equal"),
    [
        ("35^\\circ 20'", "35^\\circ", False),
        ("35^\\circ 20'", "35", False),
        ("35^\\circ 20'", "35^\\circ 20'", True),
        ("35^\\circ 20'", "35^{\\circ}\\, 20^{\\prime}", True),
        ("35^\\circ 20'", "35° 20′", True),
        ("35^\\circ 20'", "35^\\circ 21'", False),
        ("12^\\circ 30' 36''", "12.51^\\circ", True),
        ("12^\\circ 30'", "12.5^\\circ", True),
        ("12^\\circ 30'", "12^\\circ 3'", False),
    ],
)
def test_minutes_and_seconds_of_arc_count(gold: str, pred: str, equal: bool) -> None:
    assert check_equivalence(gold, pred).equal is equal


PLANE = (
    "Find the equation of the plane. Enter your answer in the form $Ax + By + Cz + D = 0,$ where $A,$ $B,$ $C,$ $D$ "
    "are integers such that $A > 0$ and $\\gcd(|A|,|B|,|C|,|D|) = 1.$"
)
LINE = "Find the line through the points. Give it as $ax + by = c$ with integers $a, b, c$ whose gcd is 1."
SIMPLIFY = "Simplify $\\frac{3}{4} \\cdot \\frac{1}{12}$."
FRACTION = "What fraction of the marbles is red? Express your answer as a common fraction."
RADICAL = "Find the length of the diagonal. Express your answer in simplest radical form."
LOWEST = "Write the ratio in lowest terms."
PLAIN = "What is $\\frac{3}{4} \\cdot \\frac{1}{12}$?"


@pytest.mark.parametrize(
    ("problem", "forms"),
    [
        (PLANE, {"integer_coefficients", "positive_leading"}),
        (LINE, {"integer_coefficients"}),
        (SIMPLIFY, {"simplest"}),
        (FRACTION, {"simplest"}),
        (RADICAL, {"simplest"}),
        (LOWEST, {"simplest"}),
        (PLAIN, set()),
        ("Round to the nearest tenth.", set()),
    ],
)
def test_the_problem_names_the_form(problem: str, forms: set[str]) -> None:
    assert asked_forms(problem) == forms


@pytest.mark.parametrize(
    ("gold", "pred", "problem", "equal"),
    [
        ("2x - 3y + z - 4 = 0", "4x - 6y + 2z - 8 = 0", PLANE, False),  # not gcd 1
        ("2x - 3y + z - 4 = 0", "-2x + 3y - z + 4 = 0", PLANE, False),  # A > 0 asked
        ("2x - 3y + z - 4 = 0", "2x - 3y + z = 4", PLANE, True),
        ("2x - 3y + z - 4 = 0", "2x + z - 3y - 4 = 0", PLANE, True),
        ("2x - 3y + z - 4 = 0", "2x - 3y + z - 4 = 0", PLANE, True),
        ("3x + 2y = 7", "6x + 4y = 14", LINE, False),
        ("3x + 2y = 7", "-3x - 2y = -7", LINE, True),  # no sign asked
        ("2x - 3y + z - 4 = 0", "4x - 6y + 2z - 8 = 0", "Find the plane.", True),  # no form asked: scaling is fine
        ("\\frac{1}{16}", "\\frac{1}{4} \\cdot \\frac{1}{4}", SIMPLIFY, False),
        ("\\frac{1}{16}", "\\frac{2}{32}", SIMPLIFY, False),
        ("\\frac{1}{16}", "2^{-4}", SIMPLIFY, False),
        ("\\frac{1}{16}", "\\frac{1}{16}", SIMPLIFY, True),
        ("\\frac{1}{16}", "1/16", SIMPLIFY, True),
        ("\\frac{1}{16}", "\\frac{2}{32}", PLAIN, True),  # no form asked: the value is what counts
        ("\\frac{5}{12}", "\\frac{10}{24}", FRACTION, False),
        ("\\frac{5}{12}", "\\frac{5}{12}", FRACTION, True),
        ("3\\sqrt{2}", "\\sqrt{18}", RADICAL, False),
        ("3\\sqrt{2}", "\\frac{6}{\\sqrt{2}}", RADICAL, False),
        ("\\frac{\\sqrt{6}}{3}", "\\frac{2\\sqrt{6}}{6}", RADICAL, False),
        ("3\\sqrt{2}", "3\\sqrt2", RADICAL, True),
        ("2 + \\sqrt{3}", "\\sqrt{3} + 2", RADICAL, True),
        ("3\\sqrt{2}", "\\sqrt{18}", "", True),  # no form asked
        ("\\frac{7}{12}", "\\frac{14}{24}", LOWEST, False),
        ("7", "3 + 4", LOWEST, False),
        ("2x + 1", "1 + 2x", "Simplify $(x+1)^2 - x^2$.", True),
        ("2^{10}", "2^{10}", SIMPLIFY, True),  # the reference's own form is never a defect
    ],
)
def test_a_requested_normal_form_is_graded(gold: str, pred: str, problem: str, equal: bool) -> None:
    equivalence = check_equivalence(gold, pred, forms=asked_forms(problem))
    assert equivalence.equal is equal, equivalence.reason


def test_the_grader_reads_the_form_from_the_problem() -> None:
    grades = MathGrader().grade_batch(
        [
            item("2x - 3y + z - 4 = 0", "\\boxed{4x - 6y + 2z - 8 = 0}", sid="scaled", problem=PLANE),
            item("2x - 3y + z - 4 = 0", "\\boxed{2x - 3y + z = 4}", sid="moved", problem=PLANE),
        ],
        workers=1,
    )
    assert [g.status for g in grades] == ["incorrect", "correct"]
    assert grades[0].details.get("form") and "form" in grades[0].reason
