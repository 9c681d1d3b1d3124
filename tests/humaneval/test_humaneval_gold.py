"""Gold check: all 164 HumanEval canonical solutions pass through the task, its adapter and the code grader.

Reads ../shared/data/humaneval/HumanEval.jsonl.gz as a local dataset file
(`--data local`); skips when it is absent.
"""

from __future__ import annotations

import pytest
from he_helpers import ROOT, fenced, shared_data_dir

from evalsuite.graders import GradeInput
from evalsuite.graders.code import CodeGrader
from evalsuite.tasks.build import build_samples
from evalsuite.tasks.data import load_rows
from evalsuite.tasks.spec import TaskSpec

pytestmark = pytest.mark.gold


def test_every_canonical_solution_passes(he_spec: TaskSpec, grader: CodeGrader) -> None:
    path = shared_data_dir() / "humaneval" / "HumanEval.jsonl.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    rows, identity = load_rows(he_spec, "local", root=ROOT, path=str(path))
    assert len(rows) == 164 and identity.revision.startswith("sha256:b796127e635a67f9")
    samples = build_samples(he_spec, rows)
    items = [GradeInput(s, fenced(r["canonical_solution"])) for s, r in zip(samples, rows, strict=True)]
    grades = grader.grade_batch(items, workers=2)
    assert {g.sample_id: g.reason for g in grades if g.status != "correct"} == {}
