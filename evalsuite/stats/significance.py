"""Tests on paired outcomes: exact McNemar, Holm's step-down adjustment, and TOST via Tango.

Holm here is the plain Holm (1979) step-down Bonferroni procedure, which is
what `statsmodels.stats.multitest.multipletests(method="holm")` computes; that
function's default is Holm-Sidak, a different (slightly less conservative)
procedure, so the method is always named in results.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from evalsuite.stats.intervals import Interval
from evalsuite.stats.paired import PairedCounts, tango_interval

HOLM = "holm (step-down Bonferroni)"


def mcnemar_exact(baseline_only: int, candidate_only: int) -> float:
    """Two-sided exact McNemar p-value: a binomial(b + c, 1/2) test on the discordant pairs.

    p = min(1, 2 * P[X <= min(b, c)]); with no discordant pairs there is no
    evidence of a difference and p = 1.
    """
    m = baseline_only + candidate_only
    if m == 0:
        return 1.0
    k = min(baseline_only, candidate_only)
    return float(min(1.0, 2.0 * binom.cdf(k, m, 0.5)))


def sign_test_greater(more: int, fewer: int) -> float:
    """One-sided exact sign test that `more` events exceed `fewer` (binomial(more + fewer, 1/2) upper tail)."""
    m = more + fewer
    if m == 0:
        return 1.0
    return float(binom.sf(more - 1, m, 0.5))


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the input order (NaN entries stay NaN and are not counted)."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if m == 0:
        return out.tolist()
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out.tolist()


@dataclass(frozen=True)
class Equivalence:
    """TOST at level alpha via the (1 - 2 alpha) Tango interval and a margin declared before the run."""

    delta: float
    interval: Interval
    equivalent: bool


def tost_tango(counts: PairedCounts, delta: float, alpha: float = 0.05) -> Equivalence:
    """Equivalent within +-delta when the 100(1 - 2 alpha) % Tango interval lies inside (-delta, +delta)."""
    if not delta > 0:
        raise ValueError(f"the equivalence margin must be positive, got {delta!r}")
    iv = tango_interval(counts, level=1 - 2 * alpha)
    ok = bool(math.isfinite(iv.low) and -delta < iv.low and iv.high < delta)
    return Equivalence(delta, iv, ok)
