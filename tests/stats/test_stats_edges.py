"""The statistics at their small edges: one test, one sample, one discordant pair, booleans, defaults.

References are scipy's binomial test and statsmodels' Holm, or arithmetic by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.multitest import multipletests

from evalsuite.serialize import dumps
from evalsuite.stats import Interval, holm_adjust, item_means, paired_summary, sign_test_greater


def test_sign_test_with_one_or_no_discordant_item() -> None:
    assert sign_test_greater(1, 0) == pytest.approx(binomtest(1, 1, 0.5, alternative="greater").pvalue) == 0.5
    assert sign_test_greater(0, 1) == 1.0
    assert sign_test_greater(0, 0) == 1.0


def test_holm_of_one_test_is_the_test_itself_and_of_none_is_empty() -> None:
    assert holm_adjust([0.03]) == [0.03] == list(multipletests([0.03], method="holm")[1])
    assert holm_adjust([]) == []
    assert all(math.isnan(p) for p in holm_adjust([float("nan"), float("nan")]))


def test_an_item_with_one_graded_sample_of_three_scores_that_sample() -> None:
    scores = np.array([[1.0, np.nan, np.nan], [0.0, 1.0, np.nan], [1, 1, 0]])
    assert item_means(scores).tolist() == [1.0, 0.5, pytest.approx(2 / 3)]
    with pytest.raises(ValueError, match=r"scores must be \[items\] or \[items, K\], got shape \(1, 1, 1\)"):
        item_means(np.zeros((1, 1, 1)))


def test_interval_contains_its_own_ends_within_the_tolerance() -> None:
    iv = Interval(0.2, 0.4, 0.95, "wilson")
    assert iv.contains(0.2 - 1e-12) and iv.contains(0.4 + 1e-12)
    assert not iv.contains(0.2 - 1e-9) and not iv.contains(0.4 + 1e-9)


def test_paired_summary_takes_booleans_and_keeps_its_defaults() -> None:
    rng = np.random.default_rng(3)
    base = rng.random(60) < 0.8
    cand = base.copy()
    cand[:5] = ~cand[:5]
    as_float = paired_summary(cand.astype(float), base.astype(float), delta=0.05, n_resamples=10_000, seed=0)
    assert dumps(paired_summary(cand, base, delta=0.05)) == dumps(as_float)  # booleans work; defaults 10,000 and 0
    s = paired_summary(cand, base, delta=0.05)
    assert s.label == "overall" and s.candidate.n == s.baseline.n == 60
    assert s.candidate.wilson.level == s.interval95.level == 0.95
    assert "extra" not in s.__json__() and "p_adjusted" in s.__json__()
    at90 = paired_summary(cand, base, delta=0.05, level=0.90, n_resamples=200)
    assert at90.candidate.wilson.level == at90.candidate.bootstrap.level == 0.90
    again = paired_summary(cand, base, delta=0.05, level=0.90, n_resamples=200)
    assert dumps(again) == dumps(at90)  # seeded: the bootstrap intervals repeat exactly


def test_paired_summary_refuses_unpaired_or_nested_scores() -> None:
    with pytest.raises(ValueError, match="per-item scores must be two 1-D arrays of equal length, got"):
        paired_summary(np.ones(3), np.ones(4), delta=0.02)
    with pytest.raises(ValueError, match=r"got \(2, 2\) and \(2, 2\)"):
        paired_summary(np.ones((2, 2)), np.ones((2, 2)), delta=0.02)


def test_item_means_make_a_table_of_equal_and_unequal_items_not_a_2x2() -> None:
    cand = np.array([1.0, 0.5, 0.0, 1.0, 0.25])
    base = np.array([1.0, 1.0, 0.0, 0.5, 0.25])  # binary would be wrong: the candidate is fractional
    s = paired_summary(cand, base, delta=0.05, n_resamples=200)
    assert s.difference_method == "paired-bootstrap (item means, K > 1)"
    assert (s.counts.both, s.counts.baseline_only, s.counts.candidate_only, s.counts.neither) == (3, 1, 1, 0)
    binary_candidate = paired_summary(np.array([1.0, 0.0, 1.0, 0.0, 1.0]), base, delta=0.05, n_resamples=200)
    assert binary_candidate.difference_method.startswith("paired-bootstrap")  # one fractional arm is enough
