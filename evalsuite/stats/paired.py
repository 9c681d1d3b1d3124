"""The paired difference between two arms graded on the same items.

Delta = candidate accuracy - baseline accuracy = (c - b) / n, where b counts
items only the baseline got right and c items only the candidate got right.
Intervals: Tango's score interval (valid with empty off-diagonal cells, where
Wald collapses), a paired item bootstrap, and Miller's standard error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtri

from evalsuite.stats.intervals import BootstrapMethod, Interval, bootstrap_mean_interval


@dataclass(frozen=True)
class PairedCounts:
    """The paired 2x2 table: both right, baseline only, candidate only, both wrong."""

    both: int
    baseline_only: int  # b
    candidate_only: int  # c
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.baseline_only + self.candidate_only + self.neither

    @property
    def discordant(self) -> int:
        return self.baseline_only + self.candidate_only

    @property
    def difference(self) -> float:
        return (self.candidate_only - self.baseline_only) / self.n if self.n else math.nan

    @property
    def discordance(self) -> float:
        return self.discordant / self.n if self.n else math.nan

    @staticmethod
    def from_outcomes(candidate: np.ndarray, baseline: np.ndarray) -> PairedCounts:
        """Counts from two boolean arrays aligned by item."""
        cand = np.asarray(candidate, dtype=bool)
        base = np.asarray(baseline, dtype=bool)
        if cand.shape != base.shape:
            raise ValueError(f"arms differ in length: candidate {cand.shape}, baseline {base.shape}")
        return PairedCounts(
            both=int((cand & base).sum()),
            baseline_only=int((base & ~cand).sum()),
            candidate_only=int((cand & ~base).sum()),
            neither=int((~cand & ~base).sum()),
        )

    def swapped(self) -> PairedCounts:
        return PairedCounts(self.both, self.candidate_only, self.baseline_only, self.neither)


def _tango_statistic(delta0: float, c: int, b: int, n: int) -> float:
    """Tango's score statistic for H0: Delta = delta0 with the restricted MLE of p_b (Tango 1998, eq. 3-4)."""
    big_a = 2.0 * n
    big_b = -c - b + (2.0 * n - c + b) * delta0
    big_c = -b * delta0 * (1.0 - delta0)
    disc = max(big_b * big_b - 4.0 * big_a * big_c, 0.0)
    p_b = (math.sqrt(disc) - big_b) / (2.0 * big_a)
    var = n * (2.0 * p_b + delta0 * (1.0 - delta0))
    num = c - b - n * delta0
    if var <= 0.0:
        return math.copysign(math.inf, num) if num else 0.0
    return num / math.sqrt(var)


def tango_interval(counts: PairedCounts, level: float = 0.95) -> Interval:
    """Tango's asymptotic score interval for the paired difference (Stat. Med. 1998, 17:891-908).

    The limits are the two values of delta0 where the score statistic equals
    -+z; they are found by bracketing root search on each side of the estimate.
    """
    n, b, c = counts.n, counts.baseline_only, counts.candidate_only
    if n == 0:
        return Interval(math.nan, math.nan, level, "tango", True, "No paired items.")
    z = float(ndtri(0.5 + level / 2))
    est = (c - b) / n
    eps = 1e-12

    def f(d: float, target: float) -> float:
        return _tango_statistic(d, c, b, n) - target

    lo = -1.0
    if est > -1.0 + eps and f(-1.0 + eps, z) > 0:
        lo = brentq(f, -1.0 + eps, est, args=(z,), xtol=1e-12)
    hi = 1.0
    if est < 1.0 - eps and f(1.0 - eps, -z) < 0:
        hi = brentq(f, est, 1.0 - eps, args=(-z,), xtol=1e-12)
    return Interval(float(lo), float(hi), level, "tango-score")


def miller_se(differences: np.ndarray) -> float:
    """SE of the mean paired difference, sd(d_i)/sqrt(n) (Miller 2024, arXiv 2411.00640, eq. for paired evals)."""
    d = np.asarray(differences, dtype=np.float64)
    if len(d) < 2:
        return math.nan
    return float(d.std(ddof=1) / math.sqrt(len(d)))


def paired_bootstrap_interval(
    candidate: np.ndarray,
    baseline: np.ndarray,
    *,
    level: float = 0.95,
    method: BootstrapMethod = "percentile",
    n_resamples: int = 10_000,
    seed: int = 0,
) -> Interval:
    """Bootstrap interval for mean(candidate - baseline), resampling item indices once for both arms."""
    cand = np.asarray(candidate, dtype=np.float64)
    base = np.asarray(baseline, dtype=np.float64)
    if cand.shape != base.shape:
        raise ValueError(f"arms differ in length: candidate {cand.shape}, baseline {base.shape}")
    iv = bootstrap_mean_interval(cand - base, level=level, method=method, n_resamples=n_resamples, seed=seed)
    return Interval(iv.low, iv.high, iv.level, "paired-" + iv.method, iv.degenerate, iv.note)
