"""A value restated in the same sentence is read as its restatement, the form the response ends on.

"the ratio is indeed 150/200, which simplifies to 3/4" answers 3/4, and a
problem that asks for lowest terms must not be refused for 150/200.  The near
misses keep what is not a restatement: an aside that says something else
about the value, an alternative between different values, an approximation,
a conversion into another unit, and a value inside a larger expression.
"""

from __future__ import annotations

import pytest
from grader_helpers import item

from evalsuite.graders.extract import run_pipeline
from evalsuite.graders.math import MathGrader
from evalsuite.graders.restate import restate

MATH_STEPS = ["last_boxed", "final_answer_is", "final_sentence"]
FRACTION = "What fraction of the class passed? Express your answer as a common fraction."


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        # a simplification: its result, whatever words follow it
        ("Therefore, the ratio is indeed 150/200, which simplifies to 3/4.", "3/4"),
        ("The answer is 150/200, which reduces to 3/4.", "3/4"),
        ("So the probability is $\\frac{6}{36}$, which simplifies to $\\frac{1}{6}$.", "\\frac{1}{6}"),
        ("The side is $\\frac{6}{\\sqrt{2}}$, which simplifies to $3\\sqrt{2}$ units.", "3\\sqrt{2}"),
        ("The ratio is $\\frac{\\sqrt{8}}{\\sqrt{2}}$, which simplifies to 2.", "2"),  # only one side is plain
        ("The area is 50/2, which simplifies to 25 square units.", "25"),
        ("So the fraction is 34/100, or in lowest terms, 17/50.", "17/50"),
        ("It is 150/200, which simplifies to 15/20, which reduces to 3/4.", "3/4"),  # restated twice
        # a restatement: its second value, where that ends the clause
        ("So the probability is $\\frac{6}{36}$, i.e., $\\frac{1}{6}$.", "\\frac{1}{6}"),
        ("The fraction is $\\frac{34}{100}$, or equivalently $\\frac{17}{50}$.", "\\frac{17}{50}"),
        ("The fraction is 34/100 (that is, 17/50).", "17/50"),
        ("The ratio is $\\frac{150}{200}$, which can be written as $\\frac{3}{4}$.", "\\frac{3}{4}"),
        # an equality or an alternative between plain numbers of the same value
        ("The probability is 6/36, which is 1/6.", "1/6"),
        ("The probability is 1/4, or 25%.", "25%"),
        ("The probability is $\\frac{1}{4}$, or $25\\%$.", "25\\%"),
        ("The ratio is 150/200, which is the same as 3/4.", "3/4"),
        ("The fraction is 34/100 (or 17/50).", "17/50"),
        # near misses: not a restatement of the value
        ("The answer is 12, which is 3 more than 9.", "12"),
        ("So $k$ can be 2, or 3.", "2, 3"),
        ("The answer is $x = 2$, or $x = -2$.", "x = 2, x = -2"),
        ("The probability is 1/3, which is about 0.33.", "1/3"),
        ("The answer is 90 minutes, which is 1.5 hours.", "90"),
        ("The answer is $\\frac{\\pi}{4}$, or $45^\\circ$.", "\\frac{\\pi}{4}, 45^\\circ"),
    ],
)
def test_a_restated_value_is_read_as_its_restatement(text: str, answer: str) -> None:
    found = run_pipeline(MATH_STEPS, text)
    assert found is not None and found.answer == answer


@pytest.mark.parametrize(
    "text",
    [
        "The total is 2 + 150/200, which simplifies to 2.75.",  # the value is part of a sum
        "Pick the multiple of 12 that is 60.",
        "So Bob has 12, i.e. 3 more than Ann.",  # what follows is not a value alone  # "that is" without a comma describes, it does not restate
        "It costs $5, or $6 with tax.",
    ],
)
def test_what_is_not_a_restatement_is_left_alone(text: str) -> None:
    assert restate(text) == text


@pytest.mark.parametrize(
    ("text", "rewritten"),
    [
        ("Here 2/4, which simplifies to 1/2, and 6/8, which simplifies to 3/4.", "Here 1/2, and 3/4."),
        (
            "Then 2 + 150/200, which simplifies to 2.75, and 6/36, which simplifies to 1/6.",
            "Then 2 + 150/200, which simplifies to 2.75, and 1/6.",
        ),
    ],
)
def test_every_restatement_in_a_text_is_rewritten(text: str, rewritten: str) -> None:
    assert restate(text) == rewritten


def test_a_simplification_that_changes_the_value_states_two_answers() -> None:
    assert restate("The answer is 150/200, which simplifies to 3/5.") == "The answer is 150/200 and 3/5."
    assert (
        restate("The answer is $\\frac{3}{5}$, i.e. $\\frac{3}{4}$.")
        == "The answer is $\\frac{3}{5}$ and $\\frac{3}{4}$."
    )


def test_the_grader_reads_the_form_a_response_ends_on() -> None:
    texts = [
        "There are 150 passes among 200 students, so the ratio is indeed 150/200, which simplifies to 3/4.",
        "There are 150 passes among 200 students, so the ratio is 150/200.",  # not in lowest terms
        "So the ratio is 150/200, which simplifies to 3/5.",  # the response ends on a wrong value
        "So the ratio is 3/5, which simplifies to 3/4.",  # two different values: neither is the answer
    ]
    grades = MathGrader().grade_batch(
        [item("\\frac{3}{4}", t, sid=str(i), problem=FRACTION) for i, t in enumerate(texts)], workers=1
    )
    assert [g.status for g in grades] == ["correct", "incorrect", "incorrect", "incorrect"]
    assert grades[0].extracted == "3/4"
    assert grades[1].details.get("form") == "a fraction not in lowest terms"
