"""One control's evidence over all the tasks it ran on: the near-tie threshold of an engine, not of a task.

A control run (the baseline again, or the target drafting for itself) shows how far the engine's
numerics move a margin: at what margins its argmax flips.  That is a property of the engine, the
model and their flags, the same on every task.  But a task with few prompts may give the control
no flip at a telling margin: with five MATH-500 prompts, SmolLM2's self-drafting control flipped
only at 0.047 nats, while on the five GSM8K and LiveCodeBench prompts of the same eval it flipped
at 0.22 and 0.24, and on all 35 MATH-500 prompts at 0.27.  Judged alone, that task called a flip at
0.147 nats LOSSY, a verdict the same engine's other evidence contradicts.  So each comparison's
threshold uses the largest margin the same control (by name) diverged at on any of the tasks
compared together; the report names the task it came from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from evalsuite.compare.run import Comparison
from evalsuite.diff.classify import calibrate, classify_all
from evalsuite.verdict.summary import summary_line
from evalsuite.verdict.token import token_verdict


def pooled_controls(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """The comparisons, each judged again where a control of the same name diverged at a larger margin elsewhere."""
    largest: dict[str, tuple[float, str]] = {}
    for comparison in comparisons:
        for control in comparison.controls:
            margins = control.margins
            if len(margins) and float(margins.max()) > largest.get(control.name, (-math.inf, ""))[0]:
                largest[control.name] = (float(margins.max()), _task(comparison))
    return [_judged(c, {k: v for k, v in largest.items() if v[1] != _task(c)}) for c in comparisons]


def _task(comparison: Comparison) -> str:
    return str(comparison.candidate.get("task") or "?")


def _judged(comparison: Comparison, elsewhere: dict[str, tuple[float, str]]) -> Comparison:
    old = comparison.thresholds
    thresholds = calibrate(
        comparison.controls, near_tie=old.near_tie, slack=old.slack, resolution=old.resolution, elsewhere=elsewhere
    )
    if thresholds.effective == old.effective:
        return comparison
    diffs = classify_all(comparison.diffs, thresholds, comparison.controls)
    token = token_verdict(diffs, thresholds, comparison.controls)
    overall = [(r.task, r.summary, r.verdict) for r in comparison.overall()]
    return replace(comparison, diffs=diffs, thresholds=thresholds, token=token, summary=summary_line(token, overall))
