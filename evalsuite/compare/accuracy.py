"""Paired accuracy per task, per stratum and overall, with Holm across every row.

Only items graded in both runs count; `ungraded` (a grader timeout, a missing
reference) is excluded and counted, never scored as wrong.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from evalsuite.records import Grade, SampleResult
from evalsuite.stats.intervals import BootstrapMethod
from evalsuite.stats.significance import HOLM, holm_adjust
from evalsuite.stats.summary import PairedSummary, paired_summary
from evalsuite.verdict.accuracy import AccuracyVerdict, accuracy_verdict

OVERALL = "overall"


@dataclass(frozen=True)
class AccuracyRow:
    """One row of the accuracy table: a task's overall result or one stratum of it."""

    task: str
    stratum: str  # "overall" or the stratum field, e.g. "subject"
    value: str  # "all" or the stratum value, e.g. "Geometry"
    summary: PairedSummary
    verdict: AccuracyVerdict
    ungraded: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "stratum": self.stratum,
            "value": self.value,
            "ungraded_excluded": self.ungraded,
            "stats": self.summary.as_dict(),
            "verdict": self.verdict.as_dict(),
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
    """Rows for every task and stratum in the baseline, Holm-adjusted together (one family)."""
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
    adjusted = holm_adjust([s.p_value for _, s in rows])
    out = []
    for (key, s), p in zip(rows, adjusted):
        s = s.with_adjusted(p, HOLM)
        out.append(AccuracyRow(key[0], key[1], key[2], s, accuracy_verdict(s), skipped.get(key, 0)))
    return out


def readjust(rows: Sequence[AccuracyRow]) -> list[AccuracyRow]:
    """Holm across rows from several comparisons (several tasks compared separately), verdicts redone."""
    adjusted = holm_adjust([r.summary.p_value for r in rows])
    out = []
    for r, p in zip(rows, adjusted):
        s = r.summary.with_adjusted(p, HOLM)
        out.append(replace(r, summary=s, verdict=accuracy_verdict(s)))
    return out


def _natural(value: str) -> tuple[int, float | str]:
    try:
        return (0, float(value))
    except ValueError:
        return (1, value)
