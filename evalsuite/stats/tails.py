"""How far a further draw may reach, predicted from a handful of draws: the bound behind the near-tie threshold.

A control run's divergences show at what gaps the engine's numerics flip a token.  Their largest gap is a poor
guide when there are few of them: with one or two flips a further flip lands far beyond the largest often.
`exceedance_bound` is the level a further draw exceeds with a stated probability, under an exponential tail
whose scale is unknown.  For k draws with sum S, X_new / S is pivotal (S is Gamma(k, scale)), so
P(X_new > S t) = (1 + t)^-k exactly, for any scale: the bound S (alpha^(-1/k) - 1) is exceeded with probability
alpha whatever the engine's scale, by any number of draws.  Numerics flips have lighter tails than exponential
(a rounding error's spread is bounded), which makes the bound conservative for them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def exceedance_bound(values: Sequence[float], alpha: float) -> float:
    """The level a further draw exceeds with probability `alpha`, given `values` (non-negative) from the same
    exponential tail; NaN without values."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, not {alpha}")
    if not values:
        return math.nan
    total = math.fsum(max(0.0, float(v)) for v in values)
    return total * (alpha ** (-1.0 / len(values)) - 1.0)
