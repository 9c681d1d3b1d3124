"""The two-sample test at one node: do both arms choose the next token with the same probabilities?

The counts form a 2 x K table (arm by outcome).  Categories too rare for the
chi-square approximation are pooled into one "other" column (Cochran's rule:
every expected count >= `min_expected`); pooling looks only at the column
totals, which are sufficient under the null, so it does not bias the test.
The statistic is Pearson's chi-square (default) or the G (log-likelihood
ratio) statistic, referred to chi-square with K - 1 degrees of freedom.
A node where after pooling only one category is left has nothing to test.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

OTHER = -3
"""The pooled column of rare outcomes."""

Method = Literal["pearson", "g"]


@dataclass(frozen=True)
class NodeTest:
    """One node's table after pooling, its statistic, degrees of freedom and p-value (NaN: untestable)."""

    outcomes: tuple[int, ...]  # column labels: token ids, END, OTHER
    a: tuple[int, ...]
    b: tuple[int, ...]
    statistic: float
    df: int
    p: float
    method: str

    @property
    def n_a(self) -> int:
        return sum(self.a)

    @property
    def n_b(self) -> int:
        return sum(self.b)

    @property
    def testable(self) -> bool:
        return self.df > 0


def pool(a: Counter[int], b: Counter[int], min_expected: float = 5.0) -> tuple[list[int], np.ndarray]:
    """Columns (labels, 2 x K counts) with rare outcomes pooled until every expected count is large enough.

    Expected count of a column in the smaller arm = column total x (smaller arm / both arms).
    Columns are kept from the most to the least frequent; the pooled remainder is
    folded into the smallest kept column while it is itself too small.
    """
    n_a, n_b = sum(a.values()), sum(b.values())
    total = n_a + n_b
    if total == 0:
        return [], np.zeros((2, 0), int)
    share = min(n_a, n_b) / total
    labels = sorted(set(a) | set(b), key=lambda t: (-(a[t] + b[t]), t))
    kept = [t for t in labels if (a[t] + b[t]) * share >= min_expected]
    rest = [t for t in labels if t not in kept]
    rest_total = sum(a[t] + b[t] for t in rest)
    while rest and rest_total * share < min_expected and kept:
        moved = kept.pop()
        rest.append(moved)
        rest_total += a[moved] + b[moved]
    columns = [[a[t], b[t]] for t in kept]
    names = list(kept)
    if rest:
        columns.append([sum(a[t] for t in rest), sum(b[t] for t in rest)])
        names.append(OTHER if len(rest) > 1 or not kept else rest[0])
    table = np.array(columns, dtype=np.int64).T.reshape(2, len(columns))
    return names, table


def node_test(a: Counter[int], b: Counter[int], *, method: Method = "pearson", min_expected: float = 5.0) -> NodeTest:
    """Test one node; p is NaN when fewer than two columns survive pooling."""
    names, table = pool(a, b, min_expected)
    df = max(table.shape[1] - 1, 0)
    label = "pearson chi-square" if method == "pearson" else "G-test"
    if df == 0 or table.sum(axis=1).min() == 0:
        return NodeTest(tuple(names), tuple(table[0]), tuple(table[1]), float("nan"), 0, float("nan"), label)
    statistic = _statistic(table, method)
    p = float(stats.chi2.sf(statistic, df))
    return NodeTest(
        tuple(names), tuple(int(x) for x in table[0]), tuple(int(x) for x in table[1]), statistic, df, p, label
    )


def _statistic(table: np.ndarray, method: Method) -> float:
    """Pearson's X^2 or G = 2 sum O ln(O/E) of a 2 x K table (what scipy's chi2_contingency computes, faster)."""
    observed = table.astype(float)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    if method == "pearson":
        return float(((observed - expected) ** 2 / expected).sum())
    nonzero = observed > 0
    return float(2 * (observed[nonzero] * np.log(observed[nonzero] / expected[nonzero])).sum())


def total_variation(a: Counter[int], b: Counter[int]) -> float:
    """Observed TV distance between the two arms' next-outcome frequencies (unpooled)."""
    n_a, n_b = sum(a.values()), sum(b.values())
    if n_a == 0 or n_b == 0:
        return float("nan")
    return 0.5 * sum(abs(a[t] / n_a - b[t] / n_b) for t in set(a) | set(b))
