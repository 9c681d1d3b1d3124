"""The HumanEval task: spec, fixture rows, prompts, references and the adapter's refusals."""

from __future__ import annotations

import re
from typing import Any

import pytest

from evalsuite.errors import DatasetError
from evalsuite.graders import get_grader
from evalsuite.graders.code import CodeGrader
from evalsuite.records import Sample
from evalsuite.sandbox.cases import CodeTests
from evalsuite.tasks import humaneval
from evalsuite.tasks.adapters import code_tests, find_adapter, registered
from evalsuite.tasks.schema import TaskSpec


def test_spec_pins_the_hub_and_uses_the_code_grader(he_spec: TaskSpec) -> None:
    assert he_spec.dataset.hf is not None and he_spec.dataset.hf.path == "openai/openai_humaneval"
    assert re.fullmatch(r"[0-9a-f]{40}", he_spec.dataset.hf.revision)
    assert he_spec.dataset.adapter == "humaneval"
    assert isinstance(get_grader(he_spec.grader), CodeGrader)


def test_both_code_adapters_are_registered_as_entry_points() -> None:
    assert registered()["humaneval"] == "evalsuite.tasks.humaneval"
    assert registered()["livecodebench"] == "evalsuite.tasks.livecodebench"
    assert find_adapter("humaneval") is humaneval
    assert find_adapter("evalsuite.tasks.humaneval") is humaneval  # an import path still works


def test_fixture_samples_carry_ids_prompts_and_references(he_samples: dict[str, Sample]) -> None:
    assert len(he_samples) == 6
    sample = he_samples["HumanEval/10"]
    assert sample.id == "humaneval-10" and sample.metadata["entry_point"] == "make_palindrome"
    (user,) = sample.messages
    assert user["role"] == "user" and user["content"].startswith("Complete the following Python function.")
    assert "def is_palindrome(string: str) -> bool:" in user["content"]  # the helper is shown too
    assert user["content"].endswith("```")
    assert sample.reference["adapter"] == "humaneval"
    assert "canonical_solution" not in sample.reference  # the answer never travels with the sample


def test_code_tests_wrap_the_program_in_prompt_and_check(he_rows: list[dict[str, Any]]) -> None:
    row = next(r for r in he_rows if r["task_id"] == "HumanEval/53")
    tests = code_tests(row["reference"], where="HumanEval/53")
    assert isinstance(tests, CodeTests) and len(tests.cases) == 1 and tests.fn_name == humaneval.ENTRY
    program = tests.program("def add(x, y):\n    return x + y")
    assert program.startswith(row["prompt"])
    assert program.index("return x + y") < program.index("def check(candidate):") < program.index("check(add)")
    compile(program, "humaneval-53", "exec")


def test_bad_rows_are_refused_naming_the_row(he_rows: list[dict[str, Any]]) -> None:
    good = he_rows[0]
    with pytest.raises(DatasetError, match=r"row 2 \(HumanEval/x\).*entry_point"):
        humaneval.prepare_rows([good, {**good, "task_id": "HumanEval/x", "entry_point": ""}], {})
    with pytest.raises(DatasetError, match="not a Python name"):
        humaneval.prepare_rows([{**good, "entry_point": "check(1); f"}], {})
    with pytest.raises(DatasetError, match="no dataset options"):
        humaneval.prepare_rows([good], {"version_tag": "v1"})


def test_a_damaged_reference_is_a_sentence() -> None:
    with pytest.raises(DatasetError, match="sample s: the HumanEval reference lacks test"):
        code_tests({"adapter": "humaneval", "prompt": "def f():\n", "entry_point": "f"}, where="sample s")
    with pytest.raises(DatasetError, match="not a Python name"):
        code_tests({"adapter": "humaneval", "prompt": "p", "test": "t", "entry_point": "f()"}, where="s")
