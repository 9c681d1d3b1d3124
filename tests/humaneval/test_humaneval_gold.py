"""Gold check: all 164 HumanEval canonical solutions pass through the task, its adapter and the code grader.

At every isolation level (root's three and an unprivileged user's): the
grades must not depend on the level.  Reads
../shared/data/humaneval/HumanEval.jsonl.gz as a local dataset file
(`--data local`); skips when it is absent.
"""

from __future__ import annotations

import os

import pytest
from as_user import LEVELS, UserSandbox, sandbox_at
from he_helpers import ROOT, fenced, shared_data_dir

from evalsuite.graders import GradeInput
from evalsuite.graders.code import CodeGrader
from evalsuite.tasks.build import build_samples
from evalsuite.tasks.data import load_rows
from evalsuite.tasks.schema import TaskSpec

pytestmark = pytest.mark.gold


@pytest.mark.parametrize("level", LEVELS)
def test_every_canonical_solution_passes(he_spec: TaskSpec, level: str) -> None:
    path = shared_data_dir() / "humaneval" / "HumanEval.jsonl.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    if os.geteuid() != 0:
        pytest.skip("the code grader's tests run as root (as in CI), like the sandbox tests")
    grader = CodeGrader(["last_code_block"], timeout_s=2.0, memory_mb=256, processes=8)
    grader._sandbox = sandbox_at(level, grader.sandbox_limits())
    rows, identity = load_rows(he_spec, "local", root=ROOT, path=str(path))
    assert len(rows) == 164 and identity.revision.startswith("sha256:b796127e635a67f9")
    samples = build_samples(he_spec, rows)
    items = [GradeInput(s, fenced(r["canonical_solution"])) for s, r in zip(samples, rows, strict=True)]
    try:
        grades = grader.grade_batch(items, workers=2)
    finally:
        if isinstance(grader._sandbox, UserSandbox):
            grader._sandbox.close()
    assert {g.sample_id: g.reason for g in grades if g.status != "correct"} == {}
    assert {g.details["sandbox"]["isolation"] for g in grades} == {"namespaces" if level == "user" else level}
