"""Paired accuracy per task, per stratum and overall, and the one place p-values are Holm-adjusted.

The Holm family is defined here and nowhere else: every accuracy test of one
task's comparison, that is the task's overall difference and the difference
in each stratum value, one exact McNemar (or sign-test) p-value each.  A task
is its own family, so its adjusted p-values are a property of its comparison
alone: `evalsuite compare`, `evalsuite report`, `evalsuite eval` and the gate
print the same numbers for a task whichever other tasks a command is given.
`HolmFamily` names the family's members so reports and `comparison.json`
state it.

Only items graded in both runs count; `ungraded` (a grader timeout, a missing
reference) is excluded and counted, never scored as wrong.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from evalsuite.records import Grade, SampleResult
from evalsuite.stats.intervals import BootstrapMethod
from evalsuite.stats.significance import HOLM, holm_adjust
from evalsuite.stats.summary import PairedSummary, paired_summary
from evalsuite.verdict.accuracy import AccuracyVerdict, accuracy_verdict

OVERALL = "overall"
FAMILY_SCOPE = "one task: its overall accuracy difference and the difference in every stratum value"


@dataclass(frozen=True)
class HolmFamily:
    """The tests Holm's step-down adjusts together (see the module docstring): their labels, in table order."""

    tests: tuple[str, ...]
    method: ClassVar[str] = HOLM
    scope: ClassVar[str] = FAMILY_SCOPE

    @property
    def size(self) -> int:
        return len(self.tests)

    def sentence(self) -> str:
        """How a report states the family, e.g. "Holm family: the 7 accuracy tests of this task (...)"."""
        if not self.tests:
            return "No accuracy test was run, so nothing was Holm-adjusted."
        strata = sum(1 for t in self.tests if not t.endswith(f" {OVERALL}"))
        what = "its overall difference" + (f" and {strata} stratum value{'s' if strata != 1 else ''}" if strata else "")
        return (
            f"Holm family: the {self.size} accuracy test{'s' if self.size != 1 else ''} of this task ({what}), "
            f"adjusted together by {self.method}; each task is its own family."
        )

    def __json__(self) -> dict[str, Any]:
        return {"method": self.method, "scope": self.scope, "size": self.size, "tests": list(self.tests)}


def holm_family(rows: Sequence[AccuracyRow]) -> HolmFamily:
    """The family the rows' adjusted p-values were computed over."""
    return HolmFamily(tuple(r.summary.label for r in rows))


@dataclass(frozen=True)
class AccuracyRow:
    """One row of the accuracy table: a task's overall result or one stratum of it."""

    task: str
    stratum: str  # "overall" or the stratum field, e.g. "subject"
    value: str  # "all" or the stratum value, e.g. "Geometry"
    summary: PairedSummary
    verdict: AccuracyVerdict
    ungraded: int

    def __json__(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "stratum": self.stratum,
            "value": self.value,
            "ungraded_excluded": self.ungraded,
            "stats": self.summary,
            "verdict": self.verdict,
        }


def accuracy_rows(
    candidate: Mapping[str, SampleResult],
    baseline: Mapping[str, SampleResult],
    candidate_grades: Mapping[str, Grade],
    baseline_grades: Mapping[str, Grade],
    *,
    delta: float | Mapping[str, float],
    seed: int = 0,
    bootstrap_method: BootstrapMethod = "bca",
    n_resamples: int = 10_000,
) -> list[AccuracyRow]:
    """Rows for every task and stratum in the baseline; each task's rows are one Holm family (module docstring)."""
    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    skipped: dict[tuple[str, str, str], int] = defaultdict(int)
    for sid in sorted(candidate.keys() & baseline.keys()):
        res = baseline[sid]
        keys = [(res.task, OVERALL, "all")] + [(res.task, k, str(v)) for k, v in sorted(res.strata.items())]
        cg, bg = candidate_grades.get(sid), baseline_grades.get(sid)
        graded = cg is not None and bg is not None and cg.status != "ungraded" and bg.status != "ungraded"
        for key in keys:
            if graded:
                groups[key].append(sid)
            else:
                skipped[key] += 1
    rows: list[tuple[tuple[str, str, str], PairedSummary]] = []
    for key in sorted(groups, key=lambda k: (k[0], k[1] != OVERALL, k[1], _natural(k[2]))):
        ids = groups[key]
        cand = np.array([1.0 if candidate_grades[s].correct else 0.0 for s in ids])
        base = np.array([1.0 if baseline_grades[s].correct else 0.0 for s in ids])
        d = delta[key[0]] if isinstance(delta, Mapping) else delta
        label = f"{key[0]} {key[1]}" if key[1] == OVERALL else f"{key[0]} {key[1]}={key[2]}"
        rows.append(
            (
                key,
                paired_summary(
                    cand,
                    base,
                    delta=d,
                    label=label,
                    seed=seed,
                    bootstrap_method=bootstrap_method,
                    n_resamples=n_resamples,
                ),
            )
        )
    out = []
    for task in dict.fromkeys(key[0] for key, _ in rows):
        family = [(key, s) for key, s in rows if key[0] == task]
        for (key, s), p in zip(family, holm_adjust([s.p_value for _, s in family])):
            s = s.with_adjusted(p, HOLM)
            out.append(AccuracyRow(key[0], key[1], key[2], s, accuracy_verdict(s), skipped.get(key, 0)))
    return out


def _natural(value: str) -> tuple[int, float | str]:
    try:
        return (0, float(value))
    except ValueError:
        return (1, value)
