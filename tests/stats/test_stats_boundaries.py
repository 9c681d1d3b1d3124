"""The statistics exactly at their boundaries: a margin equal to an interval end, a capped Holm p, n = 1 and 2.

References: the recipe's open interval (-delta, +delta), statsmodels' Holm,
and arithmetic by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm
from statsmodels.stats.multitest import multipletests

from evalsuite.stats import (
    PairedCounts,
    holm_adjust,
    item_means,
    miller_se,
    min_detectable_difference,
    min_equivalence_margin,
    n_for_equivalence,
    perfect_agreement_halfwidth,
    tango_interval,
    tost_tango,
    wilson_interval,
)
from evalsuite.stats.paired import _tango_statistic
from evalsuite.stats.power import TOST_FACTOR


def test_tost_needs_the_interval_strictly_inside_the_margin() -> None:
    # More items only the baseline got right: the 90 % interval reaches down to about -1.9 points.
    lower = PairedCounts(400, 5, 1, 94)
    iv = tango_interval(lower, 0.90)
    assert iv.low == pytest.approx(-0.0186, abs=1e-4) and 0 < iv.high < 0.001
    assert not tost_tango(lower, -iv.low).equivalent  # the end on the margin: not inside (-delta, delta)
    assert tost_tango(lower, -iv.low * (1 + 1e-9)).equivalent
    upper = lower.swapped()
    iv = tango_interval(upper, 0.90)
    assert not tost_tango(upper, iv.high).equivalent
    assert tost_tango(upper, iv.high * (1 + 1e-9)).equivalent
    assert tost_tango(upper, 0.03).delta == 0.03


def test_holm_caps_adjusted_p_values_at_one() -> None:
    p = [0.6, 0.7, 0.02]  # unadjusted 3 * 0.02 = 0.06, 2 * 0.6 = 1.2 -> 1
    assert holm_adjust(p) == pytest.approx([1.0, 1.0, 0.06]) == list(multipletests(p, method="holm")[1])


def test_min_detectable_difference_at_one_item() -> None:
    # One item, discordant: (z_0.975 + z_0.80) * sqrt(1 / 1).
    assert min_detectable_difference(1.0, 1) == pytest.approx(norm.ppf(0.975) + norm.ppf(0.80), rel=1e-12)
    assert min_detectable_difference(1.0, 0) == math.inf


def test_miller_se_needs_two_items() -> None:
    # d = (1, -1): sd with ddof 1 is sqrt(2), over sqrt(2) items -> 1.
    assert miller_se(np.array([1.0, -1.0])) == pytest.approx(1.0)
    assert math.isnan(miller_se(np.array([1.0])))


def test_item_means_of_boolean_grades_are_numbers() -> None:
    # Boolean grades must come back as floats, so that arms can be subtracted item by item.
    a, b = item_means(np.array([True, False, True])), item_means(np.array([True, True, False]))
    assert (a - b).tolist() == [0.0, -1.0, 1.0]


def _perfect_halfwidth(n: int) -> float:
    """Upper 90 % Tango limit with all n items agreeing, solved by hand: z^2 / (n + z^2).

    With b = c = 0 the restricted MLE of p_b is 0 and the statistic is
    -sqrt(n d / (1 - d)); setting it to -z gives d = z^2 / (n + z^2).
    """
    z2 = norm.ppf(0.95) ** 2
    return z2 / (n + z2)


def test_perfect_agreement_floor_matches_the_closed_form() -> None:
    for n in (1, 38, 1319):
        assert min_equivalence_margin(0.0, n) == pytest.approx(_perfect_halfwidth(n), rel=1e-9)
    # r = 5 % at n = 500: the power term sqrt(8.564 * 0.05 / 500) = 2.9 points beats the 0.54-point floor.
    assert min_equivalence_margin(0.05, 500) == pytest.approx(math.sqrt(TOST_FACTOR * 0.05 / 500))
    assert min_equivalence_margin(0.05, 0) == math.inf


def test_n_for_equivalence_when_the_margin_equals_a_floor_exactly() -> None:
    # delta = the half-width at n = 128 exactly: 128 items only reach the margin, 129 are needed.
    delta = perfect_agreement_halfwidth(128)
    assert delta == pytest.approx(_perfect_halfwidth(128), rel=1e-9)
    assert n_for_equivalence(0.0, delta) == 129
    assert not tost_tango(PairedCounts(128, 0, 0, 0), delta).equivalent
    assert tost_tango(PairedCounts(129, 0, 0, 0), delta).equivalent


def test_n_for_equivalence_refuses_a_zero_margin() -> None:
    with pytest.raises(ValueError, match="the equivalence margin must be positive, got 0.0"):
        n_for_equivalence(0.01, 0.0)


def test_n_for_equivalence_when_the_margin_equals_a_bisection_step() -> None:
    # 129 is a midpoint of the search between 128 and 256: at exactly its half-width, 130 items are needed.
    delta = perfect_agreement_halfwidth(129)
    n = n_for_equivalence(0.0, delta)
    assert n == 130 and f"{n:,}" == "130"  # a count of items, printed as such in verdicts
    assert perfect_agreement_halfwidth(0) == math.inf and perfect_agreement_halfwidth(-3) == math.inf


def test_tango_statistic_with_all_items_agreeing_matches_the_closed_form() -> None:
    # b = c = 0: p_b = 0 and the statistic is -sqrt(n d / (1 - d)), also close to d = 0 where the
    # discriminant of the p_b quadratic, (2 n d)^2, is below 1.
    for d in (0.001, 0.004, 0.3):
        assert _tango_statistic(d, 0, 0, 100) == pytest.approx(-math.sqrt(100 * d / (1 - d)), rel=1e-12)


def test_tango_statistic_at_the_ends_of_the_scale() -> None:
    # At d = +-1 the variance is 0 (by hand: p_b = 0 at d = 1 and p_b = 1 at d = -1), so any other
    # observed difference is infinitely far away, and data sitting exactly there scores 0.
    assert _tango_statistic(1.0, 3, 1, 10) == -math.inf
    assert _tango_statistic(-1.0, 3, 1, 10) == math.inf
    assert _tango_statistic(1.0, 10, 0, 10) == 0.0


def test_tango_interval_defaults_to_95_percent() -> None:
    # Cavo et al. 2012 (Fagerland, Lydersen & Laake 2017, ch. 8): Tango 95 % CI -0.1240 to -0.0054.
    iv = tango_interval(PairedCounts(59, 16, 6, 80))
    assert iv.level == 0.95 and iv.method == "tango-score"
    assert (iv.low, iv.high) == pytest.approx((-0.1240, -0.0054), abs=5e-5)


def test_wilson_stays_inside_zero_and_one_where_rounding_would_leave() -> None:
    # At 14/14 and 90 % the formula's upper end rounds to 1 + 2**-52 in floating point; an accuracy
    # interval is clipped to [0, 1].
    z = norm.ppf(0.95)
    raw_high = (1 + z * z / 28) / (1 + z * z / 14) + z * math.sqrt(z * z / (4 * 14 * 14)) / (1 + z * z / 14)
    assert raw_high > 1.0
    assert wilson_interval(14, 14, 0.90).high == 1.0
    assert wilson_interval(0, 14, 0.90).low == 0.0
