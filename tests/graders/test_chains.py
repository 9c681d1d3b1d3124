"""A chain of equal values answers with its last member, for the value and for the form asked.

`\\boxed{\\frac{34}{100} = \\frac{17}{50}}` states the value and then the form
the response ends on; a problem that asks for lowest terms is answered.  The
near misses: a chain that ends unreduced, a false chain, a chain ending in a
rounding, and equations, which keep their meaning.
"""

from __future__ import annotations

import logging

import pytest
from grader_helpers import item

from evalsuite.graders.chains import chain_end
from evalsuite.graders.equiv import _parse_math, check_equivalence
from evalsuite.graders.math import MathGrader
from evalsuite.graders.normal_form import asked_forms

logging.getLogger("math_verify").setLevel(logging.ERROR)

FRACTION = "What fraction of the class passed? Express your answer as a common fraction."
SIMPLIFY = "Simplify $\\frac{34}{100}$."


@pytest.mark.parametrize(
    ("answer", "end"),
    [
        ("\\frac{34}{100} = \\frac{17}{50}", "\\frac{17}{50}"),
        ("\\frac{68}{200} = \\frac{34}{100} = \\frac{17}{50}", "\\frac{17}{50}"),
        ("2 + 3 = 5", "5"),
        ("\\frac{1}{4} = 0.25", "0.25"),
        ("\\sqrt{18} = 3\\sqrt{2}", "3\\sqrt{2}"),
        ("P = \\frac{34}{100} = \\frac{17}{50}", "P = \\frac{17}{50}"),  # a name before the chain stays
        ("P=\\frac{68}{200}=\\frac{34}{100}=\\frac{17}{50}", "P = \\frac{17}{50}"),
        # not a chain of equal values
        ("x = 5", None),
        ("y = 2x + 3", None),
        ("x = 2 = y", None),
        ("2x + 4 = 2(x + 2)", None),
        ("2 + 2 = 5", None),
        ("1 + 1 = 2 = 3", None),  # every member must agree, the last one included
        ("2 = 3 = 2", None),
        ("\\frac{14}{3} = 4.67", None),  # a rounding is not the value
        ("\\frac{1}{3} \\approx 0.33 = 0.33", None),
        ("1 \\le 2 = 2", None),
        ("\\frac{17}{50}", None),
        ("= 5", None),
    ],
)
def test_the_last_member_of_a_chain_of_values(answer: str, end: str | None) -> None:
    assert chain_end(answer, _parse_math) == end


@pytest.mark.parametrize(
    ("gold", "pred", "problem", "equal"),
    [
        ("\\frac{17}{50}", "\\frac{34}{100} = \\frac{17}{50}", FRACTION, True),
        ("\\frac{17}{50}", "\\frac{68}{200} = \\frac{34}{100} = \\frac{17}{50}", SIMPLIFY, True),
        ("\\frac{17}{50}", "P = \\frac{34}{100} = \\frac{17}{50}", FRACTION, True),
        ("5", "2 + 3 = 5", "Simplify $2 + 3$.", True),
        ("3\\sqrt{2}", "\\sqrt{18} = 3\\sqrt{2}", "Express it in simplest radical form.", True),
        # the last member is judged: a chain that ends unreduced is not in the form asked
        ("\\frac{17}{50}", "\\frac{17}{50} = \\frac{34}{100}", FRACTION, False),
        ("5", "5 = 2 + 3", "Simplify $2 + 3$.", False),
        ("3\\sqrt{2}", "3\\sqrt{2} = \\sqrt{18}", "Express it in simplest radical form.", False),
        # wrong values stay wrong
        ("\\frac{17}{50}", "\\frac{34}{100} = \\frac{17}{50} = \\frac{1}{3}", FRACTION, False),
        ("\\frac{3}{4}", "\\frac{3}{4} = \\frac{3}{5}", "", False),
        ("\\frac{14}{3}", "\\frac{14}{3} = 4.67", "", False),
        # equations keep their meaning
        ("5", "x = 5", "", True),
        ("2x + 3", "y = 2x + 3", "", True),
        ("y = 2x + 3", "y = 2x + 3", SIMPLIFY, True),
    ],
)
def test_a_chain_is_judged_by_its_last_member(gold: str, pred: str, problem: str, equal: bool) -> None:
    equivalence = check_equivalence(gold, pred, forms=asked_forms(problem))
    assert equivalence.equal is equal, equivalence.reason


def test_the_grade_says_which_member_was_compared() -> None:
    got = check_equivalence("\\frac{17}{50}", "\\frac{34}{100} = \\frac{17}{50}", forms=asked_forms(FRACTION))
    assert got.details["last_member"] == "\\frac{17}{50}"
    assert "last_member" not in check_equivalence("5", "x = 5").details


def test_the_grader_reads_a_boxed_or_stated_chain() -> None:
    texts = [
        "So the fraction is $\\boxed{\\frac{34}{100} = \\frac{17}{50}}$.",
        "The answer is $\\frac{34}{100} = \\frac{17}{50}$.",
        "So the fraction is $\\boxed{\\frac{17}{50} = \\frac{34}{100}}$.",
    ]
    grades = MathGrader().grade_batch(
        [item("\\frac{17}{50}", t, sid=str(i), problem=FRACTION) for i, t in enumerate(texts)], workers=1
    )
    assert [g.status for g in grades] == ["correct", "correct", "incorrect"]
    assert [g.details.get("step") for g in grades] == ["last_boxed", "final_answer_is", "last_boxed"]
