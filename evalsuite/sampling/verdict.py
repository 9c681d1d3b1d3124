"""Combine the node tests across nodes and prompts into one verdict, never a bare pass.

Family: every testable node (both arms reached it `min_count` times, and two
or more outcome columns survived pooling), across all prompts.  Holm's
step-down Bonferroni controls the family-wise error rate under any
dependence between the tests, which matters here: a node and its children lie
on the same paths, and under an alternative their statistics move together.

Verdicts:
- DIFFERENT: some node's Holm-adjusted p < alpha ("different (here)", with the nodes);
- SAME: no node differs and the draws had the power to see TV >= `max_tv`
  at every prompt's best-reached node ("same distribution as far as N draws
  can tell (would detect TV >= x)");
- TOO_FEW: nothing testable, or the detectable TV is above `max_tv`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from evalsuite.sampling.nodetest import Method, NodeTest, node_test, total_variation
from evalsuite.sampling.power import detectable_tv
from evalsuite.sampling.tree import PrefixTree, shared_nodes
from evalsuite.stats.significance import holm_adjust

Outcome = Literal["SAME", "DIFFERENT", "TOO_FEW"]


@dataclass(frozen=True)
class JudgeSettings:
    """How the trees are tested: level, power, when a node counts, and what 'enough draws' means."""

    alpha: float = 0.05
    power: float = 0.8
    min_count: int = 20
    min_expected: float = 5.0
    max_tv: float = 0.25
    method: Method = "pearson"

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if not 0 < self.power < 1:
            raise ValueError(f"power must be in (0, 1), got {self.power}")
        if self.min_count < 2:
            raise ValueError(f"min_count must be at least 2, got {self.min_count}")
        if not 0 < self.max_tv <= 1:
            raise ValueError(f"max_tv must be in (0, 1], got {self.max_tv}")


@dataclass(frozen=True)
class NodeResult:
    """One tested node: where it is, both arms' tables, its p-values, observed TV and detectable TV."""

    prompt_id: str
    prefix: tuple[int, ...]
    test: NodeTest
    p_adjusted: float
    tv: float
    detectable_tv: float
    over_represented: int  # the outcome the candidate chose most in excess of the baseline

    @property
    def depth(self) -> int:
        return len(self.prefix)


@dataclass
class SamplingVerdict:
    """The outcome, the sentence that says it, and the nodes behind it."""

    outcome: Outcome
    sentence: str
    draws: int  # draws per arm per prompt (the smaller arm)
    prompts: int
    detectable: float  # TV detectable with `power` at every prompt's best-reached node
    family: int  # tested nodes (the Holm family)
    nodes: list[NodeResult] = field(default_factory=list)
    settings: JudgeSettings = field(default_factory=JudgeSettings)
    notes: list[str] = field(default_factory=list)

    @property
    def differing(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.p_adjusted < self.settings.alpha]

    def __json__(self) -> dict[str, Any]:
        """The verdict and every node as plain data (the serializer turns undefined numbers into null)."""

        def node(n: NodeResult) -> dict[str, Any]:
            t = n.test
            return {
                "prompt_id": n.prompt_id,
                "prefix": list(n.prefix),
                "outcomes": list(t.outcomes),
                "baseline": list(t.a),
                "candidate": list(t.b),
                "statistic": t.statistic,
                "df": t.df,
                "p": t.p,
                "p_adjusted": n.p_adjusted,
                "tv": n.tv,
                "detectable_tv": n.detectable_tv,
                "over_represented": n.over_represented,
                "method": t.method,
            }

        return {
            "outcome": self.outcome,
            "sentence": self.sentence,
            "draws": self.draws,
            "prompts": self.prompts,
            "detectable_tv": self.detectable,
            "family": self.family,
            "settings": self.settings,
            "correction": "holm (step-down Bonferroni)",
            "notes": self.notes,
            "nodes": [node(n) for n in self.nodes],
        }


def _over_represented(a: Counter[int], b: Counter[int]) -> int:
    """The outcome whose share grew most from baseline to candidate, from the unpooled counts.

    Unpooled, so a drafter that spreads its excess over many rare tokens still names one of them.
    """
    n_a, n_b = max(sum(a.values()), 1), max(sum(b.values()), 1)
    excess = [(b[t] / n_b - a[t] / n_a, -t) for t in set(a) | set(b)]
    return -max(excess)[1] if excess else -1


def judge(baseline: PrefixTree, candidate: PrefixTree, settings: JudgeSettings = JudgeSettings()) -> SamplingVerdict:
    """Test every shared node, adjust with Holm, and state the verdict with its power."""
    keys = shared_nodes(baseline, candidate, settings.min_count)
    tests = [
        node_test(baseline.counts[k], candidate.counts[k], method=settings.method, min_expected=settings.min_expected)
        for k in keys
    ]
    tested = [(k, t) for k, t in zip(keys, tests) if t.testable]
    family = len(tested)
    adjusted = holm_adjust([t.p for _, t in tested])
    level = settings.alpha / max(family, 1)  # Holm's first step: power here is a lower bound for Holm's
    nodes = [
        NodeResult(
            k[0],
            k[1],
            t,
            adj,
            total_variation(baseline.counts[k], candidate.counts[k]),
            detectable_tv(t.n_a, t.n_b, df=t.df, level=level, power=settings.power),
            _over_represented(baseline.counts[k], candidate.counts[k]),
        )
        for (k, t), adj in zip(tested, adjusted)
    ]
    prompts = sorted(set(baseline.draws) | set(candidate.draws))
    draws = min([min(baseline.draws[p], candidate.draws[p]) for p in prompts] or [0])
    best: dict[str, float] = {}
    for n in nodes:
        best[n.prompt_id] = min(best.get(n.prompt_id, math.inf), n.detectable_tv)
    notes = []
    untested = [p for p in prompts if p not in best]
    if untested:
        notes.append(
            f"{len(untested)} of {len(prompts)} prompts had no node both arms reached "
            f"{settings.min_count} times with two or more outcomes: {', '.join(untested[:5])}"
            + (" ..." if len(untested) > 5 else "")
        )
    detectable = max(best.values()) if best else math.inf
    verdict = SamplingVerdict("TOO_FEW", "", draws, len(prompts), detectable, family, nodes, settings, notes)
    differing = verdict.differing
    if differing:
        verdict.outcome = "DIFFERENT"
        worst = min(differing, key=lambda n: n.p_adjusted)
        verdict.sentence = (
            f"DIFFERENT (here): {len(differing)} of {family} nodes differ after Holm's correction at "
            f"{settings.alpha:g}; the strongest at prompt {worst.prompt_id}, depth {worst.depth} "
            f"(observed TV {worst.tv:.2f}, adjusted p {worst.p_adjusted:.2g}), {draws} draws per arm"
        )
    elif not nodes:
        verdict.sentence = (
            f"TOO FEW DRAWS: no node was reached {settings.min_count} times by both arms with two or "
            f"more outcomes ({draws} draws per arm per prompt); draw more"
        )
    elif detectable > settings.max_tv:
        verdict.sentence = (
            f"TOO FEW DRAWS: no node differs, but {draws} draws per arm would only detect TV >= "
            f"{detectable:.2f} (asked for <= {settings.max_tv:g}); draw more"
        )
    else:
        verdict.outcome = "SAME"
        verdict.sentence = (
            f"SAME DISTRIBUTION as far as {draws} draws per arm can tell (would detect TV >= "
            f"{detectable:.2f} at every prompt's first tested node, {settings.power:.0%} power); "
            f"0 of {family} nodes differ after Holm's correction at {settings.alpha:g}"
        )
    return verdict
