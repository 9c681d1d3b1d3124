"""The equivalence guards each decide a case: inputs where removing one changes the grade or its stated reason."""

from __future__ import annotations

import logging
import threading
from fractions import Fraction

import pytest

from evalsuite.graders import equiv
from evalsuite.graders.equiv import (
    _has_text,
    _show,
    check_equivalence,
    is_text,
)
from evalsuite.graders.plain_numbers import plain_rational

logging.getLogger("math_verify").setLevel(logging.ERROR)

SIMPLEST = frozenset({"simplest"})


@pytest.mark.parametrize(
    ("gold", "pred", "equal", "reason"),
    [
        # whitespace alone never separates two answers, and says so before any parsing
        ("x^2 + 1", "x^2+1", True, "identical after normalisation"),
        # an integer against a fraction is settled exactly, not left to rounding rules
        ("3", "\\frac{7}{2}", False, "numbers differ: 3 vs 7/2"),
        # an equation or a membership that looks like a tuple is still compared as math
        ("3", "(x, y) = (1, 2)", False, "math-verify: not equal"),
        ("3", "(x, y) \\in (1, 2)", False, "math-verify: not equal"),
        # words: the reason shows them as compared
        ("\\text{north east}", "north east", True, "word answer equal: 'north east' vs 'north east'"),
        # a choice letter found only once the words around it are dropped
        ("(C)", "C only", True, "choice letters equal: (C) vs (C)"),
        # numerals in another base: letters as digits in either case, the base optional or in words
        ("1A_{16}", "1a_{16}", True, "base-16 numerals equal: 1A vs 1A"),
        ("1A_{16}", "1a", True, "base-16 numerals equal: 1A vs 1A"),
        ("101_2", "101 \\text{ (base 2)}", True, "base-2 numerals equal: 101 vs 101"),
        ("101_2", "110_2", False, "base-2 numerals differ: 101 vs 110"),
        # a plus-minus gives two answers, which still fall short of three
        ("1, 2, 3", "2 \\pm 1", False, "the reference has 3 answers; the prediction gives 2"),
        # a matrix is math (sympy's matrices are not sympy expressions)
        (
            "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
            "\\begin{pmatrix} 2/2 \\\\ 2 \\end{pmatrix}",
            True,
            "math-verify: equal",
        ),
    ],
)
def test_each_guard_decides_its_case(gold: str, pred: str, equal: bool, reason: str) -> None:
    got = check_equivalence(gold, pred)
    assert (got.equal, got.reason) == (equal, reason)


def test_a_count_refusal_keeps_the_parsed_forms() -> None:
    got = check_equivalence("1, 2, 3", "2 \\pm 1")
    assert set(got.details) == {"gold_parsed", "pred_parsed"}
    assert got.details["gold_parsed"] == "{1, 2, 3}"


@pytest.mark.parametrize(
    ("gold", "pred", "joined", "equal", "compared"),
    [
        ("1, -2", "1", "1, -2", True, "{-2, 1}"),  # fewer answers than the reference: the joined boxes count
        ("1, -2", "1", "1, 5", False, "{1, 5}"),  # the joined boxes stand in, and give other values
        ("1, 2", "1", "3", False, None),  # joined boxes with still too few answers are not used
        ("1, 2", "1, 3", "1, 2", False, None),  # as many answers as the reference: the prediction stands
        ("1", "1", "1, -2", True, None),  # the prediction alone is enough
        ("5", "???", "5", False, None),  # one answer asked for: the joined boxes never stand in
    ],
)
def test_joined_answers_stand_in_only_for_missing_ones(
    gold: str, pred: str, joined: str, equal: bool, compared: str | None
) -> None:
    """`compared`: the joined answers as parsed and compared, where they stood in for the prediction."""
    got = check_equivalence(gold, pred, joined=joined)
    assert got.equal is equal, got.reason
    used = got.details.get("used_joined", False)
    assert (used, got.details["pred_parsed"] if used else None) == (compared is not None, compared)


