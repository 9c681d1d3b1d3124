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
from dataclasses import dataclass, replace

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
"""A divergence at a gap of at most this many grid steps is a tie: twice the largest step count at which a
self-drafting bf16 control diverged (2), the same slack a control run gets (calibration in docs/diff.md)."""
MAX_DECIMALS = 4
"""Logprobs a server rounded to at most this many decimals are read as rounded (finer rounding is within
`GAP_TOLERANCE` already)."""
ROUNDED_SHARE = 0.99
"""Share of a trace's logprobs that must sit on a decimal grid for the trace to count as rounded."""
MIN_STEPS_TRIED = 3
"""Fewest grid steps a rounding may leave to try (finest to coarsest): rounded to one decimal, a gap fits 0.25
within the rounding's error by chance most of the time, so such logprobs show no grid."""

_SPAN = FINEST_EXPONENT - COARSEST_EXPONENT
_STEPS_UP = np.array([_SPAN] + [min((i & -i).bit_length() - 1, _SPAN) for i in range(1, 1 << _SPAN)], np.intp)
"""For a whole number of finest steps, by its remainder modulo 2^_SPAN: how many times coarser than the finest
step its grid is (its trailing zero bits, capped where the coarsest step tried is reached)."""


@dataclass(frozen=True)
class Reading:
    """How precisely a trace's logprobs can show a grid: the tolerance a gap may sit off a grid point, the
    finest step worth trying, and the decimals a server rounded them to (None: not rounded)."""

    decimals: int | None = None
    tolerance: float = GAP_TOLERANCE
    finest: int = FINEST_EXPONENT

    @property
    def readable(self) -> bool:
        return self.finest - COARSEST_EXPONENT + 1 >= MIN_STEPS_TRIED

    @staticmethod
    def rounded_to(decimals: int) -> Reading:
        """Two logprobs each rounded to `decimals` put their gap up to one unit of the last decimal off the grid,
        and one nearest multiple per gap needs a finest step over twice that (see `position_steps`)."""
        tolerance = 10.0**-decimals + GAP_TOLERANCE / 10
        finest = min(FINEST_EXPONENT, math.ceil(-math.log2(2 * tolerance)) - 1)
        return Reading(decimals, tolerance, finest)


EXACT = Reading()
assert GAP_TOLERANCE * 2 < 2.0**-FINEST_EXPONENT  # see `position_steps`: one nearest fine multiple per gap


def reading_of(trace: TokenTrace) -> Reading:
    """Whether a trace's logprobs were rounded to a few decimals (a server's choice), and so how they are read.

    A logit's logprob is continuous (the log-sum-exp is), so a run of them that all sit on a decimal grid was
    rounded; float32 storage moves a rounded value by at most 0.02 of its last decimal at these sizes.
    """
    if trace.top_logprobs.ndim != 2 or not len(trace):
        return EXACT
    has = trace.has_top
    values = np.concatenate([trace.logprobs[has].ravel(), trace.top_logprobs[has].ravel()]).astype(np.float64)
    values = values[np.isfinite(values) & (values != 0.0)]
    if len(values) < MIN_POSITIONS:
        return EXACT
    for decimals in range(1, MAX_DECIMALS + 1):
        scaled = values * 10.0**decimals
        if np.mean(np.abs(scaled - np.rint(scaled)) <= 0.05) >= ROUNDED_SHARE:
            return Reading.rounded_to(decimals)
    return EXACT


