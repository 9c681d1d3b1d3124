"""paired_summary on item means (K > 1 samples per item), where no 2x2 table exists.

Oracles: scipy.stats.bootstrap of the per-item differences (the paired
bootstrap, same seed and resamples), scipy's binomtest on the items whose means
differ (the sign test), and the recipe's open margin (-delta, +delta).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from evalsuite.stats import PairedSummary, paired_summary

N, RESAMPLES, SEED = 200, 500, 7


def _arms() -> tuple[np.ndarray, np.ndarray]:
    """Item means of 4 samples; the candidate loses a quarter on 9 items and gains one on 3."""
    base = np.random.default_rng(5).integers(0, 5, N) / 4
    cand = base.copy()
    cand[np.flatnonzero(base >= 0.25)[:9]] -= 0.25
    cand[np.flatnonzero(base <= 0.75)[-3:]] += 0.25
    return cand, base


def _summary(cand: np.ndarray, base: np.ndarray, delta: float, **kw: float) -> PairedSummary:
    return paired_summary(cand, base, delta=delta, n_resamples=RESAMPLES, seed=SEED, **kw)  # type: ignore[arg-type]


def _scipy_paired(cand: np.ndarray, base: np.ndarray, level: float) -> tuple[float, float]:
    ref = stats.bootstrap(
        (cand - base,),
        np.mean,
        confidence_level=level,
        method="percentile",
        n_resamples=RESAMPLES,
        rng=np.random.default_rng(SEED),
    )
    return float(ref.confidence_interval.low), float(ref.confidence_interval.high)


def test_item_means_use_the_paired_bootstrap_and_the_sign_test() -> None:
    cand, base = _arms()
    s = _summary(cand, base, 0.05)
    assert s.n == N and s.difference == pytest.approx((3 - 9) * 0.25 / N)
    assert s.difference_method == "paired-bootstrap (item means, K > 1)"
    assert s.p_method == "exact sign test on items whose means differ"
    assert (s.counts.baseline_only, s.counts.candidate_only, s.counts.both, s.counts.neither) == (9, 3, 188, 0)
    assert s.p_value == pytest.approx(stats.binomtest(3, 12).pvalue, rel=1e-12)
    assert s.discordance == pytest.approx(12 / N)
    for iv, level in ((s.interval90, 0.90), (s.interval95, 0.95), (s.bootstrap, 0.95)):
        assert (iv.low, iv.high) == pytest.approx(_scipy_paired(cand, base, level), rel=1e-12)
        assert iv.level == level and iv.method == "paired-bootstrap-percentile"
    assert s.interval90.width < s.interval95.width
    assert s.equivalence.equivalent and s.equivalence.delta == 0.05 and s.equivalence.interval == s.interval90


def test_item_means_equivalence_needs_the_90_interval_strictly_inside() -> None:
    cand, base = _arms()
    iv = _summary(cand, base, 0.05).interval90
    assert iv.low < 0 and iv.high < -iv.low  # shifted down: only the lower end can meet the margin
    assert not _summary(cand, base, -iv.low).equivalence.equivalent
    assert _summary(cand, base, -iv.low * (1 + 1e-9)).equivalence.equivalent
    up = _summary(base, cand, 0.05).interval90  # arms swapped: shifted up
    assert up.low > -up.high
    assert not _summary(base, cand, up.high).equivalence.equivalent
    assert _summary(base, cand, up.high * (1 + 1e-9)).equivalence.equivalent


def test_item_means_bootstrap_follows_the_level_asked_for() -> None:
    cand, base = _arms()
    s = _summary(cand, base, 0.05, level=0.80)
    assert s.bootstrap.level == 0.80
    assert (s.bootstrap.low, s.bootstrap.high) == pytest.approx(_scipy_paired(cand, base, 0.80), rel=1e-12)
    assert s.interval90.level == 0.90  # TOST stays at 90 % whatever the reporting level
    assert not math.isnan(s.se) and s.se == pytest.approx(np.std(cand - base, ddof=1) / math.sqrt(N))
