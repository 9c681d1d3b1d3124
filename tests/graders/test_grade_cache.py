"""The grade cache: each distinct (grader, version, reference, answer) is graded once across arms and re-grades."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import evalsuite.grading as grading
from evalsuite.graders import GradeInput
from evalsuite.graders.cache import CACHE_FILE, GradeCache, cache_path, open_cache, saved_across, saved_sentence
from evalsuite.graders.code import CodeGrader
from evalsuite.records import Completion, Grade, Sample, SampleResult
from evalsuite.store import RunStore, open_run
from evalsuite.tasks.schema import GraderSpec

SPEC = GraderSpec(name="counting")


class CountingGrader:
    """Correct when the text equals the reference; counts every item it is asked to grade."""

    name = "counting"

    def __init__(self, version: str = "1", ungraded: frozenset[str] = frozenset()) -> None:
        self.version = version
        self.ungraded = ungraded
        self.graded: list[str] = []

    def grade_batch(self, items: Sequence[GradeInput], *, workers: int | None = None) -> list[Grade]:
        out = []
        for item in items:
            self.graded.append(item.text)
            if item.text in self.ungraded:
                out.append(Grade(item.sample.id, "ungraded", None, "the sandbox failed"))
            else:
                ok = item.text == item.sample.reference
                out.append(Grade(item.sample.id, "correct" if ok else "incorrect", item.text, "", float(ok), {"n": 1}))
        return out


def _sample(sid: str, reference: Any = "4") -> Sample:
    return Sample(sid, "t", ({"role": "user", "content": f"question of {sid[0]}"},), reference)


def _items(texts: dict[str, str]) -> list[GradeInput]:
    return [GradeInput(_sample(sid), text) for sid, text in texts.items()]


def test_identical_answers_in_two_arms_are_graded_once(tmp_path: Path) -> None:
    cache = GradeCache(tmp_path / CACHE_FILE)
    grader = CountingGrader()
    baseline = _items({"a1": "4", "b1": "5"})
    candidate = _items({"a1": "4", "b1": "6"})
    first, graded, reused = grading.grade_items(grader, SPEC, baseline, cache)
    assert (graded, reused) == (2, 0)
    second, graded, reused = grading.grade_items(grader, SPEC, candidate, cache)
    assert (graded, reused) == (1, 1)
    assert grader.graded == ["4", "5", "6"]
    assert second[0] == first[0] and second[0].sample_id == "a1" and second[1].status == "incorrect"


def test_a_key_shared_by_samples_of_one_run_is_graded_once(tmp_path: Path) -> None:
    grader = CountingGrader()
    items = [GradeInput(_sample(sid), "4") for sid in ("a1", "a2", "a3")]  # same question, reference and answer
    grades, graded, reused = grading.grade_items(grader, SPEC, items, GradeCache(tmp_path / CACHE_FILE))
    assert grader.graded == ["4"] and (graded, reused) == (1, 0)
    assert [g.sample_id for g in grades] == ["a1", "a2", "a3"] and all(g.correct for g in grades)


def test_a_changed_version_or_reference_is_graded_again(tmp_path: Path) -> None:
    cache = GradeCache(tmp_path / CACHE_FILE)
    items = _items({"a1": "4"})
    grading.grade_items(CountingGrader("1"), SPEC, items, cache)
    newer = CountingGrader("2")
    assert grading.grade_items(newer, SPEC, items, cache)[1:] == (1, 0) and newer.graded == ["4"]
    moved = CountingGrader("1")
    other_reference = [GradeInput(_sample("a1", reference="5"), "4")]
    grades, graded, _ = grading.grade_items(moved, SPEC, other_reference, cache)
    assert graded == 1 and grades[0].status == "incorrect"
    options = GraderSpec(name="counting", options={"timeout_s": 1})
    assert grading.grade_items(CountingGrader("1"), options, items, cache)[1] == 1


def test_ungraded_outcomes_are_never_cached(tmp_path: Path) -> None:
    cache = GradeCache(tmp_path / CACHE_FILE)
    items = _items({"a1": "busy"})
    flaky = CountingGrader(ungraded=frozenset({"busy"}))
    assert grading.grade_items(flaky, SPEC, items, cache)[0][0].status == "ungraded"
    steady = CountingGrader()
    grades, graded, reused = grading.grade_items(steady, SPEC, items, cache)
    assert (graded, reused) == (1, 0) and grades[0].status == "incorrect"


def test_the_first_grade_stored_for_a_key_is_the_one_everyone_reads(tmp_path: Path) -> None:
    one, two = GradeCache(tmp_path / CACHE_FILE), GradeCache(tmp_path / CACHE_FILE)
    one.put({"k": Grade("x", "correct", "a", "first", 1.0)}, "g", "1")
    two.put({"k": Grade("y", "incorrect", "b", "second", 0.0)}, "g", "1")
    assert two.get(["k"])["k"].reason == "first" == one.get(["k"])["k"].reason


def test_the_code_grader_keys_on_the_program_not_the_prose_around_it() -> None:
    grader = CodeGrader()
    sample = _sample("p1", reference={"public_test_cases": "[]"})
    one = GradeInput(sample, "Here it is:\n```python\nprint(1)\n```")
    two = GradeInput(sample, "Let me think.\n```python\nprint(1)\n```\nDone.")
    other = GradeInput(sample, "```python\nprint(2)\n```")
    assert grader.grading_key(one) == grader.grading_key(two) != grader.grading_key(other)


def test_a_damaged_cache_costs_the_saving_not_the_grades(tmp_path: Path) -> None:
    path = tmp_path / CACHE_FILE
    path.write_bytes(b"not a database" * 100)
    cache = open_cache(path)
    grader = CountingGrader()
    grades, graded, _ = grading.grade_items(grader, SPEC, _items({"a1": "4"}), cache)
    assert grades[0].correct and graded == 1


def _run(runs: Path, target: str, answers: dict[str, str]) -> RunStore:
    manifest = {"fingerprint": target * 8, "task": "t", "target": target, "grader": {"name": "counting"}}
    store = RunStore.create(runs / target / "t" / "0001", manifest)
    store.write_samples([_sample(sid) for sid in answers])
    writer = store.writer()
    for sid, text in answers.items():
        writer.put(SampleResult(sid, "t", {}, Completion(text, "stop"), attempts=1, finished_at=1.0))
    writer.close()
    return store


def test_arms_under_one_runs_folder_share_the_cache_and_the_report_counts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grader = CountingGrader()
    monkeypatch.setattr(grading, "get_grader", lambda spec: grader)
    runs = tmp_path / "runs"
    answers = {"a1": "4", "b1": "5", "c1": "7"}
    arms = {name: _run(runs, name, answers) for name in ("baseline", "repeat", "control")}
    arms["dflash"] = _run(runs, "dflash", {**answers, "c1": "8"})
    for store in arms.values():
        grading.grade_store(store)
    assert sorted(grader.graded) == ["4", "5", "7", "8"]
    assert cache_path(arms["dflash"].folder, "dflash", "t") == runs / CACHE_FILE
    saved = saved_across([(s.folder, name, "t") for name, s in arms.items()])
    assert saved is not None and (saved.items, saved.graded, saved.saved) == (12, 4, 8)
    assert "12 answers across the arms, 4 gradings run; the other 8 reused" in saved_sentence(
        [(s.folder, name, "t") for name, s in arms.items()]
    )
    again = grading.grade_store(open_run(arms["baseline"].folder, write=True))
    assert again.count.saved == 3 and len(grader.graded) == 4
    assert open_run(arms["dflash"].folder).grades()["a1"] == open_run(arms["baseline"].folder).grades()["a1"]
