"""The numeric resolution of an engine's logits, read off the logprobs it returned.

An engine that keeps logits in bf16 (vLLM's and SGLang's default on GPUs)
can only tell two tokens apart in steps of the bf16 spacing at the logits'
magnitude: 2^-7 of the leading power of two, so 0.125 nats for logits
between 16 and 32.  The gaps between a position's top logprobs are then whole
multiples of that step (the log-sum-exp cancels in a gap), and a divergence
whose baseline margin is a few steps is a tie that rounding broke, not a
confident choice.  Engines that compute logits in fp32 (llama.cpp, whatever
the weights) show no such grid: their gaps are multiples of nothing coarser
than fp32 rounding.

The evidence is the baseline's own top logprobs over the whole run, so it
needs no control; a run is on a grid only when nearly every informative
position is, which a continuous engine never shows by chance.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from evalsuite.records import TokenTrace

COARSEST_EXPONENT = 2
"""The coarsest grid step tried: 2^-2 = 0.25 nats, bf16's spacing for logits between 32 and 64.  Gaps on a
coarser grid (hand-written logprobs, or logits past 64) count as this step, so a tie never spans more than
`RESOLUTION_STEPS` x 0.25 nats."""
FINEST_EXPONENT = 10
"""The finest step that still counts as a grid: 2^-10 nats; fp32 rounding of logprobs is ~2^-19."""
GAP_TOLERANCE = 1e-4
"""How far (nats) a gap may sit from a grid point: fp32 rounding of two logprobs is ~1e-5 at most."""
MIN_POSITIONS = 32
"""Informative positions needed before a run may be called quantized."""
GRID_SHARE = 0.9
"""Share of informative positions that must lie on a grid for the run to count as quantized."""
RESOLUTION_STEPS = 4.0
"""A divergence at a margin of at most this many grid steps is a tie: twice the largest step count at which a
self-drafting bf16 control diverged (2), the same slack a control run gets (calibration in docs/diff.md)."""
STEP_CAP_QUANTILE = 0.9
"""A position's step is capped at this quantile of the run's: five gaps can share a coarser power of two by chance."""


_SPAN = FINEST_EXPONENT - COARSEST_EXPONENT
_STEPS_UP = np.array([_SPAN] + [min((i & -i).bit_length() - 1, _SPAN) for i in range(1, 1 << _SPAN)], np.intp)
"""For a whole number of finest steps, by its remainder modulo 2^_SPAN: how many times coarser than the finest
step its grid is (its trailing zero bits, capped where the coarsest step tried is reached)."""
assert GAP_TOLERANCE * 2 < 2.0**-FINEST_EXPONENT  # see `position_steps`: one nearest fine multiple per gap


def position_steps(top_logprobs: np.ndarray) -> np.ndarray:
    """Per position, the coarsest power-of-two step (nats) every nonzero top-k gap is a multiple of.

    0.0 where the gaps fit no grid of at least 2^-FINEST_EXPONENT; NaN where
    the position has no nonzero gap to judge (fewer than two finite entries,
    or all of them tied).

    A gap fits a step when it lies within GAP_TOLERANCE of a multiple of it.  A multiple of a coarser step
    is a multiple of every finer one, and the tolerance is under half the finest step, so a gap that fits
    the finest step has one nearest fine multiple, N of them, and fits exactly the steps N is a whole
    number of: its grid is read off N's trailing zero bits, with no pass per step.  (In floating point
    too: scaling by a power of two, rounding to a whole number and the difference are exact or correctly
    rounded alike at every step, so each step's test gives what the finest step's gave.)
    """
    rows = np.asarray(top_logprobs, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] < 2 or not len(rows):
        return np.full(len(rows), np.nan)
    rows = np.where(np.isfinite(rows), rows, -np.inf)
    columns = list(rows.T)  # a reduction over k columns runs along n; one along each short row is slower
    gaps = np.maximum.reduce(columns)[:, None] - rows  # the top entry's own gap is 0, which no grid test counts
    usable = np.isfinite(gaps) & (gaps > GAP_TOLERANCE)
    fine = np.where(usable, gaps, 0.0) * 2.0**FINEST_EXPONENT  # in finest steps
    multiples = np.rint(fine)
    fits = np.abs(fine - multiples) <= GAP_TOLERANCE * 2.0**FINEST_EXPONENT
    multiples = np.where(fits, multiples, 0.0)  # 0 (no gap, or one off the grid) constrains no step
    places = multiples - np.floor(multiples / 2.0**_SPAN) * 2.0**_SPAN  # exact for whole numbers (fmod: 10x slower)
    coarser = _STEPS_UP[places.astype(np.intp)]
    on_grid = np.logical_and.reduce(list(fits.T))
    exponent = FINEST_EXPONENT - np.minimum.reduce(list(coarser.T))
    steps = np.where(on_grid, np.exp2(-exponent.astype(np.float64)), 0.0)
    return np.where(np.logical_or.reduce(list(usable.T)), steps, np.nan)


def step_at(trace: TokenTrace | None, position: int) -> float:
    """The grid step at one position of a trace (see `position_steps`); NaN when it cannot be judged."""
    if trace is None or position >= len(trace) or trace.top_logprobs.ndim != 2 or not trace.has_top[position]:
        return math.nan
    return float(position_steps(trace.top_logprobs[position : position + 1])[0])


@dataclass(frozen=True)
class LogitResolution:
    """What a run's logprobs show about the grid its logits lie on.

    `quantized` is the verdict; `step` the typical step (median over
    positions on a grid) and `cap` the largest step a single position is
    trusted with; `share` the fraction of `positions` (informative ones) that
    lie on a grid.  `steps` is how many grid steps a tie may span.
    """

    positions: int
    share: float
    quantized: bool
    step: float
    cap: float
    low: float
    high: float
    steps: float = RESOLUTION_STEPS

    def tie_limit(self, position_step: float) -> float:
        """The largest margin (nats) that is a tie at a position with this step; 0 when the run is not on a grid."""
        if not self.quantized:
            return 0.0
        step = position_step if math.isfinite(position_step) and position_step > 0 else self.step
        return self.steps * min(step, self.cap) + GAP_TOLERANCE  # a margin on the grid, read back from float32

    @property
    def description(self) -> str:
        """One sentence for reports: what the logprobs showed and what follows from it."""
        if self.positions == 0:
            return "the baseline returned no top logprobs to judge its numeric resolution"
        seen = f"{self.share:.0%} of {self.positions:,} baseline positions"
        if not self.quantized:
            return f"the baseline's logits lie on no coarse grid ({seen} do), so no resolution widens the threshold"
        span = _nats(self.step) if self.low == self.high else f"{_nats(self.low)}-{_nats(self.high)}"
        return (
            f"the baseline's logits come in steps of {span} nats ({seen}, typical of bf16), so a divergence "
            f"within {self.steps:g} steps of the baseline's top token is a rounding tie"
        )


def _nats(x: float) -> str:
    return f"{x:.4g}"


class ResolutionTally:
    """`logit_resolution` one trace at a time, so a comparison never holds a whole run's logprobs.

    A position's step is one of a few powers of two (or 0, off any grid), so
    counts per step value give the same median and quantile as the steps
    themselves, exactly.
    """

    def __init__(self) -> None:
        self.judged = 0
        self.on_grid: dict[float, int] = {}

    def add(self, trace: TokenTrace | None) -> None:
        """Count one trace's informative positions and their grid steps."""
        if trace is None or trace.top_logprobs.ndim != 2:
            return
        found = position_steps(trace.top_logprobs[trace.has_top])
        judged = found[np.isfinite(found)]
        self.judged += len(judged)
        values, counts = np.unique(judged[judged > 0], return_counts=True)
        for value, count in zip(values.tolist(), counts.tolist()):
            self.on_grid[value] = self.on_grid.get(value, 0) + count

    def _order_statistic(self, k: int) -> float:
        """The k-th smallest on-grid step (0-based)."""
        seen = 0
        for value in sorted(self.on_grid):
            seen += self.on_grid[value]
            if k < seen:
                return value
        raise IndexError(k)

    def result(self, *, steps: float = RESOLUTION_STEPS) -> LogitResolution:
        """The resolution of every trace added, as `logit_resolution` judges it."""
        if not self.judged:
            return LogitResolution(0, 0.0, False, 0.0, 0.0, 0.0, 0.0, steps)
        n = sum(self.on_grid.values())
        share = n / self.judged
        quantized = self.judged >= MIN_POSITIONS and share >= GRID_SHARE
        if not n:
            return LogitResolution(self.judged, share, False, 0.0, 0.0, 0.0, 0.0, steps)
        middle = (n - 1) // 2
        median = self._order_statistic(middle)
        if n % 2 == 0:  # np.median: the mean of the two middle values
            median = (median + self._order_statistic(middle + 1)) / 2
        cap = self._order_statistic(int(np.floor(STEP_CAP_QUANTILE * (n - 1))))  # np.quantile, method="lower"
        common = [value for value in self.on_grid if value <= cap]
        return LogitResolution(
            positions=self.judged,
            share=share,
            quantized=quantized,
            step=float(median),
            cap=cap,
            low=min(common),
            high=max(common),
            steps=steps,
        )


def logit_resolution(traces: Iterable[TokenTrace | None], *, steps: float = RESOLUTION_STEPS) -> LogitResolution:
    """Judge a run's logit grid from every position's top logprobs."""
    tally = ResolutionTally()
    for trace in traces:
        tally.add(trace)
    return tally.result(steps=steps)
