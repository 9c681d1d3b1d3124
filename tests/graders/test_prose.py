"""Reading answers written in words: reasoning blocks, number words, filler, units, stated answers."""

from __future__ import annotations

import pytest

from evalsuite.graders.extract import final_answer_is, run_pipeline
from evalsuite.graders.prose import approximate_cue, math_head, number_words_to_digits, reduce_clause, strip_thinking
from evalsuite.graders.sentence import split_sentences, stated_answer

MATH_STEPS = ["last_boxed", "final_answer_is", "final_sentence"]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("<think>try 3... no, 4</think>\nThe answer is $\\boxed{4}$.", "\nThe answer is $\\boxed{4}$."),
        ("try 3... no, 4</think>So \\boxed{4}", "So \\boxed{4}"),  # the template opened the block
        ("<think>maybe \\boxed{3}, let me check the", ""),  # cut inside the reasoning: no answer
        ("No reasoning block: \\boxed{5}", "No reasoning block: \\boxed{5}"),
    ],
)
def test_strip_thinking(text: str, kept: str) -> None:
    assert strip_thinking(text) == kept


def test_a_box_inside_the_reasoning_is_not_the_answer() -> None:
    text = "<think>First guess \\boxed{3}. Hmm.</think>\nWorking it out again, the total is 4."
    found = run_pipeline(MATH_STEPS, text)
    assert found is not None and (found.step, found.answer) == ("final_sentence", "4")
    assert run_pipeline(MATH_STEPS, "<think>so it is \\boxed{3}, but wait") is None


@pytest.mark.parametrize(
    ("text", "digits"),
    [
        ("three boxes", "3 boxes"),
        ("twenty-five apples", "25 apples"),
        ("one hundred and two", "102"),
        ("two thousand and twenty-four", "2024"),
        ("Twelve", "12"),
        ("someone left", "someone left"),
    ],
)
def test_number_words(text: str, digits: str) -> None:
    assert number_words_to_digits(text) == digits


@pytest.mark.parametrize(
    ("part", "head"),
    [
        ("12π inches per second", "12π"),
        ("9 customers", "9"),
        ("2x + 3 dollars", "2x + 3"),
        ("12 m", "12"),
        ("x = 5", "x = 5"),
        ("3 + 2i", "3 + 2i"),
        ("\\sqrt{2} units", "\\sqrt{2}"),
        ("\\sin x + \\cos x", "\\sin x + \\cos x"),
    ],
)
def test_math_head_drops_the_words_after_the_math(part: str, head: str) -> None:
    assert math_head(part) == head


@pytest.mark.parametrize(
    ("clause", "answer"),
    [
        ("definitely \\(8000\\) since $20^3 = 8000$.", "8000"),
        ("indeed 6.", "6"),
        ("28 different pizzas", "28"),
        ("three boxes of crayons", "3"),
        ("40 chickens, 60 cows and 10 pigs", "40, 60, 10"),
        ("3, 4, and 5.", "3, 4, 5"),
        ("$40$ chickens, $60$ cows and $10$ pigs.", "40, 60, 10"),
        ("a = -2, b = -2", "a = -2, b = -2"),
        ("approximately 4.67 meters", "4.67"),
        ("$\\frac{3}{4}$ of the cake", "\\frac{3}{4}"),
        ("x = 5 because 2x = 10", "x = 5"),
    ],
)
def test_reduce_clause(clause: str, answer: str) -> None:
    assert reduce_clause(clause) == answer


def test_final_answer_is_keeps_only_the_answer() -> None:
    assert final_answer_is("So the final answer is 12π inches per second.").answer == "12π"  # type: ignore[union-attr]
    assert final_answer_is("The answer is: $\\boxed{7}$ apples").answer == "7"  # type: ignore[union-attr]
    assert final_answer_is("The answer is twenty-five.").answer == "25"  # type: ignore[union-attr]


def test_approximate_cue() -> None:
    assert approximate_cue("so x ≈ 4.67") and approximate_cue("which is approximately 4.67")
    assert approximate_cue("$x \\approx 4.67$") and not approximate_cue("so x = 4.67 exactly")
    assert approximate_cue("which is about 4.67") and not approximate_cue("Let us think about it: 4.67")


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Each exponent can be 0, 1 or 2, so the number of divisors is 9.", "9"),
        ("Therefore, Hillary has 7 nickels.", "7"),
        ("So the sum is indeed 284. I think that's the final answer.", "284"),
        ("We get\n\\[\nx = \\frac{3}{4}.\n\\]", "x = \\frac{3}{4}"),
        ("Adding, $2 + 3 + 4 = 9$.", "9"),
        ("Thus, there are $6$ possible values of $x$.", "6"),
        ("So $a = 3$ and $b = 5$.", "a = 3, b = 5"),
        ("The total is $\\$18.90$.", "\\$18.90"),
        ("Then $360 + 2x = 600$, or $x = 120$.", "x = 120"),
        ("Hence $17^{-1} \\equiv 44 \\pmod{83}$.", "44"),
        ("The bill is forty-two dollars.", "42"),
    ],
)
def test_stated_answer(text: str, answer: str) -> None:
    assert stated_answer(text) == answer


@pytest.mark.parametrize(
    "text",
    [
        "So far the total is 12 + 18 = 30 and then we still need to add the",  # stops mid-sentence
        "Then the value is $\\frac{3}{",  # stops inside math
        "I am not sure how to finish this problem.",  # states nothing
        "What is 3 + 4?",  # a question is not an answer
    ],
)
def test_stated_answer_refuses_unfinished_or_empty_text(text: str) -> None:
    assert stated_answer(text) is None


def test_sentences_are_never_cut_inside_math() -> None:
    text = "We compute\n\\[\na = 1.\nb = 2.\n\\]Therefore the sum is 3. Done."
    assert split_sentences(text) == ["We compute", "\\[\na = 1.\nb = 2.\n\\]", "Therefore the sum is 3.", "Done."]


def test_the_prose_fallback_never_fires_on_a_truncated_response() -> None:
    text = "Let me count again: 3 + 4 = 7. So far we have 7."
    assert run_pipeline(MATH_STEPS, text).answer == "7"  # type: ignore[union-attr]
    assert run_pipeline(MATH_STEPS, text, truncated=True) is None
    assert run_pipeline(["last_number"], text, truncated=True) is None
    boxed = run_pipeline(MATH_STEPS, "so \\boxed{7}", truncated=True)  # a finished box still counts
    assert boxed is not None and boxed.step == "last_boxed"
