"""Whole responses in the styles chat models write, graded end to end (extraction, then comparison)."""

from __future__ import annotations

import pytest
from grader_helpers import item

from evalsuite.graders.math import MathGrader
from evalsuite.records import Grade

# (reference, response, truncated, status, step)
RESPONSES: list[tuple[str, str, bool, str, str | None]] = [
    (
        "36",
        "<think>\nThe divisors of 36... 1, 2, 3, 4, 6, 9, 12, 18, 36. Maybe \\boxed{9}? No, the question asks for the "
        "largest proper square factor times... let me redo.\n</think>\n\nThe product is $6^2 = 36$.\n\n"
        "**Final Answer**\n\\[\n\\boxed{36}\n\\]",
        False,
        "correct",
        "last_boxed",
    ),
    (
        "7",
        "Let $n$ be the number of nickels and $d$ the number of dimes.\n\nWe have $n + d = 12$ and "
        "$5n + 10d = 85$. Substituting $d = 12 - n$ gives $5n + 120 - 10n = 85$, so $5n = 35$.\n\n"
        "Therefore, Hillary has 7 nickels.",
        False,
        "correct",
        "final_sentence",
    ),
    (
        "9",
        "Since $36 = 2^2 \\cdot 3^2$, each exponent can be 0, 1 or 2, giving $3 \\cdot 3$ choices. "
        "So the number of positive divisors is 9. I think that's the final answer.",
        False,
        "correct",
        "final_sentence",
    ),
    (
        "9",
        "Since $36 = 2^2 \\cdot 3^2$, each exponent can be 0, 1 or 2, giving $3 \\cdot 3$ choices, so the number "
        "of positive divisors is",
        True,
        "incorrect",
        None,  # cut by max_tokens right before the answer: the 3 before it is noise
    ),
    (
        "8000",
        "## Step 1: Volume of the cube\nThe side is 20 cm, so the volume is $20^3$.\n\n"
        "## Step 2: Conclusion\nThe final answer is definitely \\(8000\\) cubic centimetres.",
        False,
        "correct",
        "final_answer_is",
    ),
    (
        "\\frac{14}{3}",
        "Solving $3x - 14 = 0$ gives $x = \\frac{14}{3} \\approx 4.67$.\n\nThe answer is approximately $\\boxed{4.67}$.",
        False,
        "correct",
        "last_boxed",
    ),
    (
        "40, 60, 10",
        "So the farmer has 40 chickens, 50 cows and 20 pigs.",
        False,
        "incorrect",
        "final_sentence",  # the first number is right, the others are not
    ),
    (
        "12",
        "Counting the years from first grade, she is in $\\boxed{12^{\\mathrm{th}} \\text{ grade}}$.",
        False,
        "correct",
        "last_boxed",
    ),
    (
        "(3, \\infty)",
        "The expression is defined when $x - 3 > 0$, so the domain is $\\boxed{x > 3}$.",
        False,
        "correct",
        "last_boxed",
    ),
]


@pytest.fixture(scope="module")
def grades() -> list[Grade]:
    items = [item(ref, text, sid=str(i), truncated=cut) for i, (ref, text, cut, _, _) in enumerate(RESPONSES)]
    return MathGrader().grade_batch(items, workers=2)


@pytest.mark.parametrize("index", range(len(RESPONSES)))
def test_response_graded_as_a_careful_reader_would(grades: list[Grade], index: int) -> None:
    _, _, truncated, status, step = RESPONSES[index]
    grade = grades[index]
    assert grade.status == status, (grade.extracted, grade.reason)
    assert grade.details.get("step") == step
    assert grade.details["truncated"] is truncated
