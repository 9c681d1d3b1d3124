"""The token-level verdict: IDENTICAL, NUMERICAL-ONLY, LOSSY, or UNDETERMINED.

NUMERICAL-ONLY means every divergence is explained by numerics: the candidate
chose a token the baseline held nearly as likely as its own (a gap below the
threshold, which control runs may raise), or diverged at the very place a
control run also diverged, and the candidate diverges no more often than the
control (exact one-sided sign test on the items where exactly one of
the two diverged).  UNDETERMINED is the honest answer when divergences carry
no logprobs and no control explains them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from evalsuite.diff.align import SampleDiff
from evalsuite.diff.classify import ControlProfile, Thresholds
from evalsuite.stats.significance import sign_test_greater

TokenLabel = Literal["IDENTICAL", "NUMERICAL-ONLY", "LOSSY", "UNDETERMINED"]
LOSSLESS_LABELS: frozenset[str] = frozenset({"IDENTICAL", "NUMERICAL-ONLY"})
"""The token labels that say lossless: identical, or within the engine's numerics."""
ALPHA = 0.05


@dataclass(frozen=True)
class RateCheck:
    """Candidate vs a control on the same items: does the candidate diverge more often?"""

    control: str
    candidate_divergent: int
    control_divergent: int
    n: int
    candidate_only: int
    control_only: int
    p_value: float

    @property
    def more_frequent(self) -> bool:
        return self.p_value < ALPHA

    def __json__(self) -> dict[str, Any]:
        return {**self.__dict__, "more_frequent": self.more_frequent, "test": "exact one-sided sign test"}


@dataclass(frozen=True)
class TokenVerdict:
    label: TokenLabel
    reason: str
    n: int
    identical: int
    kinds: dict[str, int]
    level: str
    thresholds: Thresholds
    max_gap: float
    explained_by_control: int = 0
    rate_checks: list[RateCheck] = field(default_factory=list)

    @property
    def divergent(self) -> int:
        return self.n - self.identical

    def __json__(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "reason": self.reason,
            "n": self.n,
            "identical": self.identical,
            "divergent": self.divergent,
            "kinds": self.kinds,
            "level": self.level,
            "thresholds": self.thresholds,
            "max_gap": self.max_gap,
            "explained_by_control": self.explained_by_control,
            "rate_checks": self.rate_checks,
        }


def rate_check(diffs: Sequence[SampleDiff], control: ControlProfile) -> RateCheck:
    """Sign test on items both runs answered: candidate-only divergences against control-only ones."""
    cand = {d.sample_id for d in diffs if not d.identical}
    common = {d.sample_id for d in diffs}
    ctl = {sid for sid in control.divergent if sid in common}
    c_only, k_only = len(cand - ctl), len(ctl - cand)
    return RateCheck(control.name, len(cand), len(ctl), len(common), c_only, k_only, sign_test_greater(c_only, k_only))


def _levels(diffs: Sequence[SampleDiff]) -> str:
    seen = sorted({d.level for d in diffs})
    return "+".join(seen) if seen else "none"


def token_verdict(
    diffs: Sequence[SampleDiff], thresholds: Thresholds, controls: Sequence[ControlProfile] = ()
) -> TokenVerdict:
    """Judge classified diffs (see `evalsuite.diff.classify`) against the thresholds and controls."""
    kinds = {k: sum(1 for d in diffs if d.kind == k) for k in ("identical", "numerical", "confident", "unknown")}
    if any(d.kind is None for d in diffs):
        raise ValueError("token_verdict needs classified diffs; call evalsuite.diff.classify_all first")
    n, same = len(diffs), kinds["identical"]
    gaps = np.array([d.gap for d in diffs if not d.identical and math.isfinite(d.gap)])
    max_gap = float(gaps.max()) if len(gaps) else math.nan
    checks = [rate_check(diffs, c) for c in controls if c.kind == "control"]
    by_control = sum(1 for d in diffs if (d.explained_by or "").startswith("control:"))
    level = _levels(diffs)

    def verdict(label: TokenLabel, reason: str) -> TokenVerdict:
        return TokenVerdict(label, reason, n, same, kinds, level, thresholds, max_gap, by_control, checks)

    if n == 0:
        return verdict("UNDETERMINED", "No sample was answered by both runs.")
    if same == n:
        return verdict(
            "IDENTICAL", f"All {n}/{n} outputs are token-identical to the baseline (compared at the {level} level)."
        )
    div = n - same
    confident = [d for d in diffs if d.kind == "confident"]
    if confident:
        worst = max(confident, key=lambda d: d.gap)
        grid = ""
        if thresholds.resolution is not None and thresholds.resolution.quantized:
            grid = f" and beyond {thresholds.resolution.steps:g} steps of the logits' grid"
        return verdict(
            "LOSSY",
            f"{len(confident)} of {div} divergences are confident: the candidate chose a token the baseline held "
            "well below its own "
            f"(gap {gap_text(worst)}, above the {thresholds.effective:.3g}-nat threshold{grid}: "
            f"{thresholds.source}).",
        )
    frequent = [c for c in checks if c.more_frequent]
    if checks and len(frequent) == len(checks):
        c = frequent[0]
        return verdict(
            "LOSSY",
            f"The candidate diverges on {c.candidate_divergent}/{c.n} samples against {c.control_divergent}/{c.n} "
            f"for the control '{c.control}' (exact one-sided sign test p = {c.p_value:.2g}), "
            "more often than engine numerics explain.",
        )
    unknown = kinds["unknown"]
    if unknown:
        return verdict(
            "UNDETERMINED",
            f"{unknown} of {div} divergences have no logprobs at the divergence and no control diverged there, "
            "so numerics cannot be told from a lossy drafter; request logprobs or add a control run.",
        )
    near = [d.gap for d in diffs if d.explained_by in ("near-tie", "resolution")]
    near_max = max(near) if near else math.nan
    how = f"all at near-ties (the tokens chosen at most {near_max:.3g} nats apart, threshold {thresholds.effective:.3g}"
    rounded = sum(1 for d in diffs if d.explained_by == "resolution")
    if rounded and thresholds.resolution is not None:
        how += f"; {rounded} within {thresholds.resolution.steps:g} steps of the logits' bf16-like grid"
    how += ")"
    if by_control == div:
        how = "all at the same positions where a control run also diverged"
    elif by_control:
        how += f", {by_control} at the same positions as a control run"
    if checks:
        c = checks[0]
        how += f"; no more often than the control '{c.control}' ({c.control_divergent}/{c.n})"
    return verdict("NUMERICAL-ONLY", f"{div} of {n} outputs diverge, {how}.")


def gap_text(diff: SampleDiff) -> str:
    """A divergence's gap as reports write it: "at least 2.3 nats" for a bound, with the side it came from when
    that is the candidate's."""
    text = f"{'at least ' if diff.gap_bound else ''}{diff.gap:.3g} nats"
    return text + (" by the candidate's logprobs" if diff.gap_source == "candidate" else "")
