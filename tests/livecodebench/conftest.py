"""LiveCodeBench fixtures: the task spec, its fixture samples and a fast grader."""

from __future__ import annotations

import os

import pytest
from lcb_helpers import ROOT

from evalsuite.graders.code import CodeGrader
from evalsuite.records import Sample
from evalsuite.tasks.build import build_samples
from evalsuite.tasks.data import load_rows
from evalsuite.tasks.schema import TaskSpec
from evalsuite.tasks.spec import load_task_spec


@pytest.fixture(scope="session")
def lcb_spec() -> TaskSpec:
    return load_task_spec(ROOT / "tasks" / "livecodebench.yaml")


@pytest.fixture(scope="session")
def lcb_samples(lcb_spec: TaskSpec) -> dict[str, Sample]:
    rows, _ = load_rows(lcb_spec, "fixture", root=ROOT)
    return {s.id.removeprefix("lcb-"): s for s in build_samples(lcb_spec, rows)}


@pytest.fixture(scope="session")
def grader() -> CodeGrader:
    if os.geteuid() != 0:
        pytest.skip("the code grader's tests run as root (as in CI), like the sandbox tests")
    return CodeGrader(["last_code_block"], timeout_s=2.0, memory_mb=256, processes=8)