def position_steps(top_logprobs: np.ndarray, reading: Reading = EXACT) -> np.ndarray:
    """Per position, the coarsest power-of-two step (nats) every nonzero top-k gap is a multiple of.

    0.0 where the gaps fit no grid of at least 2^-`reading.finest`; NaN where the position has no nonzero gap
    to judge (fewer than two finite entries, or all of them tied).

    A gap fits a step when it lies within the reading's tolerance of a multiple of it.  A multiple of a coarser
    step is a multiple of every finer one, and the tolerance is under half the finest step, so a gap that fits
    the finest step has one nearest fine multiple, N of them, and fits exactly the steps N is a whole number
    of: its grid is read off N's trailing zero bits, with no pass per step.  (In floating point too: scaling
    by a power of two, rounding to a whole number and the difference are exact or correctly rounded alike at
    every step, so each step's test gives what the finest step's gave.)
    """
    rows = np.asarray(top_logprobs, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] < 2 or not len(rows):
        return np.full(len(rows), np.nan)
    span = reading.finest - COARSEST_EXPONENT
    rows = np.where(np.isfinite(rows), rows, -np.inf)
    columns = list(rows.T)  # a reduction over k columns runs along n; one along each short row is slower
    gaps = np.maximum.reduce(columns)[:, None] - rows  # the top entry's own gap is 0, which no grid test counts
    usable = np.isfinite(gaps) & (gaps > reading.tolerance)
    fine = np.where(usable, gaps, 0.0) * 2.0**reading.finest  # in finest steps
    multiples = np.rint(fine)
    fits = np.abs(fine - multiples) <= reading.tolerance * 2.0**reading.finest
    multiples = np.where(fits, multiples, 0.0)  # 0 (no gap, or one off the grid) constrains no step
    places = multiples - np.floor(multiples / 2.0**span) * 2.0**span  # exact for whole numbers (fmod: 10x slower)
    coarser = np.minimum(_STEPS_UP[places.astype(np.intp)], span)
    on_grid = np.logical_and.reduce(list(fits.T))
    exponent = reading.finest - np.minimum.reduce(list(coarser.T))
    steps = np.where(on_grid, np.exp2(-exponent.astype(np.float64)), 0.0)
    return np.where(np.logical_or.reduce(list(usable.T)), steps, np.nan)


def step_at(trace: TokenTrace | None, position: int, *, judged: int | None = None) -> float:
    """The grid step at one position of a trace (see `position_steps`), read without the alternative `judged`
    (the column whose gap a divergence is judged on: a step read from that very gap would always fit it).
    NaN when it cannot be judged."""
    if trace is None or position >= len(trace) or trace.top_logprobs.ndim != 2 or not trace.has_top[position]:
        return math.nan
    row = trace.top_logprobs[position : position + 1].astype(np.float64)
    if judged is not None:
        row[0, judged] = np.nan
    return float(position_steps(row, reading_of(trace))[0])


@dataclass(frozen=True)
class LogitResolution:
    """What a run's logprobs show about the grid its logits lie on.

    `quantized` is the verdict; `step` the run's most common step, which also
    caps the step a single position is trusted with (a position's own gaps
    can share a coarser power of two by chance, and logits of another size
    elsewhere in the run must not widen its limit); `low` and `high` the
    range of steps seen; `share` the fraction of `positions` (informative
    ones) that lie on a grid.  `steps` is how many grid steps a tie may
    span.  `decimals` is set when the server rounded its logprobs (they are
    then read within `tolerance`), `unreadable` when it rounded them too
    coarsely to show any grid, and `alternatives` is the most alternatives
    seen at one position (with 2, each position's only gap is the one a
    divergence there is judged on, so the run's step stands in for it).
    """

    positions: int
    share: float
    quantized: bool
    step: float
    low: float
    high: float
    steps: float = RESOLUTION_STEPS
    decimals: int | None = None
    tolerance: float = GAP_TOLERANCE
    unreadable: bool = False
    alternatives: int = 0

    def tie_limit(self, position_step: float) -> float:
        """The largest gap (nats) that is a tie at a position with this step; 0 when the run is not on a grid."""
        if not self.quantized:
            return 0.0
        step = min(position_step, self.step) if math.isfinite(position_step) and position_step > 0 else self.step
        return self.steps * step + self.tolerance  # a gap on the grid, read back from float32 or rounded decimals

    @property
    def description(self) -> str:
        """One sentence for reports: what the logprobs showed and what follows from it."""
        rounded = f"rounded to {self.decimals} decimal{'s' if self.decimals != 1 else ''}"
        if self.unreadable:
            return (
                f"the baseline's logprobs are {rounded}, too coarse to show the grid its logits lie on, "
                "so no resolution widens the threshold"
            )
        if self.positions == 0:
            return "the baseline returned no top logprobs to judge its numeric resolution"
        seen = f"{self.share:.0%} of {self.positions:,} baseline positions"
        if self.decimals is not None:
            seen += f", logprobs {rounded} and read within {_nats(self.tolerance)} nats"
        if not self.quantized:
            return f"the baseline's logits lie on no coarse grid ({seen} do), so no resolution widens the threshold"
        if self.low != self.high:
            seen = f"{_nats(self.low)}-{_nats(self.high)} seen; {seen}"
        text = (
            f"the baseline's logits come in steps of {_nats(self.step)} nats ({seen}, typical of bf16), so a "
            f"divergence within {self.steps:g} steps of the baseline's token is a rounding tie"
        )
        if self.alternatives == 2:
            text += (
                "; with 2 alternatives a position shows only the gap a divergence there is judged on, "
                "so the run's common step is used at every divergence"
            )
        return text


