"""Statistics for paired evals: pure functions over per-item scores (see docs/statistics.md)."""

from evalsuite.stats.intervals import Interval, bootstrap_mean_interval, item_means, wilson_interval
from evalsuite.stats.paired import PairedCounts, miller_se, paired_bootstrap_interval, tango_interval
from evalsuite.stats.power import (
    min_detectable_difference,
    min_equivalence_margin,
    n_for_equivalence,
    perfect_agreement_halfwidth,
)
from evalsuite.stats.significance import HOLM, Equivalence, holm_adjust, mcnemar_exact, sign_test_greater, tost_tango
from evalsuite.stats.summary import ArmAccuracy, PairedSummary, paired_summary

__all__ = [
    "HOLM",
    "ArmAccuracy",
    "Equivalence",
    "Interval",
    "PairedCounts",
    "PairedSummary",
    "bootstrap_mean_interval",
    "holm_adjust",
    "item_means",
    "mcnemar_exact",
    "miller_se",
    "min_detectable_difference",
    "min_equivalence_margin",
    "n_for_equivalence",
    "paired_bootstrap_interval",
    "paired_summary",
    "perfect_agreement_halfwidth",
    "sign_test_greater",
    "tango_interval",
    "tost_tango",
    "wilson_interval",
]
