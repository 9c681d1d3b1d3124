"""Robust statistics for speed figures: outliers by the MAD rule, percentiles, bootstrap ratio intervals.

Speed on a shared machine has heavy tails: one request stalled behind another
process can take 40 times longer than its neighbours, and a mean or an
aggregate (total tokens over total time) then describes the stall, not the
engine.  So every speed figure here is computed after flagging outliers with
Iglewicz and Hoaglin's modified z-score on the log scale (speeds and their
ratios are multiplicative), and the flagged points are reported, not dropped
silently.  Intervals for speedups come from `scipy.stats.bootstrap` over the
paired log ratios, seeded so a report is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from evalsuite.stats.intervals import resample_batch

MAD_THRESHOLD = 3.5
"""Modified z-score above which a point is an outlier (Iglewicz and Hoaglin's recommendation)."""
MAD_SCALE = 0.6745
"""Makes the median absolute deviation estimate one standard deviation for normal data."""
MIN_LOG_MAD = 0.05
"""Floor on the MAD of log values: on a very steady server (a GPU, MAD ~1 %) the bare rule would flag requests
only 10 % off the median, which is workload, not a stall.  With the floor a point must also be at least
exp(3.5 * 0.05 / 0.6745) = 1.30x from the median to be called out."""
N_RESAMPLES = 2000
PERCENTILES = (50, 90, 99)


def finite(values: Iterable[float]) -> np.ndarray:
    """The finite values as a float64 array."""
    arr = np.asarray([float(v) for v in values], dtype=np.float64)
    return arr[np.isfinite(arr)]


def mad_outliers(values: Sequence[float], *, log: bool = True, threshold: float = MAD_THRESHOLD) -> np.ndarray:
    """Boolean mask of outliers by the modified z-score |0.6745 (x - median) / MAD| > threshold.

    With `log` (the default, for rates and ratios) the rule runs on log values,
    so a request at half the median speed is as far out as one at twice it.
    Non-finite or non-positive (under `log`) values are never flagged here;
    callers treat them as untimed.  When more than half the values are equal
    the MAD is zero; the mean absolute deviation (scaled by 1.2533, as
    Iglewicz and Hoaglin suggest) stands in, and if that is zero too nothing
    is an outlier.  On the log scale the spread is floored at MIN_LOG_MAD so
    only practically large departures count.  Fewer than 4 values are too few
    to call any of them out.
    """
    arr = np.asarray(values, dtype=np.float64)
    mask = np.zeros(arr.shape, dtype=bool)
    ok = np.isfinite(arr) & ((arr > 0) if log else True)
    if ok.sum() < 4:
        return mask
    x = np.log(arr[ok]) if log else arr[ok]
    center = np.median(x)
    dev = np.abs(x - center)
    mad = float(np.median(dev))
    if log:
        mad = max(mad, MIN_LOG_MAD)
    if mad > 0:
        z = MAD_SCALE * dev / mad
    else:
        mean_ad = float(np.mean(dev))
        if mean_ad == 0:
            return mask
        z = dev / (1.253314 * mean_ad)
    mask[np.flatnonzero(ok)] = z > threshold
    return mask


def percentiles(values: Iterable[float], qs: Sequence[int] = PERCENTILES) -> dict[str, float]:
    """`{"p50": ..., "p90": ..., "p99": ...}` over the finite values (NaN when there are none)."""
    arr = finite(values)
    if not len(arr):
        return {f"p{q}": math.nan for q in qs}
    return {f"p{q}": float(v) for q, v in zip(qs, np.percentile(arr, qs))}


@dataclass(frozen=True)
class RatioEstimate:
    """A geometric-mean ratio with its 95 % bootstrap interval over the pairs it came from."""

    n: int
    geometric_mean: float
    low95: float
    high95: float
    median: float
    faster_share: float


def ratio_estimate(ratios: Sequence[float], *, seed: int = 0) -> RatioEstimate:
    """Geometric mean of paired ratios with a seeded BCa bootstrap interval (percentile when BCa degenerates).

    Ratios are averaged on the log scale because they multiply: a 2x and a
    0.5x pair are no speedup, not 1.25x.  One pair has no interval (NaN).
    """
    arr = finite(r for r in ratios if r > 0)
    n = len(arr)
    if n == 0:
        nan = math.nan
        return RatioEstimate(0, nan, nan, nan, nan, nan)
    logs = np.log(arr)
    gm = float(np.exp(logs.mean()))
    low = high = math.nan
    if n >= 2 and np.ptp(logs) > 0:
        for method in ("BCa", "percentile"):
            res = sps.bootstrap(
                (logs,),
                np.mean,
                n_resamples=N_RESAMPLES,
                batch=resample_batch(n),
                method=method,
                confidence_level=0.95,
                random_state=np.random.default_rng(seed),
            )
            low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
            if math.isfinite(low) and math.isfinite(high):
                break
        low, high = math.exp(low), math.exp(high)
    elif n >= 2:
        low = high = gm
    return RatioEstimate(n, gm, low, high, float(np.exp(np.median(logs))), float((logs > 0).mean()))


def disagreement(a: float, b: float) -> float:
    """How many times larger the larger of two positive figures is (1.0 = equal; NaN when either is unusable)."""
    if not (math.isfinite(a) and math.isfinite(b)) or a <= 0 or b <= 0:
        return math.nan
    return max(a, b) / min(a, b)
