"""Power of the node test: the smallest total-variation distance it detects with 80 % power.

At a node reached n_a and n_b times, two next-token distributions P, Q with
TV(P, Q) = d give the chi-square test a noncentrality
lambda = n_h * sum_k (P_k - Q_k)^2 / M_k,  n_h = n_a n_b / (n_a + n_b),  M = (P + Q) / 2.
By Cauchy-Schwarz, (sum |P_k - Q_k|)^2 <= sum (P_k - Q_k)^2 / M_k * sum M_k, so
lambda >= 4 n_h d^2 for every pair at distance d: the least favourable shift
moves mass between two halves of the distribution.  The detectable d is the
one where the noncentral chi-square with that lambda exceeds the critical
value with the asked power; any larger difference, however it is shaped, is
detected at least that often (up to pooling, which only sees the total of
the rare tokens).
"""

from __future__ import annotations

import math
from functools import lru_cache

from scipy import optimize, stats


@lru_cache(maxsize=1024)
def noncentrality_for_power(df: int, level: float, power: float = 0.8) -> float:
    """The noncentrality at which a chi-square(df) test at `level` has the asked power."""
    if df < 1 or not 0 < level < 1:
        return math.inf
    critical = stats.chi2.isf(level, df)

    def gap(lam: float) -> float:
        return float(stats.ncx2.sf(critical, df, lam)) - power

    high = 10.0
    while gap(high) < 0:
        high *= 2
    return float(optimize.brentq(gap, 1e-9, high, xtol=1e-9))


def detectable_tv(n_a: int, n_b: int, *, df: int = 1, level: float = 0.05, power: float = 0.8) -> float:
    """The smallest TV distance detected with `power` at `level` at a node reached n_a and n_b times (<= 1)."""
    if n_a <= 0 or n_b <= 0 or df < 1:
        return math.inf
    n_h = n_a * n_b / (n_a + n_b)
    return min(1.0, math.sqrt(noncentrality_for_power(df, level, power) / (4 * n_h)))


def draws_for_tv(tv: float, *, df: int = 1, level: float = 0.05, power: float = 0.8) -> int:
    """Draws per arm a node must receive so that TV >= tv is detected with `power` at `level`."""
    if not 0 < tv <= 1:
        raise ValueError(f"TV distance must be in (0, 1], got {tv}")
    lam = noncentrality_for_power(df, level, power)
    return math.ceil(2 * lam / (4 * tv * tv))  # n_h = n / 2 for n draws in each arm
