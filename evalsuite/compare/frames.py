"""A comparison as rows: one record per sample diff, and pandas frames of samples and accuracy rows.

`diff_record` is also what `comparison.json` lists under `divergences`, so the
frame and the JSON describe a sample with the same fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from evalsuite.compare.accuracy import AccuracyRow
from evalsuite.diff.align import SampleDiff

DIFF_FIELDS = (
    "sample_id",
    "level",
    "identical",
    "kind",
    "explained_by",
    "first_divergence",
    "common_prefix",
    "baseline_length",
    "candidate_length",
    "char_offset",
    "gap",
    "gap_bound",
    "gap_source",
    "margin",
    "margin_source",
    "grid_step",
    "baseline_logprob",
    "candidate_rank",
    "candidate_logprob",
    "ended",
    "answer_changed",
    "correctness_flipped",
    "window",
)


def diff_record(d: SampleDiff) -> dict[str, Any]:
    """One sample's diff: identity, divergence, gap and margin, classification, answer and correctness flips."""
    return {name: getattr(d, name) for name in DIFF_FIELDS}


def samples_frame(diffs: Sequence[SampleDiff]) -> pd.DataFrame:
    """One row per sample, indexed by sample id (an empty frame when there is no sample)."""
    frame = pd.DataFrame([diff_record(d) for d in diffs])
    return frame if frame.empty else frame.set_index("sample_id")


def accuracy_frame(rows: Sequence[AccuracyRow]) -> pd.DataFrame:
    """One row per task and stratum with both accuracies, the difference, intervals, p-values and verdict."""
    return pd.DataFrame(
        [
            {
                "task": r.task,
                "stratum": r.stratum,
                "value": r.value,
                "n": r.summary.n,
                "candidate": r.summary.candidate.accuracy,
                "baseline": r.summary.baseline.accuracy,
                "difference": r.summary.difference,
                "low95": r.summary.interval95.low,
                "high95": r.summary.interval95.high,
                "low90": r.summary.interval90.low,
                "high90": r.summary.interval90.high,
                "discordance": r.summary.discordance,
                "p": r.summary.p_value,
                "p_holm": r.summary.p_adjusted,
                "verdict": r.verdict.label,
                "reason": r.verdict.reason,
                "n_to_settle": r.verdict.n_to_settle,
                "ungraded_excluded": r.ungraded,
            }
            for r in rows
        ]
    )
