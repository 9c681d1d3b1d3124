"""Bootstrap intervals that cannot say anything: every field a report prints, for each way that happens.

The notes are sentences the report shows next to the interval; the level and method travel with them so a
degenerate interval is still labelled.  The one-sided BCa case is reached by handing back what scipy returns
then (non-finite bounds), since which data and seed produce it is scipy's business.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalsuite.stats import bootstrap_mean_interval, intervals

SAME = "Every item has the same score (1), so every resample has the same mean; "
WILSON = " Read the Wilson interval instead."


def _fields(iv: intervals.Interval) -> tuple[object, ...]:
    """The interval's fields, NaN written as the string 'nan' so that equal intervals compare equal."""
    return tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in vars(iv).values())


@pytest.mark.parametrize("method", ["bca", "percentile", "basic"])
def test_no_items(method: str) -> None:
    iv = bootstrap_mean_interval(np.array([]), level=0.9, method=method)  # type: ignore[arg-type]
    assert _fields(iv) == ("nan", "nan", 0.9, f"bootstrap-{method}", True, "No items: accuracy is undefined.")


def test_every_item_the_same_under_bca() -> None:
    iv = bootstrap_mean_interval(np.ones(12), level=0.9, method="bca")
    assert _fields(iv) == ("nan", "nan", 0.9, "bootstrap-bca", True, SAME + "BCa is undefined here." + WILSON)


@pytest.mark.parametrize("method", ["percentile", "basic"])
def test_every_item_the_same_under_percentile_and_basic(method: str) -> None:
    iv = bootstrap_mean_interval(np.ones(12), level=0.9, method=method)  # type: ignore[arg-type]
    note = SAME + "the bootstrap interval has zero width." + WILSON
    assert _fields(iv) == (1.0, 1.0, 0.9, f"bootstrap-{method}", True, note)


@pytest.mark.parametrize("bounds", [(math.nan, math.nan), (math.nan, 0.6), (0.4, math.inf)])
def test_a_one_sided_bootstrap_distribution(monkeypatch: pytest.MonkeyPatch, bounds: tuple[float, float]) -> None:
    calls: list[tuple[object, ...]] = []

    def scipy_gave(*args: object) -> tuple[float, float]:
        calls.append(args)
        return bounds

    monkeypatch.setattr(intervals, "_scipy_bootstrap", scipy_gave)
    iv = bootstrap_mean_interval(np.array([0.0, 1.0, 1.0]), level=0.9, method="bca", n_resamples=7, seed=3)
    note = "The bootstrap distribution lies entirely on one side of the estimate, so BCa is undefined."
    assert _fields(iv) == ("nan", "nan", 0.9, "bootstrap-bca", True, note)
    assert len(calls) == 1 and calls[0][1:] == (0.9, "bca", 7, 3)
