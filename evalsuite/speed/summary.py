"""Per-run speed: decode tokens/s, time to first token, draft acceptance and mean accepted length.

Requests whose decode rate is an outlier by the MAD rule (`speed.robust`)
are listed in `outliers` and left out of the median, mean and aggregate;
`aggregate_all_tokens_per_s` keeps them, and a median and all-request
aggregate further apart than SPREAD_LIMIT raise a warning, because then no
single throughput figure describes the run.

Three sources of speculative statistics, whichever the engine gave:
llama.cpp per-request `draft_n` / `draft_n_accepted` (acceptance rate =
accepted / drafted summed over requests; mean accepted length tau =
predicted / (predicted - accepted), i.e. tokens per target forward pass),
SGLang's per-request `spec_accept_length` (averaged), and vLLM's Prometheus
counters read before and after each session of the run (acceptance = accepted
/ draft tokens; mean accepted length = 1 + accepted / drafts).  The accepted
and drafted token counts come from the same source as the rate, so a report
shows them for counter-based engines as it does for llama.cpp.

Time to first token is whatever the requests carry: a streamed request's
first chunk, or llama.cpp's prompt time without streaming.  `engine` names
the run's engine so a report can say why a run has none (a non-streamed
vLLM or SGLang response carries no timing).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalsuite.engines import counter_speculation
from evalsuite.engines.speculation import CounterSpeculation
from evalsuite.speed.measure import DECODE_SOURCE_TEXT, RequestSpeed, request_speed
from evalsuite.speed.robust import disagreement, mad_outliers
from evalsuite.store.manifest import RunManifest
from evalsuite.store.reader import RunReader

SPREAD_LIMIT = 1.25
"""Median and aggregate tokens/s of one arm further apart than this factor are too spread to trust an aggregate."""


SpeedSource = RunReader  # the one reader protocol: a stored run or one held in memory


@dataclass(frozen=True)
class SpeedSummary:
    """Speed of one run, aggregated over its requests."""

    target: str
    n: int
    timed: int
    decode_source: str
    median_tokens_per_s: float
    mean_tokens_per_s: float
    aggregate_tokens_per_s: float
    median_ttft_s: float
    median_latency_s: float
    total_tokens: int
    draft_n: int
    draft_accepted: int
    predicted_n: int
    mean_accept_length_reported: float
    counters: CounterSpeculation | None
    requests: dict[str, RequestSpeed] = field(repr=False, default_factory=dict)
    aggregate_all_tokens_per_s: float = math.nan
    outliers: tuple[str, ...] = ()
    engine: str | None = None

    @property
    def warnings(self) -> list[str]:
        """Sentences a report must show: outliers set aside, and a median and aggregate that disagree."""
        out: list[str] = []
        if self.outliers:
            shown = ", ".join(f"{sid} ({self.requests[sid].tokens_per_s:.1f} tokens/s)" for sid in self.outliers[:5])
            more = f" and {len(self.outliers) - 5} more" if len(self.outliers) > 5 else ""
            out.append(
                f"{self.target}: {len(self.outliers)} of {self.timed} timed requests are outliers by the MAD rule "
                f"(median {self.median_tokens_per_s:.1f} tokens/s): {shown}{more}; they are listed, not averaged in."
            )
        gap = disagreement(self.median_tokens_per_s, self.aggregate_all_tokens_per_s)
        if math.isfinite(gap) and gap > SPREAD_LIMIT:
            out.append(
                f"{self.target}: median {self.median_tokens_per_s:.1f} tokens/s but aggregate "
                f"{self.aggregate_all_tokens_per_s:.1f} tokens/s over all requests ({gap:.1f}x apart): the requests "
                f"are too spread to trust an aggregate; re-run speed on an idle machine (`evalsuite speed`)."
            )
        return out

    @property
    def acceptance_rate(self) -> float:
        """Accepted over drafted tokens: per-request engine counts, else vLLM counters."""
        if self.draft_n > 0:
            return self.draft_accepted / self.draft_n
        return self.counters.acceptance_rate if self.counters is not None else math.nan

    @property
    def mean_accepted_length(self) -> float:
        """Tokens emitted per target forward pass (tau); NaN when the engine reports no drafting."""
        if self.draft_n > 0 and self.predicted_n > self.draft_accepted:
            return self.predicted_n / (self.predicted_n - self.draft_accepted)
        if math.isfinite(self.mean_accept_length_reported):
            return self.mean_accept_length_reported
        return self.counters.mean_accepted_length if self.counters is not None else math.nan

    @property
    def accepted_tokens(self) -> int | None:
        """Draft tokens the target accepted: per-request engine counts, else vLLM counters; None when neither."""
        if self.draft_n > 0:
            return self.draft_accepted
        counted = self._counted
        return round(counted.accepted) if counted is not None else None

    @property
    def drafted_tokens(self) -> int | None:
        """Draft tokens proposed, from the same source as `accepted_tokens`; None when the engine counted none."""
        if self.draft_n > 0:
            return self.draft_n
        counted = self._counted
        return round(counted.draft_tokens) if counted is not None else None

    @property
    def _counted(self) -> CounterSpeculation | None:
        """The server's counters when they saw any drafting over the run's sessions, else None."""
        return drafting_seen(self.counters)

    @property
    def acceptance_source(self) -> str:
        if self.draft_n > 0:
            return "llama.cpp timings (draft_n, draft_n_accepted)"
        if math.isfinite(self.mean_accept_length_reported):
            return "SGLang meta_info.spec_accept_length"
        if self._counted is not None:
            return "vLLM /metrics spec_decode counters (deltas over the run's sessions)"
        return "not reported by the engine"

    def __json__(self) -> dict[str, Any]:
        """The run's figures, derived ones included; per-request speeds and raw counters stay out."""
        return {
            "target": self.target,
            "engine": self.engine,
            "n": self.n,
            "timed": self.timed,
            "decode_source": self.decode_source,
            "median_tokens_per_s": self.median_tokens_per_s,
            "mean_tokens_per_s": self.mean_tokens_per_s,
            "aggregate_tokens_per_s": self.aggregate_tokens_per_s,
            "aggregate_all_tokens_per_s": self.aggregate_all_tokens_per_s,
            "outliers": list(self.outliers),
            "warnings": self.warnings,
            "median_ttft_s": self.median_ttft_s,
            "median_latency_s": self.median_latency_s,
            "total_tokens": self.total_tokens,
            "draft_n": self.draft_n,
            "draft_accepted": self.draft_accepted,
            "accepted_tokens": self.accepted_tokens,
            "drafted_tokens": self.drafted_tokens,
            "acceptance_rate": self.acceptance_rate,
            "mean_accepted_length": self.mean_accepted_length,
            "acceptance_source": self.acceptance_source,
        }


