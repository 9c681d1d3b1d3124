"""Power and minimum detectable differences."""

from __future__ import annotations

import math

import pytest

from evalsuite.stats import (
    PairedCounts,
    min_detectable_difference,
    min_equivalence_margin,
    n_for_equivalence,
    tango_interval,
    tost_tango,
)
from evalsuite.stats.power import TOST_FACTOR


def test_tost_factor_is_8_57() -> None:
    assert TOST_FACTOR == pytest.approx(8.564, abs=1e-3)


def test_n_for_equivalence_follows_the_power_formula() -> None:
    # r = 5 %, delta = 2 points: 8.56 * 0.05 / 0.0004 = 1071 items.
    assert n_for_equivalence(0.05, 0.02) == math.ceil(TOST_FACTOR * 0.05 / 0.02**2)


def test_n_for_equivalence_is_floored_by_perfect_agreement() -> None:
    n = n_for_equivalence(0.0, 0.02)
    assert tost_tango(PairedCounts(n, 0, 0, 0), 0.02).equivalent
    assert not tost_tango(PairedCounts(n - 1, 0, 0, 0), 0.02).equivalent


def test_min_equivalence_margin_for_small_strata() -> None:
    # A 38-item subject can never show +-2 points, even with perfect agreement.
    assert min_equivalence_margin(0.0, 38) == pytest.approx(tango_interval(PairedCounts(38, 0, 0, 0), 0.9).high)
    assert min_equivalence_margin(0.0, 38) > 0.06


def test_min_detectable_difference() -> None:
    assert min_detectable_difference(0.04, 500) == pytest.approx(2.8016 * math.sqrt(0.04 / 500), rel=1e-3)
    assert min_detectable_difference(0.04, 2000) < min_detectable_difference(0.04, 500)
