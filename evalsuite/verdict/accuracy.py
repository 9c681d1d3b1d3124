"""The accuracy verdict for one paired comparison: EQUIVALENT, DIFFERENT or INCONCLUSIVE."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from evalsuite.stats.summary import PairedSummary

AccuracyLabel = Literal["EQUIVALENT", "DIFFERENT", "INCONCLUSIVE"]
ALPHA = 0.05


def _pts(x: float) -> str:
    return f"{x * 100:+.1f}"


@dataclass(frozen=True)
class AccuracyVerdict:
    label: AccuracyLabel
    reason: str
    delta: float
    n_to_settle: int | None


def accuracy_verdict(s: PairedSummary) -> AccuracyVerdict:
    """EQUIVALENT when TOST passes (90 % interval inside +-delta), DIFFERENT when the Holm-adjusted
    p-value is below 0.05, otherwise INCONCLUSIVE with the n that would settle it."""
    delta = s.equivalence.delta
    iv = s.interval90
    p = s.p_adjusted if not math.isnan(s.p_adjusted) else s.p_value
    p_name = "Holm-adjusted p" if not math.isnan(s.p_adjusted) else "p"
    span = f"[{_pts(iv.low)}, {_pts(iv.high)}] points"
    if s.n == 0:
        return AccuracyVerdict("INCONCLUSIVE", "No item was graded in both runs.", delta, None)
    if s.equivalence.equivalent:
        extra = f"; the difference is nonetheless significant ({p_name} = {p:.2g})" if p < ALPHA else ""
        return AccuracyVerdict(
            "EQUIVALENT",
            f"The 90 % {s.difference_method} interval {span} lies inside ±{delta * 100:g} points{extra}.",
            delta,
            None,
        )
    if p < ALPHA:
        return AccuracyVerdict(
            "DIFFERENT",
            f"The candidate is {_pts(s.difference)} points vs the baseline on {s.n} items "
            f"({s.counts.candidate_only} gained, {s.counts.baseline_only} lost; {s.p_method}, {p_name} = {p:.2g}).",
            delta,
            None,
        )
    if s.min_equivalence_margin >= delta:
        why = (
            f"With {s.n} items even perfect agreement only shows equivalence within "
            f"±{s.min_equivalence_margin * 100:.1f} points, so ±{delta * 100:g} cannot be shown"
        )
    else:
        why = f"The 90 % interval {span} crosses ±{delta * 100:g} points and {p_name} = {p:.2g}"
    return AccuracyVerdict(
        "INCONCLUSIVE",
        f"{why}; about {s.n_to_settle:,} items at this discordance ({s.discordance * 100:.1f} %) would settle it.",
        delta,
        s.n_to_settle,
    )
