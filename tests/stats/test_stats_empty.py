"""A comparison with no items: every statistic is undefined, said so, and nothing raises.

A stratum or a task can end up with no item graded in both runs; the summary
must still be built so the verdict can say "no item was graded" instead of the
run stopping on a NaN.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from evalsuite.stats import (
    PairedCounts,
    bootstrap_mean_interval,
    n_for_equivalence,
    paired_summary,
    tango_interval,
    wilson_interval,
)


def test_paired_summary_of_no_items_is_undefined_not_an_error() -> None:
    s = paired_summary(np.array([]), np.array([]), delta=0.02, label="empty stratum")
    assert s.label == "empty stratum" and s.n == 0
    assert (s.counts.both, s.counts.baseline_only, s.counts.candidate_only, s.counts.neither) == (0, 0, 0, 0)
    assert math.isnan(s.difference) and math.isnan(s.discordance) and math.isnan(s.se)
    for iv in (s.interval95, s.interval90, s.bootstrap, s.candidate.wilson, s.baseline.bootstrap):
        assert math.isnan(iv.low) and math.isnan(iv.high) and iv.degenerate
    assert math.isnan(s.candidate.accuracy) and s.candidate.n == 0
    # Each undefined interval still names its method and level and says why in a sentence.
    assert (s.interval95.method, s.interval95.level, s.interval95.note) == ("tango", 0.95, "No paired items.")
    assert (s.interval90.method, s.interval90.level) == ("tango", 0.90)
    wilson = s.candidate.wilson
    assert (wilson.method, wilson.level, wilson.note) == ("wilson", 0.95, "No items: accuracy is undefined.")
    assert not s.equivalence.equivalent
    assert s.p_value == 1.0  # no discordant pair: no evidence of a difference
    # Nothing was observed, so no discordance rate to plan from and no n to name.
    assert s.n_to_settle is None
    assert s.min_detectable_difference == math.inf and s.min_equivalence_margin == math.inf


def test_n_for_equivalence_refuses_an_unknown_discordance() -> None:
    with pytest.raises(ValueError, match="discordance rate must be a number in \\[0, 1\\], got nan"):
        n_for_equivalence(math.nan, 0.02)
    with pytest.raises(ValueError, match="got -0.01"):
        n_for_equivalence(-0.01, 0.02)
    with pytest.raises(ValueError, match="got 1.01"):
        n_for_equivalence(1.01, 0.02)
    # The ends of [0, 1] are rates: 8.564 * 1 / 0.1**2 = 856.4 -> 857; at 0 the perfect-agreement floor, 133.
    assert n_for_equivalence(1.0, 0.1) == 857
    assert n_for_equivalence(0.0, 0.02) == 133


def test_each_interval_of_no_items_says_so() -> None:
    wilson = wilson_interval(0, 0)
    assert math.isnan(wilson.low) and math.isnan(wilson.high)
    assert (wilson.level, wilson.method, wilson.degenerate) == (0.95, "wilson", True)
    assert wilson.note == "No items: accuracy is undefined."
    tango = tango_interval(PairedCounts(0, 0, 0, 0), 0.90)
    assert math.isnan(tango.low) and math.isnan(tango.high)
    assert (tango.level, tango.method, tango.degenerate, tango.note) == (0.90, "tango", True, "No paired items.")
    boot = bootstrap_mean_interval(np.array([]), method="percentile")
    assert math.isnan(boot.low) and boot.degenerate is True and boot.method == "bootstrap-percentile"


def test_wilson_defaults_to_95_percent() -> None:
    # statsmodels' Wilson interval for 37/38 at 95 %.
    lo, hi = proportion_confint(37, 38, alpha=0.05, method="wilson")
    assert (wilson_interval(37, 38).low, wilson_interval(37, 38).high) == pytest.approx((lo, hi), rel=1e-12)
