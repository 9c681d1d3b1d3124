"""Tell engine numerics from real losses at each divergence.

A divergence is judged on the gap between the two tokens chosen there: the
baseline's logprob of its own token minus its logprob of the candidate's
(`SampleDiff.gap`).  Numerics flip an argmax only between near-tied tokens,
so a divergence is `numerical` when that gap is small enough, when the
baseline's logits lie on a coarse grid and the gap is a few grid steps (see
`evalsuite.diff.resolution`), or when a control run (the baseline run
twice, or the speculative server with the target as its own drafter)
diverged at the same place; `confident` when the gap is larger; `unknown`
when no logprobs tell the gap.  The top-1 minus top-2 margin is not the
evidence: a lossy verifier can emit a token far below the baseline's top at
a place where the top two were close.

Default threshold, 0.1 nats, from the reference rig's llama.cpp recordings on
an H200 (F16 target): the perfect-drafter control diverged at gaps 0.002 to
0.037 nats; fake acceptance diverged at gaps from 0.34 to 14.8 nats.
Quantized or BF16 targets flip at larger gaps (a Q4_0 self-drafted control
reached 2.5 nats), which is why control runs raise the threshold: to `slack`
times the largest gap at which a control flipped, and, where a control
flipped only a few times, to the gap a further numerics flip exceeds with
probability `ALPHA` (`evalsuite.stats.tails`), but never by that prediction
beyond `THIN_CEILING_NATS`: a flip further out must be shown by a control.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from evalsuite.diff.align import SampleDiff
from evalsuite.diff.resolution import LogitResolution
from evalsuite.stats.tails import exceedance_bound

DEFAULT_NEAR_TIE_NATS = 0.1
DEFAULT_CONTROL_SLACK = 2.0
ALPHA = 0.01
"""The chance a further numerics flip lands above a control's bound (`evalsuite.stats.tails`)."""
THIN_CEILING_NATS = 0.5
"""How far a prediction from few flips may raise the threshold: a baseline that prefers its token 1.65 to 1
(e^0.5) is no near-tie unless a control flipped that far itself (then `slack` x its largest flip applies)."""


def flip_bound(gaps: Sequence[float], slack: float) -> float:
    """The largest gap a control's flips make numerics: `slack` x the largest, or, with few flips, the gap a
    further flip exceeds with probability `ALPHA`, that prediction capped at `THIN_CEILING_NATS`; NaN without
    flips."""
    if not len(gaps):
        return math.nan
    predicted = min(exceedance_bound(list(gaps), ALPHA), THIN_CEILING_NATS)
    return max(slack * max(gaps), predicted)


ControlKind = Literal["repeat", "control"]
"""A control run's role in its comparison: the baseline run again, or the target drafting for itself."""


@dataclass(frozen=True)
class Evidence:
    """Where a control's engine flipped tokens on stored runs beside a comparison's own: the gaps at those
    flips, how many samples were compared, and the tasks they came from (`evalsuite.compare.evidence`)."""

    gaps: tuple[float, ...] = ()
    samples: int = 0
    tasks: tuple[str, ...] = ()

    def __json__(self) -> dict[str, object]:
        return {"flips": len(self.gaps), "samples": self.samples, "tasks": list(self.tasks)}


NO_EVIDENCE = Evidence()


@dataclass(frozen=True)
class ControlProfile:
    """How a control run diverged from the baseline: the noise floor of the engine.

    `elsewhere` holds the same engine's flips on other stored runs; `gaps` counts them with the run's own.
    """

    name: str
    kind: ControlKind
    n: int
    divergent: dict[str, SampleDiff]
    elsewhere: Evidence = NO_EVIDENCE

    @staticmethod
    def from_diffs(
        name: str, kind: ControlKind, diffs: Sequence[SampleDiff], elsewhere: Evidence = NO_EVIDENCE
    ) -> ControlProfile:
        return ControlProfile(name, kind, len(diffs), {d.sample_id: d for d in diffs if not d.identical}, elsewhere)

    @property
    def rate(self) -> float:
        return len(self.divergent) / self.n if self.n else math.nan

    @property
    def own_gaps(self) -> np.ndarray:
        """The chosen tokens' gaps at this run's own divergences (where logprobs told them)."""
        g = np.array([d.gap for d in self.divergent.values()], dtype=np.float64)
        return g[np.isfinite(g)]

    @property
    def gaps(self) -> np.ndarray:
        """Every gap at which this engine flipped: this run's and the stored runs' beside it."""
        return np.concatenate([self.own_gaps, np.array(self.elsewhere.gaps, dtype=np.float64)])

    def bound(self, slack: float) -> float:
        """The largest gap this control's flips make numerics (`flip_bound`)."""
        return flip_bound(self.gaps.tolist(), slack)

    def explains(self, diff: SampleDiff) -> bool:
        """Did this control diverge on the same sample at the same position (and to the same token, when known)?"""
        ref = self.divergent.get(diff.sample_id)
        if ref is None or ref.first_divergence != diff.first_divergence or ref.level != diff.level:
            return False
        if diff.candidate_token_id is not None and ref.candidate_token_id is not None:
            return diff.candidate_token_id == ref.candidate_token_id
        return ref.candidate_next[:1] == diff.candidate_next[:1]

    def __json__(self) -> dict[str, object]:
        own, every = self.own_gaps, self.gaps
        return {
            "name": self.name,
            "kind": self.kind,
            "n": self.n,
            "divergent": len(self.divergent),
            "rate": self.rate,
            "max_gap": float(own.max()) if len(own) else None,
            "median_gap": float(np.median(own)) if len(own) else None,
            "elsewhere": self.elsewhere,
            "flips": len(every),
            "max_gap_all": float(every.max()) if len(every) else None,
        }


