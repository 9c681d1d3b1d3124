"""MathGrader on the hand-written answer table, against naive string matching and raw math-verify."""

from __future__ import annotations

import re

import pytest
from answer_pairs import PAIRS, Pair
from grader_helpers import item
from math_verify import parse, verify

from evalsuite.errors import ConfigError
from evalsuite.graders.math import MathGrader
from evalsuite.records import Grade


def naive_string_match(pair: Pair) -> bool:
    """What a quick script does: the last \\boxed{...} (greedy regex) equals the reference, spaces ignored."""
    found = re.findall(r"\\boxed\{(.*)\}", pair.response)
    return bool(found) and re.sub(r"\s", "", found[-1]) == re.sub(r"\s", "", pair.gold)


def naive_math_verify(pair: Pair) -> bool:
    """math-verify called the obvious way: parse both texts as they are, then verify."""
    return bool(verify(parse(pair.gold), parse(pair.response)))


@pytest.fixture(scope="module")
def table_grades() -> list[Grade]:
    grader = MathGrader()
    return grader.grade_batch(
        [item(p.gold, p.response, sid=str(i), problem=p.problem) for i, p in enumerate(PAIRS)], workers=2
    )


def test_table_covers_enough_shapes() -> None:
    assert len(PAIRS) >= 40
    assert sum(p.correct for p in PAIRS) >= 15 and sum(not p.correct for p in PAIRS) >= 15


@pytest.mark.parametrize("index", range(len(PAIRS)), ids=[p.shape for p in PAIRS])
def test_grader_agrees_with_the_table(table_grades: list[Grade], index: int) -> None:
    pair, grade = PAIRS[index], table_grades[index]
    assert grade.sample_id == str(index)
    assert grade.status == ("correct" if pair.correct else "incorrect"), grade.reason
    assert grade.reason


def test_naive_matching_gets_the_table_wrong_where_the_grader_is_right(table_grades: list[Grade]) -> None:
    string_wrong = [p.shape for p in PAIRS if naive_string_match(p) != p.correct]
    mv_wrong = [p.shape for p in PAIRS if naive_math_verify(p) != p.correct]
    # Each naive method misjudges a sizeable part of the table ...
    assert len(string_wrong) >= 15, string_wrong
    assert len(mv_wrong) >= 15, mv_wrong
    # ... including the known math-verify false positives the guards exist for: one sign of a
    # plus-minus, a number read from a cut-off sentence, an extra part after words.
    assert {"one sign as an equation", "prose: cut mid-sentence is not read", "parts: extra part"} <= set(mv_wrong)
    # and the grader gets every one of those rows right.
    for index, pair in enumerate(PAIRS):
        if pair.shape in string_wrong or pair.shape in mv_wrong:
            assert table_grades[index].correct == pair.correct, pair.shape


def test_grades_carry_the_evidence(table_grades: list[Grade]) -> None:
    by_shape = {p.shape: g for p, g in zip(PAIRS, table_grades)}
    one_of_two = by_shape["only one of two solutions"]
    assert one_of_two.extracted == "1"
    assert one_of_two.reason == "the reference has 2 answers; the prediction gives 1"
    assert one_of_two.details["step"] == "last_boxed"
    separately = by_shape["solutions boxed separately"]
    assert separately.extracted == "1, -2" and separately.details["used_joined"] is True
    fallback = by_shape["'final answer is' fallback"]
    assert fallback.details["step"] == "final_answer_is"
    missing = by_shape["no recognisable final answer"]
    assert missing.extracted is None
    assert missing.reason == "no \\boxed{} and no 'final answer is' and no final sentence stating a number found"
    prose = by_shape["prose: closing remark after the answer"]
    assert prose.extracted == "284" and prose.details["step"] == "final_sentence"
    approx = by_shape["approx: stated"]
    assert approx.details["rule"] == "approximation" and "rounded to 2 decimal places" in approx.reason


def test_truncated_responses_are_graded_and_flagged() -> None:
    grades = MathGrader().grade_batch(
        [item("5", r"... so \boxed{5}", truncated=True), item("5", r"... we still need to chec", truncated=True)]
    )
    assert [g.status for g in grades] == ["correct", "incorrect"]
    assert all(g.details["truncated"] is True for g in grades)


def test_a_timeout_marks_the_sample_ungraded_and_the_batch_goes_on() -> None:
    grader = MathGrader(timeout_s=1e-6)
    grades = grader.grade_batch([item(r"\frac{1}{2}", r"\boxed{0.5}", sid="a"), item("3", r"\boxed{3}", sid="b")])
    assert [g.sample_id for g in grades] == ["a", "b"]
    assert all(g.status == "ungraded" for g in grades)
    assert all("timed out" in g.reason for g in grades), [g.reason for g in grades]


def test_missing_reference_is_ungraded_without_a_worker() -> None:
    grades = MathGrader().grade_batch([item(None, r"\boxed{1}"), item("  ", r"\boxed{1}")])
    assert [g.status for g in grades] == ["ungraded", "ungraded"]
    assert grades[0].reason == "the sample has no reference answer"


def test_options_and_steps_are_checked() -> None:
    with pytest.raises(ConfigError, match="unknown option 'timeout'"):
        MathGrader(timeout=3)
    with pytest.raises(ConfigError, match="option 'timeout_s' = 'soon' should be a int or float"):
        MathGrader(timeout_s="soon")
    with pytest.raises(ConfigError, match="unknown extraction step 'boxed'"):
        MathGrader(extraction=["boxed"])
    grader = MathGrader(extraction=["final_answer_is"])
    assert "final_answer_is" in grader.version and "math-verify" in grader.version