def test_the_form_check_reads_the_answer_that_was_compared() -> None:
    # the joined boxes were compared, and one is not in lowest terms
    joined = check_equivalence(
        "\\frac{1}{2}, \\frac{1}{3}", "\\frac{1}{2}", joined="\\frac{2}{4}, \\frac{1}{3}", forms=SIMPLEST
    )
    assert not joined.equal
    assert joined.reason == "equal value, but not in the form the problem asks for: a fraction not in lowest terms"
    # the prediction alone was compared: joined boxes it did not need are not judged
    alone = check_equivalence("\\frac{1}{2}", "\\frac{1}{2}", joined="\\frac{2}{4}", forms=SIMPLEST)
    assert alone.equal, alone.reason


def test_an_unequal_value_is_never_reported_as_a_form_defect() -> None:
    got = check_equivalence("\\frac{1}{2}", "\\frac{2}{6}", forms=SIMPLEST)
    assert not got.equal
    assert got.reason == "numbers differ: 1/2 vs 1/3"


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        ("(5, \\infty)", "\\{x \\mid x > 5\\}"),  # the prediction does not parse: the set rule reads it alone
        ("(5, \\infty)", "\\{x : x > 5\\}"),  # it parses (as a quotient): the set rule re-reads the condition
    ],
)
def test_set_builder_predictions_are_read_as_their_interval(gold: str, pred: str) -> None:
    got = check_equivalence(gold, pred)
    assert got.equal
    assert got.reason == "as_set: both describe Interval.open(5, oo)"
    assert got.details["rule"] == "as_set"


def test_single_letters_are_names_or_choices_never_values() -> None:
    assert not check_equivalence("x", "y").equal
    assert not check_equivalence("k", "m").equal
    # "e" may be a choice: no lenient rule reads it as Euler's number, even where approximation is allowed
    assert not check_equivalence("e", "2.718", approx=True).equal
    assert check_equivalence("\\pi", "3.142", approx=True).equal


def test_the_equation_rule_stands_behind_math_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    """math-verify sees scaled equations itself today; the rule is the backstop should it stop."""
    monkeypatch.setattr(equiv, "verify", lambda *args, **kwargs: False)
    got = check_equivalence("y = 3x", "6x - 2y = 0")
    assert got.equal
    assert got.details["rule"] == "equations"
    assert not check_equivalence("y = 3x", "6x - 2y = 1").equal


def test_grading_runs_off_the_main_thread() -> None:
    """math-verify's alarm-based timeout stays off: it refuses to run outside the main thread."""
    got: list[object] = []
    worker = threading.Thread(target=lambda: got.append(check_equivalence("25\\%", "25")))
    worker.start()
    worker.join()
    assert len(got) == 1 and getattr(got[0], "equal", None) is True


def test_plain_numbers_parse_without_latex() -> None:
    assert plain_rational("3 / 4") == (Fraction(3, 4), False)
    assert plain_rational("\\frac {3} {4}") == (Fraction(3, 4), False)
    assert plain_rational("\\frac{6}{1}") == (Fraction(6), False)
    assert plain_rational("12") == (Fraction(12), False)
    assert plain_rational("0.75") == (Fraction(3, 4), True)
    assert plain_rational("1/0") is None


@pytest.mark.parametrize(
    ("answer", "text"),
    [("Yes", True), ("north", True), ("x", False), ("y z", False), ("sin", False), ("cos x", False)],
)
def test_what_counts_as_a_word_answer(answer: str, text: bool) -> None:
    assert is_text(answer) is text


@pytest.mark.parametrize(
    ("answer", "has"),
    [("2\\text{ AB}", True), ("5 \\mathrm{km}", True), ("2\\text{ A}", False), ("x^2", False), ("north", True)],
)
def test_words_inside_an_answer_are_seen(answer: str, has: bool) -> None:
    assert _has_text(answer) is has


def test_parsed_forms_are_shown_up_to_200_characters() -> None:
    assert _show("a" * 200) == "a" * 200
    assert _show("a" * 201) == "a" * 197 + "..."
