"""How each run of a comparison ended its outputs: how many, how many stopped at max_tokens, and where.

Counted by `compare_runs` from the results it already holds, so a report
formats these numbers instead of reading every stored result again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evalsuite.records import SampleResult


@dataclass(frozen=True)
class Truncation:
    """One run's outputs: all of them, those cut at max_tokens, and those cut inside their reasoning."""

    target: str
    n: int
    truncated: int
    in_reasoning: int


def truncation(target: str, results: Mapping[str, SampleResult]) -> Truncation:
    """Count one run's truncated outputs (a thinking model cut in its reasoning never reached an answer)."""
    done = [r.completion for r in results.values()]
    return Truncation(
        target,
        len(done),
        sum(c.truncated for c in done),
        sum(c.truncated_in_reasoning for c in done),
    )
