"""A control's divergences count on every task it ran on: the near-tie threshold belongs to the engine."""

from __future__ import annotations

from typing import Any

import pytest
from two_choices import token_entries

from evalsuite.compare import compare_roles
from evalsuite.engines.parse import trace_from_entries
from evalsuite.records import Completion, SampleResult
from evalsuite.store import MemoryRun
from evalsuite.workflow import compare_folders

CONTROL_AT, CANDIDATE_AT = 31, 32
"""The baseline's third token in the sample where the control diverges, and in the one where the candidate does."""


def _run(task: str, target: str, margins: dict[int, float], diverge: int | None = None) -> MemoryRun:
    """Four samples of four tokens; the third token's runner-up lies `margins[token]` nats below it (1 nat when
    not given); `diverge`: in the sample whose third token is that, another token comes instead."""
    results = {}
    for i, third in enumerate((3, CONTROL_AT, CANDIDATE_AT, 5)):
        ids = [1, 2, third + 1000 if third == diverge else third, 4]
        entries = token_entries(ids, -0.1, lambda t: (t + 2000, f"u{t}", -0.1 - margins.get(t, 1.0)))
        completion = Completion(text="", finish_reason="stop", tokens=trace_from_entries(entries))
        results[f"s{i}"] = SampleResult(f"s{i}", task, {}, completion)
    fields: dict[str, Any] = {"task": task, "prompt_template": "t", "params": {"temperature": 0.0}, "target": target}
    manifest = {"fingerprint": f"{task}-{target}", "fingerprint_fields": fields, "target": target, "task": task}
    return MemoryRun(manifest, results)


def _roles(task: str, margins: dict[int, float], *, control: str = "self", candidate: bool = True) -> dict[str, Any]:
    return {
        "baseline": _run(task, "base", margins),
        "control": _run(task, control, margins, diverge=CONTROL_AT),
        "candidate": _run(task, "spec", margins, diverge=CANDIDATE_AT if candidate else None),
    }


# the one task: its control flips at 0.03 nats, its candidate at 0.2; the other task's control at 0.15
ONE = {CONTROL_AT: 0.03, CANDIDATE_AT: 0.2}
OTHER = {CONTROL_AT: 0.15}


def test_a_control_that_flipped_at_a_larger_margin_on_another_task_explains_the_flip() -> None:
    alone = compare_roles(_roles("math500", ONE), n_resamples=50)
    assert alone.token.label == "LOSSY" and alone.thresholds.effective == 0.1
    math, gsm = compare_folders({"math500": _roles("math500", ONE), "gsm8k": _roles("gsm8k", OTHER, candidate=False)})
    assert math.thresholds.effective == pytest.approx(0.3) and math.token.label != "LOSSY"
    assert "control 'control:self' (0.15 nats, on gsm8k)" in math.thresholds.source
    assert [d.kind for d in math.diffs if not d.identical] == ["numerical"]
    assert "LOSSY" not in math.summary
    assert gsm.thresholds.effective == pytest.approx(0.3) and "(0.15 nats)" in gsm.thresholds.source


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(_roles("gsm8k", {CONTROL_AT: 0.04}, candidate=False), id="the other control flipped lower"),
        pytest.param(_roles("gsm8k", OTHER, control="elsewhere", candidate=False), id="another control"),
    ],
)
def test_only_the_same_control_at_a_larger_margin_moves_the_threshold(other: dict[str, Any]) -> None:
    math, _ = compare_folders({"math500": _roles("math500", ONE), "gsm8k": other})
    assert math.token.label == "LOSSY" and math.thresholds.effective == 0.1
    assert [d.kind for d in math.diffs if not d.identical] == ["confident"]