def _median(values: list[float]) -> float:
    arr = np.array([v for v in values if math.isfinite(v)], dtype=np.float64)
    return float(np.median(arr)) if len(arr) else math.nan


def counter_deltas(sessions: list[dict[str, Any]]) -> CounterSpeculation | None:
    """Sum the engine's counted drafting (after minus before, read by its engine class) over the sessions."""
    found: CounterSpeculation | None = None
    for session in sessions:
        info = session.get("info") or {}
        before, after = info.get("engine_stats_before") or {}, info.get("engine_stats_after") or {}
        one = counter_speculation(before, after)
        if one is not None:
            found = one if found is None else found + one
    return found


def drafting_seen(counters: CounterSpeculation | None) -> CounterSpeculation | None:
    """The counters when they saw any drafting, else None (a server that does not speculate counts none)."""
    return counters if counters is not None and counters.draft_tokens > 0 else None


def run_engine(manifest: RunManifest) -> str | None:
    """The engine a run was made with, as its manifest records it (the target's `engine`, else the probe's)."""
    name = manifest.fields.engine.dialect or manifest.probe.dialect
    return name if isinstance(name, str) and name else None


def summarize(
    target: str, requests: dict[str, RequestSpeed], sessions: list[dict[str, Any]], engine: str | None = None
) -> SpeedSummary:
    """Aggregate per-request speeds (and session counters) into a SpeedSummary; `engine` names the run's engine."""
    reqs = list(requests.values())
    timed_all = [r for r in reqs if math.isfinite(r.tokens_per_s)]
    flagged = mad_outliers([r.tokens_per_s for r in timed_all])
    outliers = tuple(r.sample_id for r, bad in zip(timed_all, flagged) if bad)
    timed = [r for r, bad in zip(timed_all, flagged) if not bad]
    sources = Counter(r.source for r in timed)
    source = DECODE_SOURCE_TEXT[sources.most_common(1)[0][0]] if sources else DECODE_SOURCE_TEXT["none"]
    if len(sources) > 1:
        source += " (mixed: " + ", ".join(f"{k} {v}" for k, v in sources.most_common()) + ")"
    decode_total = sum(r.decode_s for r in timed)
    decode_all = sum(r.decode_s for r in timed_all)
    drafted = [r for r in reqs if r.draft_n is not None and r.draft_accepted is not None]
    lengths = [r.accept_length for r in reqs if math.isfinite(r.accept_length)]
    return SpeedSummary(
        target=target,
        n=len(reqs),
        timed=len(timed_all),
        decode_source=source,
        median_tokens_per_s=_median([r.tokens_per_s for r in timed]),
        mean_tokens_per_s=float(np.mean([r.tokens_per_s for r in timed])) if timed else math.nan,
        aggregate_tokens_per_s=sum(r.decode_tokens for r in timed) / decode_total if decode_total > 0 else math.nan,
        median_ttft_s=_median([r.ttft_s for r in reqs]),
        median_latency_s=_median([r.latency_s for r in reqs]),
        total_tokens=sum(r.tokens for r in reqs),
        draft_n=sum(r.draft_n or 0 for r in drafted),
        draft_accepted=sum(r.draft_accepted or 0 for r in drafted),
        predicted_n=sum((r.predicted_n if r.predicted_n is not None else r.tokens) for r in drafted),
        mean_accept_length_reported=float(np.mean(lengths)) if lengths else math.nan,
        counters=counter_deltas(sessions),
        requests=requests,
        aggregate_all_tokens_per_s=sum(r.decode_tokens for r in timed_all) / decode_all if decode_all > 0 else math.nan,
        outliers=outliers,
        engine=engine,
    )


def speed_summary(store: RunReader) -> SpeedSummary:
    """Speed of one run (decode tokens/s per request, TTFT, draft acceptance, engine counters)."""
    results = store.results(strings="none")
    requests = {sid: request_speed(sid, r.completion) for sid, r in results.items()}
    return summarize(store.manifest.target, requests, store.sessions(), run_engine(store.manifest))
