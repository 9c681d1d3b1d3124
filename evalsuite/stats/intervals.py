"""Confidence intervals for one arm's accuracy: Wilson and a seeded item bootstrap (scipy's).

Accuracy is a mean over items.  With K samples per item the item's score is the
mean of its K grades first (the item is the cluster), so K never inflates n.
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats
from scipy.special import ndtri

BootstrapMethod = Literal["percentile", "basic", "bca"]

_SCIPY_METHOD: dict[str, str] = {"percentile": "percentile", "basic": "basic", "bca": "BCa"}
RESAMPLED_VALUES = 2_000_000
"""Values one bootstrap batch holds at most (16 MB of float64): resamples, and BCa's jackknife samples, are made
this many at a time whatever the number of items.  Unbatched, 20,000 paired speed ratios made 3 GB at once."""
# scipy >= 1.15 takes the generator as `rng`; older releases call it `random_state`.
_RNG_KEYWORD = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"


@dataclass(frozen=True)
class Interval:
    """A two-sided interval with the method that produced it.

    `degenerate` is True when the method cannot say anything useful for this
    data (every item scored the same): the percentile bootstrap then returns a
    zero-width interval and BCa is undefined (NaN bounds).  `note` says so in a
    sentence a report can print.
    """

    low: float
    high: float
    level: float
    method: str
    degenerate: bool = False
    note: str = ""

    @property
    def width(self) -> float:
        return self.high - self.low

    def contains(self, value: float, tol: float = 1e-12) -> bool:
        return self.low - tol <= value <= self.high + tol


def item_means(scores: np.ndarray) -> np.ndarray:
    """Per-item scores from an [items] or [items, K] array (NaN = missing sample, ignored)."""
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim == 1:
        return arr
    if arr.ndim != 2:
        raise ValueError(f"scores must be [items] or [items, K], got shape {arr.shape}")
    counts = (~np.isnan(arr)).sum(axis=1)
    means = np.where(counts > 0, np.nansum(arr, axis=1) / np.maximum(counts, 1), np.nan)
    if np.isnan(means).any():
        bad = int(np.flatnonzero(np.isnan(means))[0])
        raise ValueError(f"item {bad} has no graded sample; drop it before computing accuracy")
    return means


def wilson_interval(successes: float, n: int, level: float = 0.95) -> Interval:
    """Wilson score interval for a proportion (Wilson 1927); valid at 0/n and n/n."""
    if n <= 0:
        return Interval(math.nan, math.nan, level, "wilson", True, "No items: accuracy is undefined.")
    z = float(ndtri(0.5 + level / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(max(0.0, centre - half), min(1.0, centre + half), level, "wilson")


def resample_batch(n: int) -> int:
    """How many resamples of `n` items one batch holds (RESAMPLED_VALUES); scipy's intervals do not depend on it."""
    return max(1, RESAMPLED_VALUES // max(n, 1))


def _scipy_bootstrap(
    x: np.ndarray, level: float, method: BootstrapMethod, n_resamples: int, seed: int
) -> tuple[float, float]:
    """scipy.stats.bootstrap of the mean, seeded, in bounded batches; NaN bounds where scipy finds none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(
            (x,),
            np.mean,
            confidence_level=level,
            method=_SCIPY_METHOD[method],
            n_resamples=n_resamples,
            batch=resample_batch(len(x)),
            vectorized=True,
            axis=-1,
            **{_RNG_KEYWORD: np.random.default_rng(seed)},
        )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def bootstrap_mean_interval(
    values: np.ndarray,
    *,
    level: float = 0.95,
    method: BootstrapMethod = "bca",
    n_resamples: int = 10_000,
    seed: int = 0,
) -> Interval:
    """Bootstrap interval for the mean of per-item values, resampling items with replacement.

    `scipy.stats.bootstrap` does the resampling and the interval (percentile,
    basic, or BCa after Efron & Tibshirani 1993, 14.3, with the jackknife
    acceleration); it is seeded (numpy PCG64 with `seed`), so the same data
    and seed give the same interval.  When every item has the same value
    there is no sampling variability to resample: percentile and basic return
    the zero-width interval [v, v] and BCa returns NaN bounds, both flagged
    `degenerate`, as is a BCa interval scipy cannot form because every
    resampled mean lies on one side of the estimate.
    """
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    label = f"bootstrap-{method}"
    if method not in _SCIPY_METHOD:
        raise ValueError(f"unknown bootstrap method {method!r}; use percentile, basic or bca")
    if n == 0:
        return Interval(math.nan, math.nan, level, label, True, "No items: accuracy is undefined.")
    theta = float(x.mean())
    if np.all(x == x[0]):
        note = (
            f"Every item has the same score ({theta:g}), so every resample has the same mean; "
            + ("BCa is undefined here." if method == "bca" else "the bootstrap interval has zero width.")
            + " Read the Wilson interval instead."
        )
        if method == "bca":
            return Interval(math.nan, math.nan, level, label, True, note)
        return Interval(theta, theta, level, label, True, note)
    low, high = _scipy_bootstrap(x, level, method, n_resamples, seed)
    if not (math.isfinite(low) and math.isfinite(high)):
        note = "The bootstrap distribution lies entirely on one side of the estimate, so BCa is undefined."
        return Interval(math.nan, math.nan, level, label, True, note)
    return Interval(low, high, level, label)
