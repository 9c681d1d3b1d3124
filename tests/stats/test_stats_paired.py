"""Paired difference: Tango's interval against published values, McNemar identities, Miller's SE."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from evalsuite.stats import PairedCounts, miller_se, paired_bootstrap_interval, tango_interval
from evalsuite.stats.paired import _tango_statistic


def test_tango_matches_published_cavo_2012_example() -> None:
    # Fagerland, Lydersen & Laake, "Statistical Analysis of Contingency Tables" (2017), ch. 8:
    # complete response before/after consolidation therapy (Cavo et al. 2012),
    # table [[59, 6], [16, 80]]: estimate -0.0621, Tango 95 % CI -0.1240 to -0.0054.
    counts = PairedCounts(both=59, baseline_only=16, candidate_only=6, neither=80)
    iv = tango_interval(counts, 0.95)
    assert counts.difference == pytest.approx(-0.0621, abs=5e-5)
    assert iv.low == pytest.approx(-0.1240, abs=5e-5)
    assert iv.high == pytest.approx(-0.0054, abs=5e-5)


@pytest.mark.parametrize("n,half_width", [(38, 0.067), (124, 0.021), (500, 0.0054), (1319, 0.0020)])
def test_tango_90_half_width_with_perfect_agreement(n: int, half_width: float) -> None:
    # The shared recipe's table: no single MATH-500 subject can show +-2 points.
    iv = tango_interval(PairedCounts(n, 0, 0, 0), 0.90)
    assert iv.high == pytest.approx(half_width, rel=0.03)
    assert iv.low == pytest.approx(-iv.high, abs=1e-12)


@pytest.mark.parametrize("b,c", [(16, 6), (3, 9), (1, 0), (40, 20)])
def test_tango_statistic_at_zero_is_uncorrected_mcnemar(b: int, c: int) -> None:
    # Tango's score statistic at delta0 = 0 reduces to (c - b) / sqrt(b + c).
    n = 160
    stat = _tango_statistic(0.0, c, b, n)
    ref = mcnemar(np.array([[n - b - c, c], [b, 0]]), exact=False, correction=False).statistic
    assert stat**2 == pytest.approx(ref, rel=1e-12)


def test_tango_limits_are_where_the_statistic_hits_z() -> None:
    counts = PairedCounts(53, 8, 16, 9)
    iv = tango_interval(counts, 0.95)
    assert _tango_statistic(iv.low, 16, 8, 86) == pytest.approx(1.959964, abs=1e-6)
    assert _tango_statistic(iv.high, 16, 8, 86) == pytest.approx(-1.959964, abs=1e-6)


def test_tango_stays_valid_when_all_flips_go_one_way() -> None:
    iv = tango_interval(PairedCounts(30, 0, 8, 0), 0.95)
    assert 0 < iv.low < 8 / 38 < iv.high < 1
    extreme = tango_interval(PairedCounts(0, 0, 10, 0), 0.95)
    assert extreme.high == 1.0 and 0 < extreme.low < 1


def test_miller_se_is_sd_of_differences_over_root_n() -> None:
    rng = np.random.default_rng(2)
    d = rng.integers(-1, 2, 200).astype(float)
    assert miller_se(d) == pytest.approx(np.std(d, ddof=1) / np.sqrt(200))


def test_paired_bootstrap_resamples_items_jointly() -> None:
    # Identical arms: every joint resample has difference exactly 0.
    x = (np.arange(100) % 3 == 0).astype(float)
    iv = paired_bootstrap_interval(x, x, seed=1)
    assert (iv.low, iv.high) == (0.0, 0.0) and iv.degenerate
    # Highly correlated arms: the joint interval is much narrower than independent resampling would give.
    y = x.copy()
    y[:4] = 1 - y[:4]
    joint = paired_bootstrap_interval(y, x, seed=1)
    assert joint.width < 0.1


def test_paired_bootstrap_defaults_match_scipy_and_refuse_unpaired_arms() -> None:
    # Item means (continuous), so a different seed or resample count would move the ends.
    rng = np.random.default_rng(9)
    base = rng.random(60)
    cand = base + rng.normal(0, 0.1, 60)
    iv = paired_bootstrap_interval(cand, base)
    ref = stats.bootstrap(
        (cand - base,), np.mean, method="percentile", n_resamples=10_000, rng=np.random.default_rng(0)
    )
    assert (iv.low, iv.high) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high), rel=1e-12)
    assert (iv.level, iv.method, iv.degenerate, iv.note) == (0.95, "paired-bootstrap-percentile", False, "")
    same = paired_bootstrap_interval(base, base)
    assert same.degenerate and same.note.startswith("Every item has the same score (0)")
    with pytest.raises(ValueError, match=r"arms differ in length: candidate \(60,\), baseline \(59,\)"):
        paired_bootstrap_interval(cand, base[:-1])
