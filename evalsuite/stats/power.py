"""How many items a paired comparison needs, and what a given n can resolve.

For a paired binary comparison with discordance rate r, the variance of the
mean difference is about r / n.  Showing equivalence within +-delta by TOST at
alpha = 0.05 with 80 % power when the true difference is zero needs
n = (z_0.95 + z_0.90)^2 r / delta^2 = 8.57 r / delta^2 items.  With r near 0
that formula promises absurdly small n, so the answer is floored by the n at
which even perfect agreement gives a 90 % Tango interval inside +-delta.
"""

from __future__ import annotations

import math

from scipy.special import ndtri

from evalsuite.stats.paired import PairedCounts, tango_interval

TOST_FACTOR = float((ndtri(0.95) + ndtri(0.90)) ** 2)  # 8.564...
DIFF_FACTOR = float(ndtri(0.975) + ndtri(0.80))  # 2.80: two-sided 5 %, 80 % power


def perfect_agreement_halfwidth(n: int, level: float = 0.90) -> float:
    """Upper limit of the Tango interval when all n items agree: the best equivalence n items can show."""
    if n <= 0:
        return math.inf
    return tango_interval(PairedCounts(n, 0, 0, 0), level).high


def n_for_equivalence(discordance: float, delta: float) -> int:
    """Items needed to show equivalence within +-delta at 80 % power (true difference 0).

    The discordance rate must be known: with no items it is NaN, and no n can
    be planned from it (the caller says "no item" instead).
    """
    if not delta > 0:
        raise ValueError(f"the equivalence margin must be positive, got {delta!r}")
    if not 0.0 <= discordance <= 1.0:
        raise ValueError(f"the discordance rate must be a number in [0, 1], got {discordance!r}")
    power_n = math.ceil(TOST_FACTOR * discordance / delta**2)
    lo, hi = 1, 2
    while perfect_agreement_halfwidth(hi) >= delta:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if perfect_agreement_halfwidth(mid) >= delta:
            lo = mid
        else:
            hi = mid
    return max(power_n, hi)


def min_equivalence_margin(discordance: float, n: int) -> float:
    """Smallest +-delta this n can establish at 80 % power: sqrt(8.57 r / n), floored by perfect agreement."""
    if n <= 0:
        return math.inf
    return max(math.sqrt(TOST_FACTOR * max(discordance, 0.0) / n), perfect_agreement_halfwidth(n))


def min_detectable_difference(discordance: float, n: int) -> float:
    """Smallest true difference McNemar detects at two-sided 5 % with 80 % power: 2.80 sqrt(r / n).

    Zero when there is no discordance: then any difference at all would show up
    as discordant pairs, and the equivalence margin is the better yardstick.
    """
    if n <= 0:
        return math.inf
    return DIFF_FACTOR * math.sqrt(max(discordance, 0.0) / n)
