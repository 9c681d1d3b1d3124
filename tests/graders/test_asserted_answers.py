"""Reading the value a response asserts: main clause over asides, currency over math, markers, words.

Each group is a class of misreading: a sentence whose last math span or
number word is not its answer, a dollar sign that is money rather than a
math delimiter, an end-of-turn marker after the last line, and an answer
that is a word.  Every group keeps near misses that were already read right.
"""

from __future__ import annotations

import pytest

from evalsuite.graders.extract import final_answer_is, run_pipeline
from evalsuite.graders.prose import MATH_SPAN, mark_currency, strip_markers
from evalsuite.graders.sentence import stated_answer

MATH_STEPS = ["last_boxed", "final_answer_is", "final_sentence"]


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        # a math span in the subject or in an aside; the value follows the main verb
        ("Hence the least such $k$, given that $k \\equiv 3 \\pmod{5}$, is 8.", "8"),
        ("So the remainder of \\(7^{100}\\) upon division by 5 is 1.", "1"),
        ("Therefore the tens digit of $3^{2024}$ is 8.", "8"),
        ("Thus the number of subsets of $\\{1, 2, 3\\}$ is 8.", "8"),
        ("The sum of the roots of $x^2 - 5x + 6 = 0$ equals 5.", "5"),
        ("The largest prime factor of $2^{10} - 1$ is $31$.", "31"),
        # the subject is the value and the predicate only says it is the answer
        ("So 2025 is the correct count of integers with at least two digits.", "2025"),
        ("After checking every case, 64 is the right answer.", "64"),
        ("I believe $\\frac{3}{8}$ is the final answer.", "\\frac{3}{8}"),
        ("Given $n = 4$, 17 is the required number of moves for one disk less.", "17"),
        # an aside after the asserted value is not the answer
        ("The answer is 12, which is 3 more than 9.", "12"),
        # near misses that were already read right
        ("Thus, there are $6$ possible values of $x$.", "6"),
        ("So $a = 3$ and $b = 5$.", "a = 3, b = 5"),
        ("Therefore the probability is $\\frac{15}{36} = \\frac{5}{12}$.", "\\frac{5}{12}"),
        ("Therefore, Hillary has 7 nickels.", "7"),
        ("So the farmer has 40 chickens, 50 cows and 20 pigs.", "40, 50, 20"),
        ("The side lengths of the triangle are 3, 4, and 5.", "3, 4, 5"),
        ("Then multiply by 10 to find that $40$ daps are equal to 70 yaps.", "40"),  # the subject is the value
        ("The angle sum is $360^\\circ$, so $\\angle J + \\angle H = 180^\\circ$.", "180^\\circ"),
        ("Then $360 + 2x = 600$, or $x = 120$.", "x = 120"),
        ("Since 7 is prime, the answer is 8.", "8"),
        ("So the number of ways is 3 \\cdot 4 = 12.", "12"),
    ],
)
def test_the_value_the_sentence_asserts_is_read(text: str, answer: str) -> None:
    assert stated_answer(text) == answer


@pytest.mark.parametrize(
    ("text", "marked"),
    [
        ("Revenue: $120 - $45 = $75.", "Revenue: \\$120 - \\$45 = \\$75."),
        ("It costs $5 and $6.", "It costs \\$5 and \\$6."),
        ("I'd say $3400 is the right answer.", "I'd say \\$3400 is the right answer."),
        ("Each costs $5, so $x = 5$.", "Each costs \\$5, so $x = 5$."),
        # math delimiters stay
        ("So $5$ apples.", "So $5$ apples."),
        ("So $x=3$.", "So $x=3$."),
        ("$x$ costs $5 in all", "$x$ costs \\$5 in all"),
        ("We have $$2+2$$ and $\\$4$.", "We have $$2+2$$ and $\\$4$."),
        ("Then $3 + 4 = 7$ and $7 \\cdot 2 = 14$.", "Then $3 + 4 = 7$ and $7 \\cdot 2 = 14$."),
    ],
)
def test_currency_dollars_are_told_from_math_delimiters(text: str, marked: str) -> None:
    assert mark_currency(text) == marked
    assert mark_currency(marked) == marked  # idempotent


def test_a_currency_dollar_opens_no_math_span() -> None:
    assert [m.group(0) for m in MATH_SPAN.finditer(mark_currency("Pay $5 and $x + 1$ more"))] == ["$x + 1$"]


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Revenue: $120 - $45 = $75.", "\\$75"),
        ("I'd say $3400 is the right answer.", "\\$3400"),
        ("She pays $12 and he pays $8, so together they pay $20.", "\\$20"),
        ("It costs $5 and $6 respectively, so the total is $11$.", "11"),
    ],
)
def test_amounts_in_dollars_are_read(text: str, answer: str) -> None:
    found = run_pipeline(MATH_STEPS, text)
    assert found is not None and found.answer == answer


def test_the_answer_is_an_amount_in_dollars() -> None:
    found = final_answer_is("So the answer is $45.")
    assert found is not None and found.answer == "\\$45"


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("So we obtain\n$$\\cos B = \\frac{3}{5}$$\n<|end_of_solution|>", "\\frac{3}{5}"),
        ("The perimeter is 24.<|im_end|>", "24"),
        ("Thus $k = 7$.</s>", "k = 7"),
        ("Hence the total is 30.\n<|eot_id|>", "30"),
        ("So the side is\n\\[ s = 9 \\]\n<end_of_turn>", "s = 9"),
        ("We get 5.<｜end▁of▁sentence｜>", "5"),
        (
            "<|begin_of_thought|>maybe \\boxed{3}?<|end_of_thought|>\n<|begin_of_solution|>The value is 4."
            "<|end_of_solution|>",
            "4",
        ),
    ],
)
def test_end_markers_do_not_make_a_finished_response_look_cut(text: str, answer: str) -> None:
    found = run_pipeline(MATH_STEPS, text)
    assert found is not None and found.answer == answer


def test_strip_markers_leaves_text_without_markers_alone() -> None:
    assert strip_markers("a < b and c > d, so |x| = 2.") == "a < b and c > d, so |x| = 2."
    assert (
        strip_markers("So far the total is 12 + 18 = 30 and then<|im_end|>")
        == "So far the total is 12 + 18 = 30 and then"
    )
    assert run_pipeline(MATH_STEPS, "So far the total is 12 + 18 = 30 and then<|im_end|>") is None


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Facing the other way, the final answer is north.", "\\text{north}"),
        ("The answer is: odd.", "\\text{odd}"),
        ("So the final answer is Tuesday.", "\\text{Tuesday}"),
        ("Hence the answer is **hyperbola**.", "\\text{hyperbola}"),
    ],
)
def test_a_word_answer_is_read_as_words(text: str, answer: str) -> None:
    found = final_answer_is(text)
    assert found is not None and found.answer == answer


@pytest.mark.parametrize(
    "text",
    [
        "The answer is clear. Counting gives 12 in total.",  # a number stated later: not a word answer
        "The answer is not obvious; after all the working we get 7.",
    ],
)
def test_a_word_is_not_the_answer_when_a_number_is_stated_after_it(text: str) -> None:
    found = run_pipeline(MATH_STEPS, text)
    assert found is not None and found.step == "final_sentence"
