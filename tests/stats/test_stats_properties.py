"""Invariants of the paired statistics, checked on random tables."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsuite.stats import PairedCounts, paired_summary, tango_interval, wilson_interval

counts_st = st.tuples(*(st.integers(0, 60) for _ in range(4))).filter(lambda t: sum(t) > 0)


@settings(deadline=None)  # root searches: no per-example time limit on a busy machine
@given(counts_st, st.sampled_from([0.90, 0.95]))
def test_tango_contains_the_estimate(t: tuple[int, int, int, int], level: float) -> None:
    counts = PairedCounts(*t)
    iv = tango_interval(counts, level)
    assert iv.contains(counts.difference, tol=1e-9)
    assert -1.0 <= iv.low <= iv.high <= 1.0


@settings(deadline=None)
@given(counts_st)
def test_swapping_arms_flips_the_interval(t: tuple[int, int, int, int]) -> None:
    counts = PairedCounts(*t)
    a = tango_interval(counts)
    b = tango_interval(counts.swapped())
    assert abs(a.low + b.high) < 1e-8 and abs(a.high + b.low) < 1e-8


@settings(deadline=None)
@given(st.integers(0, 200), st.integers(1, 200))
def test_wilson_contains_the_proportion(k: int, n: int) -> None:
    k = min(k, n)
    assert wilson_interval(k, n).contains(k / n, tol=1e-12)


def _arms(seed: int, n: int, flips: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = (rng.random(n) < 0.7).astype(float)
    idx = rng.choice(n, size=min(flips, n), replace=False)
    cand = base.copy()
    cand[idx] = 1 - cand[idx]
    return cand, base


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(5, 120), st.integers(0, 10))
def test_summary_swaps_and_contains(seed: int, n: int, flips: int) -> None:
    cand, base = _arms(seed, n, flips)
    ab = paired_summary(cand, base, delta=0.05, n_resamples=500, seed=seed)
    ba = paired_summary(base, cand, delta=0.05, n_resamples=500, seed=seed)
    assert ab.difference == -ba.difference
    assert ab.p_value == ba.p_value
    assert abs(ab.interval95.low + ba.interval95.high) < 1e-8
    assert ab.interval95.contains(ab.difference, tol=1e-9)
    assert ab.candidate.wilson.contains(ab.candidate.accuracy)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 300))
def test_identical_arms_give_zero_difference_and_equivalence_grows_with_n(seed: int, n: int) -> None:
    _, base = _arms(seed, n, 0)
    s = paired_summary(base, base, delta=0.02, n_resamples=200, seed=seed)
    assert s.difference == 0.0 and s.discordance == 0.0 and s.p_value == 1.0
    assert (s.bootstrap.low, s.bootstrap.high) == (0.0, 0.0)
    assert s.interval90.contains(0.0)
    assert s.equivalence.equivalent == (s.interval90.high < 0.02)
