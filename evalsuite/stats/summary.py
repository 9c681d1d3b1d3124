"""One paired comparison (an overall row or one stratum), every statistic the recipe asks for.

Inputs are per-item scores aligned by item: 0/1 with one sample per item, or
item means in [0, 1] with K samples per item.  With binary scores the paired
difference uses Tango's interval and exact McNemar; with fractional item means
the 2x2 table does not exist, so equivalence uses the paired bootstrap 90 %
interval and significance the exact sign test on items where the arms differ,
and `difference_method` says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from evalsuite.stats.intervals import BootstrapMethod, Interval, bootstrap_mean_interval, wilson_interval
from evalsuite.stats.paired import PairedCounts, miller_se, paired_bootstrap_interval, tango_interval
from evalsuite.stats.power import min_detectable_difference, min_equivalence_margin, n_for_equivalence
from evalsuite.stats.significance import Equivalence, mcnemar_exact, tost_tango


@dataclass(frozen=True)
class ArmAccuracy:
    """One arm's accuracy with both intervals side by side."""

    n: int
    accuracy: float
    wilson: Interval
    bootstrap: Interval


@dataclass(frozen=True)
class PairedSummary:
    """Accuracy of both arms and their paired difference on one set of items."""

    label: str
    n: int
    candidate: ArmAccuracy
    baseline: ArmAccuracy
    counts: PairedCounts
    difference: float
    difference_method: str
    interval95: Interval
    interval90: Interval
    bootstrap: Interval
    se: float
    discordance: float
    p_value: float
    p_method: str
    equivalence: Equivalence
    min_detectable_difference: float
    min_equivalence_margin: float
    n_to_settle: int | None  # None with no items: no discordance rate to plan from
    p_adjusted: float = math.nan
    adjust_method: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def with_adjusted(self, p: float, method: str) -> PairedSummary:
        return replace(self, p_adjusted=p, adjust_method=method)

    def __json__(self) -> dict[str, Any]:
        """Every field but `extra` (working data), through the one serializer (NaN -> null)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}


def arm_accuracy(
    scores: np.ndarray, *, level: float, method: BootstrapMethod, n_resamples: int, seed: int
) -> ArmAccuracy:
    """Accuracy of one arm over item scores (already averaged per item)."""
    x = np.asarray(scores, dtype=np.float64)
    n = len(x)
    acc = float(x.mean()) if n else math.nan
    return ArmAccuracy(
        n=n,
        accuracy=acc,
        wilson=wilson_interval(float(x.sum()), n, level),
        bootstrap=bootstrap_mean_interval(x, level=level, method=method, n_resamples=n_resamples, seed=seed),
    )


def paired_summary(
    candidate: np.ndarray,
    baseline: np.ndarray,
    *,
    delta: float,
    label: str = "overall",
    level: float = 0.95,
    bootstrap_method: BootstrapMethod = "bca",
    n_resamples: int = 10_000,
    seed: int = 0,
) -> PairedSummary:
    """Everything about one paired comparison; `delta` is the equivalence margin declared before the run."""
    cand = np.asarray(candidate, dtype=np.float64)
    base = np.asarray(baseline, dtype=np.float64)
    if cand.shape != base.shape or cand.ndim != 1:
        raise ValueError(f"per-item scores must be two 1-D arrays of equal length, got {cand.shape} and {base.shape}")
    n = len(cand)
    binary = bool(np.isin(cand, (0.0, 1.0)).all() and np.isin(base, (0.0, 1.0)).all())
    counts = PairedCounts(
        both=int(((cand > 0.5) & (base > 0.5)).sum()) if binary else int((cand == base).sum()),
        baseline_only=int((base > cand).sum()),
        candidate_only=int((cand > base).sum()),
        neither=int(((cand < 0.5) & (base < 0.5)).sum()) if binary else 0,
    )
    d = cand - base
    diff = float(d.mean()) if n else math.nan
    boot = paired_bootstrap_interval(cand, base, level=level, method="percentile", n_resamples=n_resamples, seed=seed)
    if binary:
        iv95 = tango_interval(counts, 0.95)
        equivalence = tost_tango(counts, delta)
        iv90 = equivalence.interval
        method, p_method = "tango-score", "exact McNemar (binomial on discordant pairs)"
    else:
        iv95 = boot
        iv90 = paired_bootstrap_interval(
            cand, base, level=0.90, method="percentile", n_resamples=n_resamples, seed=seed
        )
        ok = bool(math.isfinite(iv90.low) and -delta < iv90.low and iv90.high < delta)
        equivalence = Equivalence(delta, iv90, ok)
        method, p_method = "paired-bootstrap (item means, K > 1)", "exact sign test on items whose means differ"
    r = counts.discordant / n if n else math.nan
    return PairedSummary(
        label=label,
        n=n,
        candidate=arm_accuracy(cand, level=level, method=bootstrap_method, n_resamples=n_resamples, seed=seed),
        baseline=arm_accuracy(base, level=level, method=bootstrap_method, n_resamples=n_resamples, seed=seed),
        counts=counts,
        difference=diff,
        difference_method=method,
        interval95=iv95,
        interval90=iv90,
        bootstrap=boot,
        se=miller_se(d),
        discordance=r,
        p_value=mcnemar_exact(counts.baseline_only, counts.candidate_only),
        p_method=p_method,
        equivalence=equivalence,
        min_detectable_difference=min_detectable_difference(r, n),
        min_equivalence_margin=min_equivalence_margin(r, n),
        n_to_settle=n_for_equivalence(r, delta) if n else None,
    )
