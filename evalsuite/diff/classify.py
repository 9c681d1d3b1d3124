"""Tell engine numerics from real losses at each divergence.

A divergence is `numerical` when the baseline's top-1 minus top-2 margin there
was small enough that numerics can flip the argmax, or when a control run
(the baseline run twice, or the speculative server with the target as its own
drafter) diverged at the same place; `confident` when the margin was larger;
`unknown` when there are no logprobs at the divergence.

Default threshold, 0.1 nats, from the reference rig's llama.cpp recordings on
an H200 (F16 target): the perfect-drafter control diverged at margins 0.002 to
0.037 nats; fake acceptance diverged at margins from 0.34 to 14.8 nats; 1.6 %
of baseline tokens have a margin under 0.1.  Quantized or BF16 targets flip
at larger margins (a Q4_0 self-drafted control reached 2.5 nats), which is
why a control run raises the threshold to `slack` times its largest margin.
Without a control, a baseline whose logits lie on a coarse grid (bf16) makes
a margin within `RESOLUTION_STEPS` grid steps a tie as well (see
`evalsuite.diff.resolution`): the logprobs themselves are the evidence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from evalsuite.diff.align import SampleDiff
from evalsuite.diff.resolution import LogitResolution

DEFAULT_NEAR_TIE_NATS = 0.1
DEFAULT_CONTROL_SLACK = 2.0

ControlKind = Literal["repeat", "control"]
"""A control run's role in its comparison: the baseline run again, or the target drafting for itself."""


@dataclass(frozen=True)
class ControlProfile:
    """How a control run diverged from the baseline: the noise floor of the engine."""

    name: str
    kind: ControlKind
    n: int
    divergent: dict[str, SampleDiff]

    @staticmethod
    def from_diffs(name: str, kind: ControlKind, diffs: Sequence[SampleDiff]) -> ControlProfile:
        return ControlProfile(name, kind, len(diffs), {d.sample_id: d for d in diffs if not d.identical})

    @property
    def rate(self) -> float:
        return len(self.divergent) / self.n if self.n else math.nan

    @property
    def margins(self) -> np.ndarray:
        m = np.array([d.margin for d in self.divergent.values()], dtype=np.float64)
        return m[np.isfinite(m)]

    def explains(self, diff: SampleDiff) -> bool:
        """Did this control diverge on the same sample at the same position (and to the same token, when known)?"""
        ref = self.divergent.get(diff.sample_id)
        if ref is None or ref.first_divergence != diff.first_divergence or ref.level != diff.level:
            return False
        if diff.candidate_token_id is not None and ref.candidate_token_id is not None:
            return diff.candidate_token_id == ref.candidate_token_id
        return ref.candidate_next[:1] == diff.candidate_next[:1]

    def __json__(self) -> dict[str, object]:
        m = self.margins
        return {
            "name": self.name,
            "kind": self.kind,
            "n": self.n,
            "divergent": len(self.divergent),
            "rate": self.rate,
            "max_margin": float(m.max()) if len(m) else None,
            "median_margin": float(np.median(m)) if len(m) else None,
        }


@dataclass(frozen=True)
class Thresholds:
    """The margin threshold in force and where it came from.

    `effective` applies everywhere; `resolution`, when the baseline's logits
    lie on a grid, also makes a margin within a few grid steps at the
    divergence a tie (the step varies with the logits' magnitude, so that
    limit is per divergence).
    """

    near_tie: float
    slack: float
    effective: float
    source: str
    resolution: LogitResolution | None = None

    def tie_limit(self, diff: SampleDiff) -> float:
        """The largest margin at this divergence that numerics explain (the threshold itself excluded)."""
        return self.resolution.tie_limit(diff.margin_step) if self.resolution is not None else 0.0


def calibrate(
    controls: Iterable[ControlProfile],
    *,
    near_tie: float = DEFAULT_NEAR_TIE_NATS,
    slack: float = DEFAULT_CONTROL_SLACK,
    resolution: LogitResolution | None = None,
    elsewhere: Mapping[str, tuple[float, str]] | None = None,
) -> Thresholds:
    """The threshold: the near-tie default, raised to `slack` x the largest control margin when that is larger;
    with `resolution` (the baseline's logit grid), ties within a few grid steps count as numerics too.

    `elsewhere` gives, by control name, the largest margin the same control diverged at on another task
    of the same comparisons, and that task's name (`evalsuite.compare.pooled`): it counts as the
    control's own.
    """
    best: tuple[float, str, str] | None = None
    for ctl in controls:
        m = ctl.margins
        if len(m) and (best is None or m.max() > best[0]):
            best = (float(m.max()), ctl.name, "")
        seen = (elsewhere or {}).get(ctl.name)
        if seen is not None and (best is None or seen[0] > best[0]):
            best = (seen[0], ctl.name, f", on {seen[1]}")
    if best is None or slack * best[0] <= near_tie:
        eff, note = near_tie, f"near-tie default {near_tie:g} nats"
        if best is not None:
            note += f" (control '{best[1]}' diverged at margins up to {best[0]:.3g} nats{best[2]})"
    else:
        eff = slack * best[0]
        note = f"{slack:g} x the largest margin at a divergence of control '{best[1]}' ({best[0]:.3g} nats{best[2]})"
    if resolution is not None and resolution.positions:
        note += f"; {resolution.description}"
    return Thresholds(near_tie, slack, eff, note, resolution)


def classify(diff: SampleDiff, thresholds: Thresholds, controls: Sequence[ControlProfile] = ()) -> SampleDiff:
    """Return the diff with `kind` (and `explained_by`) filled in."""
    if diff.identical:
        return replace(diff, kind="identical", explained_by=None)
    for ctl in controls:
        if ctl.explains(diff):
            return replace(diff, kind="numerical", explained_by=f"control:{ctl.name}")
    if math.isnan(diff.margin):
        return replace(diff, kind="unknown", explained_by=None)
    if diff.margin < thresholds.effective:
        return replace(diff, kind="numerical", explained_by="margin")
    if diff.margin <= thresholds.tie_limit(diff):
        return replace(diff, kind="numerical", explained_by="resolution")
    return replace(diff, kind="confident", explained_by=None)


def classify_all(
    diffs: Sequence[SampleDiff], thresholds: Thresholds, controls: Sequence[ControlProfile] = ()
) -> list[SampleDiff]:
    return [classify(d, thresholds, controls) for d in diffs]
