"""Confidence intervals for one arm's accuracy: Wilson and a seeded item bootstrap.

Accuracy is a mean over items.  With K samples per item the item's score is the
mean of its K grades first (the item is the cluster), so K never inflates n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.special import ndtr, ndtri

BootstrapMethod = Literal["percentile", "basic", "bca"]

_CHUNK = 2_000  # resamples drawn per batch; keeps index arrays under ~25 MB at n=1,319


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

    def as_dict(self) -> dict[str, object]:
        return {
            "low": _finite_or_none(self.low),
            "high": _finite_or_none(self.high),
            "level": self.level,
            "method": self.method,
            "degenerate": self.degenerate,
            "note": self.note,
        }


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


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


def _resample_means(x: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    n = len(x)
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, _CHUNK):
        stop = min(start + _CHUNK, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n), dtype=np.int32 if n < 2**31 else np.int64)
        out[start:stop] = x[idx].mean(axis=1)
    return out


def bootstrap_mean_interval(
    values: np.ndarray,
    *,
    level: float = 0.95,
    method: BootstrapMethod = "bca",
    n_resamples: int = 10_000,
    seed: int = 0,
) -> Interval:
    """Bootstrap interval for the mean of per-item values, resampling items with replacement.

    Seeded (numpy PCG64 with `seed`), so the same data and seed give the same
    interval.  BCa follows Efron & Tibshirani (1993) 14.3: bias correction from
    the mid-rank of the estimate among the resampled means, acceleration from
    the jackknife.  When every item has the same value there is no sampling
    variability to resample: percentile and basic return the zero-width
    interval [v, v] and BCa returns NaN bounds, both flagged `degenerate`.
    """
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    label = f"bootstrap-{method}"
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
    rng = np.random.default_rng(seed)
    boot = _resample_means(x, n_resamples, rng)
    alpha = (1 - level) / 2
    if method == "percentile":
        lo, hi = np.quantile(boot, [alpha, 1 - alpha])
        return Interval(float(lo), float(hi), level, label)
    if method == "basic":
        lo, hi = np.quantile(boot, [alpha, 1 - alpha])
        return Interval(float(2 * theta - hi), float(2 * theta - lo), level, label)
    if method != "bca":
        raise ValueError(f"unknown bootstrap method {method!r}; use percentile, basic or bca")
    share = ((boot < theta).sum() + (boot <= theta).sum()) / (2 * n_resamples)
    z0 = float(ndtri(share))
    jack = (x.sum() - x) / (n - 1)
    u = (n - 1) * (jack.mean() - jack)
    a = float((u**3).sum() / n**3 / 6 / ((u**2).sum() / n**2) ** 1.5)
    if not math.isfinite(z0) or not math.isfinite(a):
        note = "The bootstrap distribution lies entirely on one side of the estimate, so BCa is undefined."
        return Interval(math.nan, math.nan, level, label, True, note)
    za = float(ndtri(alpha))
    q = []
    for zq in (za, -za):
        q.append(float(ndtr(z0 + (z0 + zq) / (1 - a * (z0 + zq)))))
    lo, hi = np.quantile(boot, q)
    return Interval(float(lo), float(hi), level, label)
