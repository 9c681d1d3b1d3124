"""Accuracy intervals against statsmodels (Wilson) and scipy (bootstrap)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from evalsuite.stats import bootstrap_mean_interval, item_means, wilson_interval


@pytest.mark.parametrize("k,n", [(0, 38), (38, 38), (37, 38), (120, 124), (435, 500), (1, 1), (700, 1319)])
@pytest.mark.parametrize("level", [0.90, 0.95])
def test_wilson_matches_statsmodels(k: int, n: int, level: float) -> None:
    lo, hi = proportion_confint(k, n, alpha=1 - level, method="wilson")
    iv = wilson_interval(k, n, level)
    assert iv.low == pytest.approx(lo, abs=1e-12)
    assert iv.high == pytest.approx(hi, abs=1e-12)
    assert iv.method == "wilson"


def test_wilson_of_no_items_is_undefined_not_an_error() -> None:
    iv = wilson_interval(0, 0)
    assert math.isnan(iv.low) and iv.degenerate


@pytest.mark.parametrize("method,scipy_method", [("percentile", "percentile"), ("basic", "basic"), ("bca", "BCa")])
def test_bootstrap_agrees_with_scipy_within_monte_carlo_error(method: str, scipy_method: str) -> None:
    rng = np.random.default_rng(7)
    x = (rng.random(124) < 0.8).astype(float)
    ours = bootstrap_mean_interval(x, method=method, n_resamples=40_000, seed=3)  # type: ignore[arg-type]
    ref = stats.bootstrap((x,), np.mean, method=scipy_method, n_resamples=40_000, rng=np.random.default_rng(11))
    # Monte Carlo error of a 2.5 % quantile with 40k resamples is ~0.002 here; one item is 0.008.
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.006)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.006)
    assert ours.method == f"bootstrap-{method}"


def test_bootstrap_is_seeded() -> None:
    x = np.random.default_rng(0).random(38)  # item means with K samples: continuous, so seeds show
    a = bootstrap_mean_interval(x, seed=5)
    b = bootstrap_mean_interval(x, seed=5)
    c = bootstrap_mean_interval(x, seed=6)
    assert (a.low, a.high) == (b.low, b.high)
    assert (a.low, a.high) != (c.low, c.high)


def test_all_correct_bca_is_nan_like_scipy_and_flagged() -> None:
    x = np.ones(40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = stats.bootstrap((x,), np.mean, method="BCa", rng=np.random.default_rng(0))
    assert math.isnan(ref.confidence_interval.low)
    iv = bootstrap_mean_interval(x, method="bca")
    assert math.isnan(iv.low) and math.isnan(iv.high)
    assert iv.degenerate and "Wilson" in iv.note
    assert iv.as_dict()["low"] is None  # JSON gets null, not NaN


def test_all_correct_percentile_is_zero_width_and_flagged() -> None:
    iv = bootstrap_mean_interval(np.ones(40), method="percentile")
    assert (iv.low, iv.high) == (1.0, 1.0)
    assert iv.degenerate and "zero width" in iv.note
    # Wilson still says something useful at 40/40.
    assert wilson_interval(40, 40).low < 0.92


def test_k_samples_are_averaged_per_item() -> None:
    scores = np.array([[1, 1, 0, 1], [0, 0, 0, 0], [1, np.nan, 1, 1]], float)
    np.testing.assert_allclose(item_means(scores), [0.75, 0.0, 1.0])
    with pytest.raises(ValueError, match="item 0 has no graded sample"):
        item_means(np.array([[np.nan, np.nan]]))
