"""paired_summary on 0/1 scores against a published paired table, and the options it passes on.

The table is Cavo et al. 2012 as analysed in Fagerland, Lydersen & Laake,
"Statistical Analysis of Contingency Tables" (2017), ch. 8: [[59, 6], [16, 80]],
difference -0.0621, Tango 95 % CI -0.1240 to -0.0054.  Its exact McNemar p is
scipy's binomtest on the 22 discordant pairs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from evalsuite.stats import HOLM, PairedCounts, paired_summary

BOTH, BASE_ONLY, CAND_ONLY, NEITHER = 59, 16, 6, 80


def _cavo() -> tuple[np.ndarray, np.ndarray]:
    """Per-item 0/1 scores that make the published table (candidate = after, baseline = before)."""
    cand = np.array([1] * BOTH + [0] * BASE_ONLY + [1] * CAND_ONLY + [0] * NEITHER, dtype=float)
    base = np.array([1] * BOTH + [1] * BASE_ONLY + [0] * CAND_ONLY + [0] * NEITHER, dtype=float)
    return cand, base


def test_binary_scores_give_the_published_tango_interval_and_exact_mcnemar() -> None:
    cand, base = _cavo()
    s = paired_summary(cand, base, delta=0.05, n_resamples=200)
    assert s.counts == PairedCounts(BOTH, BASE_ONLY, CAND_ONLY, NEITHER)
    assert s.difference_method == "tango-score" and s.p_method.startswith("exact McNemar")
    assert s.difference == pytest.approx(-0.0621, abs=5e-5)
    assert s.interval95.low == pytest.approx(-0.1240, abs=5e-5)
    assert s.interval95.high == pytest.approx(-0.0054, abs=5e-5)
    assert s.p_value == pytest.approx(stats.binomtest(CAND_ONLY, BASE_ONLY + CAND_ONLY).pvalue, rel=1e-12)
    assert s.discordance == pytest.approx(22 / 161)
    assert s.se == pytest.approx(np.std(cand - base, ddof=1) / math.sqrt(161), rel=1e-12)
    # The 90 % interval decides TOST: narrower than the 95 % one, and it excludes 0 here.
    assert s.interval90.level == 0.90 and s.interval95.low < s.interval90.low < s.interval90.high < -0.0054
    assert not s.equivalence.equivalent and s.equivalence.delta == 0.05
    # Power, by hand with r = 22/161, n = 161, delta = 0.05 (docs/statistics.md, step 6):
    r, z_tost = 22 / 161, stats.norm.ppf(0.95) + stats.norm.ppf(0.90)
    assert s.n_to_settle == math.ceil(z_tost**2 * r / 0.05**2) == 469
    assert s.min_detectable_difference == pytest.approx(
        (stats.norm.ppf(0.975) + stats.norm.ppf(0.80)) * math.sqrt(r / 161)
    )
    assert s.min_equivalence_margin == pytest.approx(z_tost * math.sqrt(r / 161))  # above the 1.7-point floor


def test_counts_from_boolean_outcomes_are_the_2x2_table() -> None:
    cand, base = _cavo()
    assert PairedCounts.from_outcomes(cand == 1, base == 1) == PairedCounts(BOTH, BASE_ONLY, CAND_ONLY, NEITHER)
    assert PairedCounts.from_outcomes(cand, base).difference == pytest.approx((6 - 16) / 161)
    with pytest.raises(ValueError, match=r"arms differ in length: candidate \(161,\), baseline \(160,\)"):
        PairedCounts.from_outcomes(cand, base[:-1])


def test_the_arm_bootstrap_uses_the_method_and_resamples_asked_for() -> None:
    cand, base = _cavo()
    s = paired_summary(cand, base, delta=0.05, bootstrap_method="percentile", n_resamples=200, seed=4)
    ref = stats.bootstrap((cand,), np.mean, method="percentile", n_resamples=200, rng=np.random.default_rng(4))
    assert s.candidate.bootstrap.method == "bootstrap-percentile"
    assert s.candidate.bootstrap.low == pytest.approx(ref.confidence_interval.low, rel=1e-12)
    assert s.candidate.bootstrap.high == pytest.approx(ref.confidence_interval.high, rel=1e-12)
    assert s.candidate.accuracy == pytest.approx(65 / 161) and s.baseline.accuracy == pytest.approx(75 / 161)


def test_with_adjusted_sets_the_holm_p_and_keeps_the_raw_one() -> None:
    s = paired_summary(*_cavo(), delta=0.05, n_resamples=200)
    assert math.isnan(s.p_adjusted) and s.adjust_method == ""
    adj = s.with_adjusted(0.157, HOLM)
    assert (adj.p_adjusted, adj.adjust_method, adj.p_value) == (0.157, HOLM, s.p_value)
