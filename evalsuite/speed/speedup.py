"""Candidate vs baseline speed, paired per sample.

Each sample both runs timed gives a ratio of decode speeds (candidate tokens/s
over baseline tokens/s).  The headline is the geometric mean of those ratios,
with a seeded bootstrap interval over samples (`speed.robust.ratio_estimate`),
because ratios multiply: a 2x and a 0.5x sample average to no speedup, not
1.25x.  A pair in which either request is an outlier of its arm (MAD rule) is
left out of every figure and listed in `excluded`.  The ratio of aggregate
throughputs and of total wall-clock time are given too, since the first
weights long outputs more and the second is what a user waits; both are also
computed over all pairs (`*_all`), and when either disagrees with the paired
figure by more than SPREAD_LIMIT the speedup carries a warning instead of
letting a stall decide the number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from evalsuite.speed.robust import disagreement, ratio_estimate
from evalsuite.speed.summary import SPREAD_LIMIT, SpeedSource, SpeedSummary, speed_summary


@dataclass(frozen=True)
class Speedup:
    """How much faster the candidate decodes than the baseline, on the samples both timed."""

    candidate: SpeedSummary
    baseline: SpeedSummary
    n: int
    geometric_mean: float
    low95: float
    high95: float
    median: float
    aggregate: float
    wall_clock: float
    faster_share: float
    aggregate_all: float = math.nan
    wall_clock_all: float = math.nan
    excluded: tuple[str, ...] = ()
    warnings: list[str] = field(default_factory=list)
    slower: str | None = None
    """Why a candidate reliably slower than its baseline can be (None unless the whole interval is below 1)."""

    def __json__(self) -> dict[str, Any]:
        """The ratio figures; the two runs' own speed summaries are written where the runs are described."""
        skip = ("candidate", "baseline")
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}


def _throughput_ratio(pairs: list[tuple[Any, Any]]) -> tuple[float, float]:
    """(aggregate decode throughput ratio, wall-clock ratio) of candidate over baseline for these pairs."""
    c_tokens = sum(c.decode_tokens for c, _ in pairs)
    b_tokens = sum(b.decode_tokens for _, b in pairs)
    c_decode = sum(c.decode_s for c, _ in pairs)
    b_decode = sum(b.decode_s for _, b in pairs)
    c_wall = sum(c.latency_s for c, _ in pairs)
    b_wall = sum(b.latency_s for _, b in pairs)
    ok = c_decode > 0 and b_decode > 0 and b_tokens > 0
    aggregate = (c_tokens / c_decode) / (b_tokens / b_decode) if ok else math.nan
    wall = b_wall / c_wall if math.isfinite(c_wall) and c_wall > 0 and math.isfinite(b_wall) else math.nan
    return aggregate, wall


def paired_speedup(candidate: SpeedSummary, baseline: SpeedSummary, *, seed: int = 0) -> Speedup:
    """Speedup from two speed summaries (see the module docstring)."""
    ids = sorted(candidate.requests.keys() & baseline.requests.keys())
    pairs = [(candidate.requests[s], baseline.requests[s]) for s in ids]
    pairs = [(c, b) for c, b in pairs if math.isfinite(c.tokens_per_s) and math.isfinite(b.tokens_per_s)]
    out = set(candidate.outliers) | set(baseline.outliers)
    kept = [(c, b) for c, b in pairs if c.sample_id not in out]
    excluded = tuple(c.sample_id for c, _ in pairs if c.sample_id in out)
    est = ratio_estimate([c.tokens_per_s / b.tokens_per_s for c, b in kept], seed=seed)
    aggregate, wall = _throughput_ratio(kept)
    aggregate_all, wall_all = _throughput_ratio(pairs)
    warnings: list[str] = []
    if excluded:
        warnings.append(
            f"{len(excluded)} of {len(pairs)} samples left out of the speedup because a request in them is an "
            f"outlier of its arm: {', '.join(excluded[:5])}{' ...' if len(excluded) > 5 else ''}."
        )
    for name, value in (("aggregate throughput", aggregate_all), ("wall clock", wall_all)):
        gap = disagreement(est.geometric_mean, value)
        if math.isfinite(gap) and gap > SPREAD_LIMIT:
            warnings.append(
                f"The per-sample speedup is {est.geometric_mean:.2f}x but the {name} over all samples gives "
                f"{value:.2f}x ({gap:.1f}x apart): a few slow requests decide the {name} figure, so it is not a "
                f"speedup to trust; measure speed on its own with `evalsuite speed`."
            )
    return Speedup(
        candidate=candidate,
        baseline=baseline,
        n=est.n,
        geometric_mean=est.geometric_mean,
        low95=est.low95,
        high95=est.high95,
        median=est.median,
        aggregate=aggregate,
        wall_clock=wall,
        faster_share=est.faster_share,
        aggregate_all=aggregate_all,
        wall_clock_all=wall_all,
        excluded=excluded,
        warnings=warnings,
        slower=slower_note(candidate, est.geometric_mean, est.high95),
    )


def slower_note(candidate: SpeedSummary, geometric_mean: float, high95: float) -> str | None:
    """What a speedup below 1 says about the drafting, in figures the candidate's own run measured.

    Speculation pays back only when verifying a block of drafts costs about one
    decoding step: true when decoding is bound by memory bandwidth (a large
    model on a GPU), not when it is bound by compute (a small model, a CPU).
    """
    if not (math.isfinite(high95) and high95 < 1.0):
        return None
    head = f"The candidate decoded slower than its baseline ({geometric_mean:.2f}x, the whole interval below 1)."
    tau, accepted, drafted = candidate.mean_accepted_length, candidate.accepted_tokens, candidate.drafted_tokens
    if not (math.isfinite(tau) and tau > 1.0 and accepted and drafted):
        return head + " The engine reported no drafting counts, so acceptance cannot say why."
    per_step = drafted / (accepted / (tau - 1.0))
    return (
        f"{head} Each verification of the target kept {tau:.2f} tokens on average: {accepted / drafted:.0%} of "
        f"about {per_step:.1f} drafted tokens, plus the target's own. Speculative decoding pays back only when "
        f"the target verifies those {per_step + 1:.0f} tokens in about the time of one decoding step, plus the "
        f"drafter's own time. That holds where decoding is bound by memory bandwidth (a large model on a GPU); "
        f"where it is bound by compute (a small model, a CPU), verifying {per_step + 1:.0f} tokens costs "
        f"several steps, and {tau:.2f} tokens per verification do not pay for them."
    )


def speedup(candidate_store: SpeedSource, baseline_store: SpeedSource, *, seed: int = 0) -> Speedup:
    """Speedup of a candidate run over its baseline run, paired per sample."""
    return paired_speedup(speed_summary(candidate_store), speed_summary(baseline_store), seed=seed)
