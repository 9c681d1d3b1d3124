"""Gold checks on the full MATH-500 and GSM8K test sets (`make gold`; skipped without ../shared/data).

The references themselves, written the way a model is asked to write them,
must score (almost) perfectly, and the same references shuffled across
problems must score (almost) nothing: together these bound both kinds of
grader error on the real answer distribution.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from grader_helpers import item
from math_verify import LatexExtractionConfig, parse, verify

from evalsuite.graders.extract import boxed_spans
from evalsuite.graders.gsm8k import GSM8KGrader, LMEvalGSM8KGrader, reference_number
from evalsuite.graders.math import MathGrader

pytestmark = pytest.mark.gold


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _derangement(n: int, seed: int = 1234) -> list[int]:
    """A fixed shuffle in which no problem keeps its own answer."""
    rng, perm = random.Random(seed), list(range(n))
    while True:
        rng.shuffle(perm)
        if all(i != j for i, j in enumerate(perm)):
            return perm


@pytest.fixture(scope="module")
def math_rows(data_file: Callable[[str], Path]) -> list[dict[str, Any]]:
    return _rows(data_file("math500/test.jsonl"))


@pytest.fixture(scope="module")
def gsm_rows(data_file: Callable[[str], Path]) -> list[dict[str, Any]]:
    return _rows(data_file("gsm8k/test.jsonl"))


def test_math500_boxed_gold_answers_score_500(math_rows: list[dict[str, Any]]) -> None:
    items = [item(r["answer"], f"The answer is $\\boxed{{{r['answer']}}}$.", sid=r["unique_id"]) for r in math_rows]
    grades = MathGrader().grade_batch(items, workers=2)
    assert len(math_rows) == 500
    assert [g.sample_id for g in grades] == [r["unique_id"] for r in math_rows]
    assert [g for g in grades if not g.correct] == []


def test_math500_gold_solutions_score_at_least_499(math_rows: list[dict[str, Any]]) -> None:
    items = [item(r["answer"], r["solution"], sid=r["unique_id"]) for r in math_rows]
    wrong = [g for g in MathGrader().grade_batch(items, workers=2) if not g.correct]
    assert len(wrong) <= 1, wrong


def test_math500_shuffled_gold_scores_near_zero(math_rows: list[dict[str, Any]]) -> None:
    perm = _derangement(len(math_rows))
    items = [item(r["answer"], f"\\boxed{{{math_rows[j]['answer']}}}") for r, j in zip(math_rows, perm)]
    grades = MathGrader().grade_batch(items, workers=2)
    hits = [(math_rows[i]["answer"], math_rows[j]["answer"]) for i, (g, j) in enumerate(zip(grades, perm)) if g.correct]
    assert all(g.status != "ungraded" for g in grades)
    assert len(hits) <= 5, hits
    latex = [LatexExtractionConfig()]
    for gold, other in hits:  # only problems whose answers really coincide may match
        same_text = re.sub(r"\s", "", gold) == re.sub(r"\s", "", other)
        assert same_text or verify(parse(f"\\boxed{{{gold}}}", latex), parse(f"\\boxed{{{other}}}", latex)), (
            gold,
            other,
        )


def _unboxed(text: str) -> str:
    """The solution with every `\\boxed{x}` replaced by `x`: the answer is then only stated in prose."""
    for start, end, content in reversed(boxed_spans(text)):
        text = text[:start] + content + text[end:]
    return text


def test_math500_answers_stated_in_prose_are_read(math_rows: list[dict[str, Any]]) -> None:
    """Textbook solutions without their boxes: the prose reader finds most answers, and no false ones.

    These are harder than model outputs (answers in the middle of long
    displays, asides after the answer); 457/500 are read correctly today.
    The same texts against shuffled references match only where answers coincide.
    """
    texts = [_unboxed(r["solution"]) for r in math_rows]
    grades = MathGrader().grade_batch(
        [item(r["answer"], t, sid=str(i)) for i, (r, t) in enumerate(zip(math_rows, texts))], workers=2
    )
    assert sum(g.correct for g in grades) >= 450
    assert {g.details.get("step") for g in grades if g.correct} <= {"final_answer_is", "final_sentence"}
    perm = _derangement(len(math_rows))
    shuffled = MathGrader().grade_batch([item(math_rows[j]["answer"], t) for t, j in zip(texts, perm)], workers=2)
    assert sum(g.correct for g in shuffled) <= 5


def _bump(answer: str) -> str | None:
    """The answer with its first integer increased by one: a wrong answer of the same shape."""
    m = re.search(r"\d+", answer)
    return None if m is None else answer[: m.start()] + str(int(m.group()) + 1) + answer[m.end() :]


def test_math500_near_miss_answers_are_rejected(math_rows: list[dict[str, Any]]) -> None:
    """Every reference with one number off, boxed after "approximately" and stated in prose: all wrong.

    This is the guard on the lenient rules and the numeric check: none may
    turn a wrong answer of the right shape into a correct one.
    """
    items = []
    for i, r in enumerate(math_rows):
        wrong = _bump(r["answer"])
        if wrong is not None:
            items.append(
                item(r["answer"], f"So it is approximately $\\boxed{{{wrong}}}$.", sid=f"b{i}", problem=r["problem"])
            )
            items.append(
                item(r["answer"], f"Putting it together, the result is ${wrong}$.", sid=f"s{i}", problem=r["problem"])
            )
    grades = MathGrader().grade_batch(items, workers=2)
    assert len(items) > 900
    assert [(g.sample_id, g.extracted, g.reason) for g in grades if g.correct] == []


@pytest.mark.parametrize("grader", [GSM8KGrader(), LMEvalGSM8KGrader()], ids=["gsm8k", "gsm8k_lmeval"])
def test_gsm8k_gold_answer_lines_score_1319(gsm_rows: list[dict[str, Any]], grader: Any) -> None:
    solutions = [item(r["answer"], r["answer"], sid=str(i)) for i, r in enumerate(gsm_rows)]
    last_lines = [item(r["answer"], r["answer"].rsplit("\n", 1)[-1], sid=str(i)) for i, r in enumerate(gsm_rows)]
    assert len(gsm_rows) == 1319
    for batch in (solutions, last_lines):
        assert [g for g in grader.grade_batch(batch) if not g.correct] == []


def test_gsm8k_shuffled_gold_matches_only_coinciding_answers(gsm_rows: list[dict[str, Any]]) -> None:
    perm = _derangement(len(gsm_rows))
    grades = GSM8KGrader().grade_batch([item(r["answer"], gsm_rows[j]["answer"]) for r, j in zip(gsm_rows, perm)])
    coincide = [
        reference_number(r["answer"]) == reference_number(gsm_rows[j]["answer"]) for r, j in zip(gsm_rows, perm)
    ]
    assert [g.correct for g in grades] == coincide
    assert sum(coincide) <= 0.02 * len(gsm_rows)
