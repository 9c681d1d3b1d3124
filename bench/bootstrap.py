"""Benchmark: one arm's bootstrap accuracy interval (scipy.stats.bootstrap) against a plain numpy loop.

Times `bootstrap_mean_interval` (percentile and BCa, 10,000 resamples) on a
GSM8K-sized arm of `--items` scores, next to a reference measured in the same
run: the numpy loop evalsuite used before (draw index batches of 2,000
resamples, average, take quantiles; BCa adds the jackknife).  Prints seconds
per interval, the ratio to the reference, and both intervals, which match
because scipy draws the same indices from the same seeded generator.

    .venv/bin/python bench/bootstrap.py [--items 1319] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy.special import ndtr, ndtri

from evalsuite.stats import bootstrap_mean_interval


def reference(x: np.ndarray, method: str, n_resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """The hand-written loop: seeded index batches, then percentile or BCa (mid-rank bias, jackknife)."""
    rng, n, alpha = np.random.default_rng(seed), len(x), 0.025
    boot = np.empty(n_resamples)
    for start in range(0, n_resamples, 2_000):
        stop = min(start + 2_000, n_resamples)
        boot[start:stop] = x[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    theta = x.mean()
    if method == "percentile":
        lo, hi = np.quantile(boot, [alpha, 1 - alpha])
        return float(lo), float(hi)
    z0 = ndtri(((boot < theta).sum() + (boot <= theta).sum()) / (2 * n_resamples))
    u = (x.sum() - x) / (n - 1)
    u = u.mean() - u
    a = (u**3).sum() / (6 * ((u**2).sum()) ** 1.5)
    q = [ndtr(z0 + (z0 + z) / (1 - a * (z0 + z))) for z in (ndtri(alpha), -ndtri(alpha))]
    lo, hi = np.quantile(boot, q)
    return float(lo), float(hi)


def seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1319)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    x = (np.random.default_rng(1).random(args.items) < 0.8).astype(float)
    for method in ("percentile", "bca"):
        ours = seconds(lambda m=method: bootstrap_mean_interval(x, method=m), args.repeats)  # type: ignore[arg-type]
        ref = seconds(lambda m=method: reference(x, m), args.repeats)
        iv = bootstrap_mean_interval(x, method=method)  # type: ignore[arg-type]
        lo, hi = reference(x, method)
        print(
            f"{method:>10}: scipy {ours * 1e3:7.1f} ms  loop {ref * 1e3:7.1f} ms  ratio {ours / ref:4.2f}x  "
            f"interval [{iv.low:.4f}, {iv.high:.4f}] vs [{lo:.4f}, {hi:.4f}]"
        )


if __name__ == "__main__":
    main()
