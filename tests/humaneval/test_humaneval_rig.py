"""HumanEval end to end on the real rig: eval a speculative target against its baseline, grade from the store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from projects import copy_project, rig_target

from evalsuite.config import load_config
from evalsuite.grading import grade_run
from evalsuite.rig.assets import ensure_assets
from evalsuite.store import open_run
from evalsuite.workflow import RunOptions, compare_eval, eval_target

pytestmark = pytest.mark.rig


def test_humaneval_eval_and_compare_on_the_rig(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the code grader's tests run as root (as in CI), like the sandbox tests")
    ensure_assets(progress=lambda msg: print(f"[rig] {msg}", flush=True))  # the cached build and models
    targets = rig_target("baseline", baseline=None, control=None) + rig_target("draft", control=None)
    config = load_config(copy_project(tmp_path, targets, tasks='["humaneval"]'))
    runs = eval_target(
        config, "draft", ["humaneval"], RunOptions(data="fixture", limit=3, max_tokens=64), repeat_baseline=False
    )
    (comparison,) = compare_eval(config, runs)
    assert comparison.summary.startswith(("IDENTICAL", "NUMERICAL-ONLY")), comparison.summary
    store = open_run(runs.folders["humaneval"]["candidate"])
    grades = store.grades()
    assert len(grades) == 3
    assert all(g.status in ("correct", "incorrect") for g in grades.values()), [g.reason for g in grades.values()]
    assert all(s.reference["adapter"] == "humaneval" for s in store.samples().values())
    again = {g.sample_id: (g.status, g.reason) for g in grade_run(store, tasks_dir=tmp_path / "tasks")}
    assert again == {sid: (g.status, g.reason) for sid, g in grades.items()}
