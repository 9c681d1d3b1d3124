"""Accuracy intervals against statsmodels (Wilson), a textbook bootstrap and the normal limit."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from evalsuite.serialize import to_jsonable
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


def _textbook_bootstrap(
    x: np.ndarray, method: str, n_resamples: int, seed: int, level: float = 0.95
) -> tuple[float, float]:
    """Efron & Tibshirani (1993) ch. 13-14 written out: an oracle independent of scipy's code."""
    rng = np.random.default_rng(seed)
    n, theta, alpha = len(x), float(x.mean()), (1 - level) / 2
    boot = x[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1)
    lo, hi = np.quantile(boot, [alpha, 1 - alpha])
    if method == "percentile":
        return float(lo), float(hi)
    if method == "basic":
        return 2 * theta - float(hi), 2 * theta - float(lo)
    z0 = stats.norm.ppf(((boot < theta).mean() + (boot <= theta).mean()) / 2)  # mid-rank: the means tie often
    jack = (x.sum() - x) / (n - 1)
    u = jack.mean() - jack
    a = (u**3).sum() / (6 * ((u**2).sum()) ** 1.5)
    q = [stats.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z))) for z in stats.norm.ppf([alpha, 1 - alpha])]
    lo, hi = np.quantile(boot, q)
    return float(lo), float(hi)


@pytest.mark.parametrize("method", ["percentile", "basic", "bca"])
@pytest.mark.parametrize("p, n", [(0.8, 124), (0.35, 60)])
def test_bootstrap_agrees_with_the_textbook_within_monte_carlo_error(method: str, p: float, n: int) -> None:
    rng = np.random.default_rng(7)
    x = (rng.random(n) < p).astype(float)
    ours = bootstrap_mean_interval(x, method=method, n_resamples=40_000, seed=3)  # type: ignore[arg-type]
    low, high = _textbook_bootstrap(x, method, 40_000, seed=11)
    # Monte Carlo error of a 2.5 % quantile with 40k resamples is ~0.002 here; one item is 0.008 or more.
    assert ours.low == pytest.approx(low, abs=0.006)
    assert ours.high == pytest.approx(high, abs=0.006)
    assert ours.method == f"bootstrap-{method}" and not ours.degenerate


def test_bootstrap_level_and_large_n_normal_limit() -> None:
    """At n = 1,319 the percentile interval of a proportion is close to p ± z·sqrt(p(1-p)/n)."""
    x = (np.random.default_rng(2).random(1319) < 0.7).astype(float)
    p, se = x.mean(), x.std() / math.sqrt(len(x))
    for level in (0.90, 0.95):
        iv = bootstrap_mean_interval(x, method="percentile", level=level, seed=1)
        z = stats.norm.ppf(0.5 + level / 2)
        assert iv.low == pytest.approx(p - z * se, abs=0.004) and iv.high == pytest.approx(p + z * se, abs=0.004)
        assert iv.level == level
    assert bootstrap_mean_interval(x, level=0.90).width < bootstrap_mean_interval(x, level=0.95).width
    with pytest.raises(ValueError, match="unknown bootstrap method"):
        bootstrap_mean_interval(x, method="studentized")  # type: ignore[arg-type]


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
    assert to_jsonable(iv)["low"] is None  # JSON gets null, not NaN


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


def test_bootstrap_resamples_many_items_in_bounded_batches_with_the_unbatched_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evalsuite.stats import intervals

    x = np.random.default_rng(4).integers(0, 2, 5000).astype(float)
    whole = stats.bootstrap(
        (x,), np.mean, n_resamples=2000, method="BCa", **{intervals._RNG_KEYWORD: np.random.default_rng(7)}
    )
    batches = []
    real = stats.bootstrap

    def counted(*args, **kwargs):
        batches.append(kwargs["batch"])
        return real(*args, **kwargs)

    monkeypatch.setattr(intervals.stats, "bootstrap", counted)
    got = bootstrap_mean_interval(x, n_resamples=2000, seed=7)
    assert (got.low, got.high) == (whole.confidence_interval.low, whole.confidence_interval.high)
    assert batches and all(b * len(x) <= intervals.RESAMPLED_VALUES for b in batches)
