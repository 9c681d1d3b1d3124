"""A new code task is one adapter plus one YAML: an outside adapter, written here, runs through the grader.

Also how references find their adapter: by the name they carry, LiveCodeBench
for references stored before they carried one, and a sentence otherwise.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from he_helpers import fenced

from evalsuite.errors import DatasetError
from evalsuite.graders import GradeInput, get_grader
from evalsuite.graders.code import CodeGrader
from evalsuite.records import Sample
from evalsuite.tasks.adapters import code_tests
from evalsuite.tasks.build import build_samples
from evalsuite.tasks.data import load_rows
from evalsuite.tasks.spec import load_task_spec

ADAPTER = '''
"""Rows {"id", "question", "cases": [[stdin, stdout], ...]}: stdin programs."""
from evalsuite.sandbox.cases import CodeTests, TestCase


def prepare_rows(rows, options):
    return [dict(r, reference={"adapter": "toy_stdin_adapter", "cases": r["cases"]}) for r in rows]


def code_tests(reference, where="reference"):
    return CodeTests(tuple(TestCase(i, o) for i, o in reference["cases"]))
'''

SPEC = """
name: toy
dataset: {fixture: toy.jsonl, adapter: toy_stdin_adapter}
id_field: id
reference_field: reference
prompt: {user: "{{ question }}"}
grader: {name: code, extraction: [last_code_block], options: {timeout_s: 2}}
"""


@pytest.fixture()
def toy_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Sample]:
    (tmp_path / "toy_stdin_adapter.py").write_text(textwrap.dedent(ADAPTER))
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "fixtures").mkdir()
    rows = [{"id": "double", "question": "Print twice the number read.", "cases": [["2\n", "4"], ["-5\n", "-10"]]}]
    (tmp_path / "fixtures" / "toy.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "toy.yaml").write_text(SPEC)
    spec = load_task_spec(tmp_path / "toy.yaml")
    loaded, _ = load_rows(spec, "fixture", root=tmp_path)
    return build_samples(spec, loaded)


def test_an_outside_code_task_needs_no_grader_change(toy_task: list[Sample], grader: CodeGrader) -> None:
    (sample,) = toy_task
    good, bad = grader.grade_batch(
        [GradeInput(sample, fenced("print(2 * int(input()))")), GradeInput(sample, fenced("print(4)"))]
    )
    assert good.status == "correct" and good.details["n_tests"] == 2
    assert (bad.status, bad.details["outcome"], bad.details["n_passed"]) == ("incorrect", "wrong_answer", 1)


def test_references_stored_before_naming_their_adapter_are_livecodebench() -> None:
    tests = code_tests({"public_test_cases": json.dumps([{"input": "1\n", "output": "1"}]), "fn_name": None})
    assert [(c.input, c.output) for c in tests.cases] == [("1\n", "1")] and tests.fn_name is None


@pytest.mark.parametrize(
    "reference, message",
    [
        ("just text", "not an object naming its tests"),
        ({"cases": []}, "names no adapter"),
        (
            {"adapter": "no_such_bench"},
            r"Unknown dataset adapter 'no_such_bench': neither registered in the "
            r"evalsuite.task_adapters entry-point group \(humaneval, livecodebench",
        ),
        ({"adapter": "json"}, "has no prepare_rows"),
    ],
)
def test_a_reference_no_adapter_reads_is_a_sentence(reference: object, message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        code_tests(reference, where="sample s")


def test_the_grader_leaves_such_samples_ungraded() -> None:
    grader = get_grader(load_task_spec(Path(__file__).resolve().parents[2] / "tasks" / "humaneval.yaml").grader)
    sample = Sample(id="s", task="t", messages=(), reference={"adapter": "no_such_bench"})
    (grade,) = grader.grade_batch([GradeInput(sample, fenced("print(1)"))])
    assert grade.status == "ungraded" and "no_such_bench" in grade.reason
