"""McNemar, Holm and TOST against scipy/statsmodels and exact binomial values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from evalsuite.stats import HOLM, PairedCounts, holm_adjust, mcnemar_exact, sign_test_greater, tost_tango


@pytest.mark.parametrize("b,c", [(0, 0), (0, 1), (1, 7), (7, 1), (16, 6), (5, 5), (30, 12), (0, 12)])
def test_mcnemar_exact_matches_binomtest_and_statsmodels(b: int, c: int) -> None:
    p = mcnemar_exact(b, c)
    if b + c == 0:
        assert p == 1.0
        return
    assert p == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-12)
    assert p == pytest.approx(mcnemar(np.array([[10, c], [b, 10]]), exact=True).pvalue, rel=1e-12)


def test_mcnemar_exact_textbook_values() -> None:
    assert mcnemar_exact(0, 12) == pytest.approx(2 * 0.5**12)
    assert mcnemar_exact(1, 7) == pytest.approx(2 * 9 / 256)  # (1 + 8) / 2^8, doubled


def test_sign_test_one_sided() -> None:
    assert sign_test_greater(12, 0) == pytest.approx(0.5**12)
    assert sign_test_greater(0, 12) == 1.0
    assert sign_test_greater(6, 6) == pytest.approx(binomtest(6, 12, 0.5, alternative="greater").pvalue)


def test_holm_matches_statsmodels_holm_not_its_default() -> None:
    p = [0.01, 0.04, 0.03, 0.005, 0.5, 0.2, 0.049]
    ref = multipletests(p, method="holm")[1]
    np.testing.assert_allclose(holm_adjust(p), ref, rtol=1e-12)
    sidak = multipletests(p)[1]  # statsmodels' default is Holm-Sidak
    assert not np.allclose(holm_adjust(p), sidak)
    assert "holm" in HOLM.lower()


def test_holm_skips_nan() -> None:
    out = holm_adjust([0.01, float("nan"), 0.04])
    assert np.isnan(out[1])
    np.testing.assert_allclose([out[0], out[2]], multipletests([0.01, 0.04], method="holm")[1])


def test_tost_needs_the_90_interval_inside_the_margin() -> None:
    perfect_500 = PairedCounts(435, 0, 0, 65)
    assert tost_tango(perfect_500, 0.02).equivalent
    assert tost_tango(perfect_500, 0.02).interval.level == pytest.approx(0.90)
    perfect_38 = PairedCounts(36, 0, 0, 2)
    assert not tost_tango(perfect_38, 0.02).equivalent  # half-width 6.7 points
    shifted = PairedCounts(400, 5, 25, 70)
    assert not tost_tango(shifted, 0.02).equivalent
    with pytest.raises(ValueError, match="positive"):
        tost_tango(perfect_500, 0.0)