@dataclass(frozen=True)
class Thresholds:
    """The gap threshold in force and where it came from.

    `effective` applies everywhere; `resolution`, when the baseline's logits
    lie on a grid, also makes a gap within a few grid steps at the
    divergence a tie (the step varies with the logits' magnitude, so that
    limit is per divergence).  `thin` is set when a control's flips were too
    few for its largest gap alone to set the threshold, and the bound their
    number allows set it instead.
    """

    near_tie: float
    slack: float
    effective: float
    source: str
    resolution: LogitResolution | None = None
    thin: bool = False
    alpha: float = ALPHA

    def tie_limit(self, diff: SampleDiff) -> float:
        """The largest gap at this divergence that numerics explain (the threshold itself excluded)."""
        return self.resolution.tie_limit(diff.grid_step) if self.resolution is not None else 0.0


def _evidence_note(ctl: ControlProfile) -> str:
    """Where a control's flips came from: this run alone, or with the stored runs of other tasks."""
    own = len(ctl.own_gaps)
    if not ctl.elsewhere.gaps and not ctl.elsewhere.samples:
        return f"{own} flip{'s' if own != 1 else ''} in {ctl.n} samples"
    tasks = ", ".join(ctl.elsewhere.tasks)
    return (
        f"{len(ctl.gaps)} flips in {ctl.n + ctl.elsewhere.samples} samples, "
        f"{len(ctl.elsewhere.gaps)} of them on stored runs of {tasks}"
    )


def calibrate(
    controls: Iterable[ControlProfile],
    *,
    near_tie: float = DEFAULT_NEAR_TIE_NATS,
    slack: float = DEFAULT_CONTROL_SLACK,
    resolution: LogitResolution | None = None,
) -> Thresholds:
    """The threshold: the near-tie default, raised to the largest control bound (`ControlProfile.bound`) when that
    is larger; with `resolution` (the baseline's logit grid), ties within a few grid steps count as numerics too.
    """
    best: tuple[float, ControlProfile] | None = None
    for ctl in controls:
        b = ctl.bound(slack)
        if math.isfinite(b) and (best is None or b > best[0]):
            best = (b, ctl)
    thin = False
    if best is None:
        eff, note = near_tie, f"near-tie default {near_tie:g} nats"
    else:
        bound, ctl = best
        largest = float(ctl.gaps.max())
        seen = f"control '{ctl.name}' flipped at gaps up to {largest:.3g} nats ({_evidence_note(ctl)})"
        if bound <= near_tie:
            eff, note = near_tie, f"near-tie default {near_tie:g} nats ({seen})"
        elif bound > slack * largest:
            eff, thin = bound, True
            flips = (
                f"the {len(ctl.gaps)} flips of control '{ctl.name}' (up to {largest:.3g} nats; {_evidence_note(ctl)})"
            )
            if bound >= THIN_CEILING_NATS:
                note = (
                    f"{bound:.3g} nats, the most a prediction from {flips} may raise it: so few flips allow no less, "
                    f"and flips further out must be shown by a control"
                )
            else:
                note = (
                    f"{bound:.3g} nats, the gap a further numerics flip exceeds with probability {ALPHA:.0%} given "
                    f"{flips}, above {slack:g} x the largest: so few flips allow no less"
                )
        else:
            eff = bound
            note = f"{slack:g} x the largest gap at which {seen}"
    if resolution is not None and (resolution.positions or resolution.unreadable):
        note += f"; {resolution.description}"
    return Thresholds(near_tie, slack, eff, note, resolution, thin)


def classify(diff: SampleDiff, thresholds: Thresholds, controls: Sequence[ControlProfile] = ()) -> SampleDiff:
    """Return the diff with `kind` (and `explained_by`) filled in."""
    if diff.identical:
        return replace(diff, kind="identical", explained_by=None)
    for ctl in controls:
        if ctl.explains(diff):
            return replace(diff, kind="numerical", explained_by=f"control:{ctl.name}")
    if math.isnan(diff.gap):
        return replace(diff, kind="unknown", explained_by=None)
    if diff.gap < thresholds.effective:
        return replace(diff, kind="numerical", explained_by="near-tie")
    if diff.gap <= thresholds.tie_limit(diff):
        return replace(diff, kind="numerical", explained_by="resolution")
    return replace(diff, kind="confident", explained_by=None)


def classify_all(
    diffs: Sequence[SampleDiff], thresholds: Thresholds, controls: Sequence[ControlProfile] = ()
) -> list[SampleDiff]:
    return [classify(d, thresholds, controls) for d in diffs]
