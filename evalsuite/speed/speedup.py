"""Candidate vs baseline speed, paired per sample.

Each sample both runs timed gives a ratio of decode speeds (candidate tokens/s
over baseline tokens/s).  The headline is the geometric mean of those ratios,
with a seeded percentile bootstrap interval over samples, because ratios
multiply: a 2x and a 0.5x sample average to no speedup, not 1.25x.  The
ratio of aggregate throughputs and of total wall-clock time are given too,
since the first weights long outputs more and the second is what a user waits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalsuite.speed.summary import SpeedSource, SpeedSummary, speed_summary

N_RESAMPLES = 2000


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

    def as_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {
            "n": self.n, "geometric_mean": num(self.geometric_mean), "low95": num(self.low95),
            "high95": num(self.high95), "median": num(self.median), "aggregate": num(self.aggregate),
            "wall_clock": num(self.wall_clock), "faster_share": num(self.faster_share),
            "candidate": self.candidate.as_dict(), "baseline": self.baseline.as_dict(),
        }  # fmt: skip


def paired_speedup(candidate: SpeedSummary, baseline: SpeedSummary, *, seed: int = 0) -> Speedup:
    """Speedup from two speed summaries (see the module docstring)."""
    ids = sorted(candidate.requests.keys() & baseline.requests.keys())
    pairs = [(candidate.requests[s], baseline.requests[s]) for s in ids]
    pairs = [(c, b) for c, b in pairs if math.isfinite(c.tokens_per_s) and math.isfinite(b.tokens_per_s)]
    n = len(pairs)
    if n == 0:
        nan = math.nan
        return Speedup(candidate, baseline, 0, nan, nan, nan, nan, nan, nan, nan)
    logs = np.log(np.array([c.tokens_per_s / b.tokens_per_s for c, b in pairs]))
    rng = np.random.default_rng(seed)
    boot = logs[rng.integers(0, n, (N_RESAMPLES, n))].mean(axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    c_tokens = sum(c.tokens for c, _ in pairs)
    b_tokens = sum(b.tokens for _, b in pairs)
    c_decode = sum(c.decode_s for c, _ in pairs)
    b_decode = sum(b.decode_s for _, b in pairs)
    c_wall = sum(c.latency_s for c, _ in pairs)
    b_wall = sum(b.latency_s for _, b in pairs)
    aggregate = (c_tokens / c_decode) / (b_tokens / b_decode) if c_decode > 0 and b_decode > 0 and b_tokens else math.nan
    return Speedup(
        candidate=candidate,
        baseline=baseline,
        n=n,
        geometric_mean=float(np.exp(logs.mean())),
        low95=float(np.exp(low)),
        high95=float(np.exp(high)),
        median=float(np.exp(np.median(logs))),
        aggregate=aggregate,
        wall_clock=b_wall / c_wall if math.isfinite(c_wall) and c_wall > 0 and math.isfinite(b_wall) else math.nan,
        faster_share=float((logs > 0).mean()),
    )


def speedup(candidate_store: SpeedSource, baseline_store: SpeedSource, *, seed: int = 0) -> Speedup:
    """Speedup of a candidate run over its baseline run, paired per sample."""
    return paired_speedup(speed_summary(candidate_store), speed_summary(baseline_store), seed=seed)
