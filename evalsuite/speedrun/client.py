"""One streamed request, timed on the client: TTFT, every token's arrival, and the engine's own timings.

The speed run measures what a user of the endpoint sees, the way aiperf does:
time to first token is from sending the request to the first chunk that
carries output, inter-token latency is (last token - first token) / (n - 1)
with n the server's completion token count, and the gaps between chunks are
kept so their spread (speculative decoding delivers tokens in bursts) can be
shown.  The engine's `timings` (llama.cpp) come back in the last chunk and
are kept beside the client's clock, so the two can be checked against each
other.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx


@dataclass
class Measurement:
    """One request of the speed run; times in seconds from sending it."""

    arm: str
    workload: str
    concurrency: int
    rep: int
    slot: int
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft_s: float = math.nan
    latency_s: float = math.nan
    last_token_s: float = math.nan
    chunks: int = 0
    gaps_s: list[float] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    finish_reason: str | None = None
    started_at: float = 0.0
    error: str | None = None
    counters: dict[str, float] = field(default_factory=dict)
    """Engine counter deltas over this request's step (vLLM speculative counters), on the step's first request."""
    text: str = ""
    """The answer (without reasoning), kept for session turns: the next turn's history, and identity per turn."""

    @property
    def key(self) -> tuple[str, int, int, int]:
        """What pairs a baseline request with a candidate one: same workload, concurrency, repetition and slot."""
        return (self.workload, self.concurrency, self.rep, self.slot)

    @property
    def itl_s(self) -> float:
        """Mean inter-token latency: (last - first token) / (n - 1), aiperf's definition."""
        if self.output_tokens < 2 or not math.isfinite(self.last_token_s - self.ttft_s):
            return math.nan
        return (self.last_token_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def tokens_per_s(self) -> float:
        """Decode tokens/s seen by the client: (n - 1) / (last - first token) = 1 / ITL."""
        itl = self.itl_s
        return 1.0 / itl if itl > 0 else math.nan

    @property
    def engine_tokens_per_s(self) -> float:
        """The same quantity from llama.cpp's clock: (predicted_n - 1) / predicted_ms."""
        n, ms = self.timings.get("predicted_n"), self.timings.get("predicted_ms")
        if n is None or ms is None or n < 2 or ms <= 0:
            return math.nan
        return (n - 1) / (ms / 1000.0)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Measurement:
        return Measurement(**data)


def _content(chunk: dict[str, Any]) -> tuple[str, str]:
    """(answer text, reasoning text) a streamed chunk carries."""
    answer, reasoning = [], []
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        answer.append(str(delta.get("content") or "") + str(choice.get("text") or ""))
        reasoning.append(str(delta.get("reasoning_content") or delta.get("reasoning") or ""))
    return "".join(answer), "".join(reasoning)


def _finish(chunk: dict[str, Any]) -> str | None:
    for choice in chunk.get("choices") or []:
        if choice.get("finish_reason"):
            return str(choice["finish_reason"])
    return None


async def measure(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], m: Measurement, *, keep_text: bool = False
) -> Measurement:
    """Send one streamed chat request and fill `m` in (with the answer's text when `keep_text`); a failure is
    recorded in `m.error`, not raised."""
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    m.started_at = time.time()
    start = time.perf_counter()
    arrivals: list[float] = []
    answer: list[str] = []
    counted = 0
    try:
        async with client.stream("POST", url, json=body) as resp:
            if resp.status_code >= 300:
                await resp.aread()
                m.error = f"HTTP {resp.status_code}: {resp.text[:300]}"
                return m
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                now = time.perf_counter() - start
                chunk = json.loads(payload)
                text, reasoning = _content(chunk)
                if text or reasoning:
                    arrivals.append(now)
                    answer.append(text)
                    counted += 1
                m.finish_reason = _finish(chunk) or m.finish_reason
                usage = chunk.get("usage") or {}
                if isinstance(usage.get("completion_tokens"), int):
                    m.output_tokens = int(usage["completion_tokens"])
                if isinstance(usage.get("prompt_tokens"), int):
                    m.prompt_tokens = int(usage["prompt_tokens"])
                timings = chunk.get("timings")
                if isinstance(timings, dict):
                    m.timings = {k: float(v) for k, v in timings.items() if isinstance(v, (int, float))}
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        m.error = f"{type(exc).__name__}: {exc}"
        return m
    m.latency_s = time.perf_counter() - start
    if not m.output_tokens:
        m.output_tokens = int(m.timings.get("predicted_n", counted))
    if not m.prompt_tokens and "prompt_n" in m.timings:
        m.prompt_tokens = int(m.timings["prompt_n"] + m.timings.get("cache_n", 0))
    m.chunks = counted
    if keep_text:
        m.text = "".join(answer)
    if arrivals:
        m.ttft_s, m.last_token_s = arrivals[0], arrivals[-1]
        m.gaps_s = [b - a for a, b in zip(arrivals, arrivals[1:])]
    else:
        m.error = "the stream carried no output"
    return m
