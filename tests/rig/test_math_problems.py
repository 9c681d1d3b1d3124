"""The written math problems a drafter trains on: reproducible, distinct, and never an evaluated problem."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from projects import shared_data_dir

from evalsuite.tasks.build import packaged_fixture
from rigbuild.math_problems import math_problems
from rigbuild.smollm2_dflash import training_messages


def test_the_same_seed_writes_the_same_problems_and_another_seed_others() -> None:
    first = math_problems(200, seed=3)
    assert first == math_problems(200, seed=3)
    other = {r["problem"] for r in math_problems(200, seed=4)}
    assert len(other - {r["problem"] for r in first}) > 150


def test_problems_are_distinct_and_span_math_subjects() -> None:
    rows = math_problems(1024)
    assert len({r["problem"] for r in rows}) == 1024
    assert len({r["unique_id"] for r in rows}) == 1024
    subjects = Counter(str(r["subject"]) for r in rows)
    assert set(subjects) == {
        "Algebra",
        "Intermediate Algebra",
        "Number Theory",
        "Counting & Probability",
        "Geometry",
        "Precalculus",
        "Prealgebra",
    }
    assert sum("$" in str(r["problem"]) for r in rows) > 0.9 * len(rows)  # MATH's notation, not word problems


def test_excluded_problems_are_never_written() -> None:
    plain = math_problems(300)
    banned = frozenset(str(r["problem"]) for r in plain[::3])
    again = math_problems(300, exclude=banned)
    assert len(again) == 300
    assert banned.isdisjoint(r["problem"] for r in again)


def test_asking_for_more_than_the_templates_can_write_is_an_error_not_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    import rigbuild.math_problems as mp

    monkeypatch.setattr(mp, "TEMPLATES", (lambda r: ("Algebra", f"What is ${r.randint(1, 3)} + 1$?"),))
    assert len(mp.math_problems(3)) == 3
    with pytest.raises(ValueError, match="cannot write 4 distinct problems"):
        mp.math_problems(4)


def test_no_written_problem_is_a_math500_problem(tmp_path: Path) -> None:
    """The training prompts against the fixture always, and against all of MATH-500 where it is at hand."""
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"question": "q?", "answer": "#### 1"}) + "\n")
    written = [m[-1]["content"].split("\n\n", 1)[1] for m in training_messages(train, 1, 1024)[2:]]
    assert len(set(written)) == 1024
    assert written == [r["problem"] for r in math_problems(1024, exclude=_fixture())]
    assert not set(written) & _fixture()
    full = shared_data_dir() / "math500" / "test.jsonl"
    if not full.is_file():
        pytest.skip(f"the full MATH-500 is not in {full.parent}")
    assert not set(written) & {json.loads(line)["problem"] for line in full.open()}


def _fixture() -> frozenset[str]:
    return frozenset(s.messages[-1]["content"].split("\n\n", 1)[1] for s in packaged_fixture("math500")[1])
