"""Speculative-decoding statistics in one engine-neutral shape, read by each engine class.

Engines report drafting differently: llama.cpp per request in `timings`
(`draft_n`, `draft_n_accepted`, `predicted_n`), SGLang per request as a mean
accepted length (`meta_info.spec_accept_length`), vLLM only as Prometheus
counters read before and after a session.  Each engine class knows its own
(`Engine.request_speculation`, `Engine.counter_speculation`); the speed code
sees only the two records here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Speculation:
    """One request's drafting as its engine reported it; None / NaN where it reported nothing.

    `predicted` is the number of tokens the counts belong to (it can differ
    from the usage count); `mean_accepted_length` is set by engines that
    report only that figure.
    """

    source: str
    drafted: int | None = None
    accepted: int | None = None
    predicted: int | None = None
    mean_accepted_length: float = math.nan


@dataclass(frozen=True)
class CounterSpeculation:
    """Drafting counted by the server over a stretch of requests (counter after minus before)."""

    source: str
    drafts: float
    draft_tokens: float
    accepted: float

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.draft_tokens if self.draft_tokens > 0 else math.nan

    @property
    def mean_accepted_length(self) -> float:
        return 1.0 + self.accepted / self.drafts if self.drafts > 0 else math.nan

    def __add__(self, other: CounterSpeculation) -> CounterSpeculation:
        return CounterSpeculation(
            self.source,
            self.drafts + other.drafts,
            self.draft_tokens + other.draft_tokens,
            self.accepted + other.accepted,
        )


def number(value: object) -> float | None:
    """A finite number from an engine's JSON, else None (booleans are not counts)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value)):
        return float(value)
    return None
