"""HumanEval fixtures: the task spec, its fixture rows and samples, and a fast code grader."""

from __future__ import annotations

import os
from typing import Any

import pytest
from he_helpers import ROOT

from evalsuite.graders.code import CodeGrader
from evalsuite.records import Sample
from evalsuite.tasks.build import build_samples
from evalsuite.tasks.data import load_rows
from evalsuite.tasks.schema import TaskSpec
from evalsuite.tasks.spec import load_task_spec


@pytest.fixture(scope="session")
def he_spec() -> TaskSpec:
    return load_task_spec(ROOT / "tasks" / "humaneval.yaml")


@pytest.fixture(scope="session")
def he_rows(he_spec: TaskSpec) -> list[dict[str, Any]]:
    rows, _ = load_rows(he_spec, "fixture", root=ROOT)
    return rows


@pytest.fixture(scope="session")
def he_samples(he_spec: TaskSpec, he_rows: list[dict[str, Any]]) -> dict[str, Sample]:
    return {s.metadata["task_id"]: s for s in build_samples(he_spec, he_rows)}


@pytest.fixture(scope="session")
def grader() -> CodeGrader:
    if os.geteuid() != 0:
        pytest.skip("the code grader's tests run as root (as in CI), like the sandbox tests")
    return CodeGrader(["last_code_block"], timeout_s=2.0, memory_mb=256, processes=8)