def _nats(x: float) -> str:
    return f"{x:.4g}"


class ResolutionTally:
    """`logit_resolution` one trace at a time, so a comparison never holds a whole run's logprobs.

    A position's step is one of a few powers of two (or 0, off any grid), so counts per step value give the
    run's common step, exactly.
    """

    def __init__(self) -> None:
        self.judged = 0
        self.on_grid: dict[float, int] = {}
        self.readings: dict[Reading, int] = {}
        self.alternatives = 0

    def add(self, trace: TokenTrace | None) -> None:
        """Count one trace's informative positions and their grid steps."""
        if trace is None or trace.top_logprobs.ndim != 2:
            return
        rows = trace.top_logprobs[trace.has_top]
        if not len(rows):
            return
        reading = reading_of(trace)
        self.readings[reading] = self.readings.get(reading, 0) + 1
        self.alternatives = max(self.alternatives, int(np.isfinite(rows).sum(axis=1).max()))
        if not reading.readable:
            return
        found = position_steps(rows, reading)
        judged = found[np.isfinite(found)]
        self.judged += len(judged)
        values, counts = np.unique(judged[judged > 0], return_counts=True)
        for value, count in zip(values.tolist(), counts.tolist()):
            self.on_grid[value] = self.on_grid.get(value, 0) + count

    def result(self, *, steps: float = RESOLUTION_STEPS) -> LogitResolution:
        """The resolution of every trace added, as `logit_resolution` judges it."""
        reading = max(self.readings, key=lambda r: (self.readings[r], r.tolerance)) if self.readings else EXACT
        seen = LogitResolution(
            positions=self.judged,
            share=0.0,
            quantized=False,
            step=0.0,
            low=0.0,
            high=0.0,
            steps=steps,
            decimals=reading.decimals,
            tolerance=reading.tolerance,
            unreadable=not reading.readable,
            alternatives=self.alternatives,
        )
        n = sum(self.on_grid.values())
        if not n:
            return seen
        common = max(self.on_grid, key=lambda value: (self.on_grid[value], -value))  # a tie goes to the finer
        share = n / self.judged
        return replace(
            seen,
            share=share,
            quantized=self.judged >= MIN_POSITIONS and share >= GRID_SHARE,
            step=common,
            low=min(self.on_grid),
            high=max(self.on_grid),
        )


def logit_resolution(traces: Iterable[TokenTrace | None], *, steps: float = RESOLUTION_STEPS) -> LogitResolution:
    """Judge a run's logit grid from every position's top logprobs."""
    tally = ResolutionTally()
    for trace in traces:
        tally.add(trace)
    return tally.result(steps=steps)
