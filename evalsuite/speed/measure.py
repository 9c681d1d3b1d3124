"""Speed of one request, read from what the engine reported.

One definition of decode tokens/s everywhere (TOKENS_PER_S_DEFINITION): the
tokens after the first over the time from the first token to the last.  The
first token comes out of the prompt pass and is already counted in the time
to first token, so the decode interval spans n - 1 tokens; counting n over it
overstates speed by 1/(n - 1) (0.39 % at 256 tokens, 10 % at 11).  This is
llama.cpp's own `predicted_per_second` and the reciprocal of the mean
inter-token latency as aiperf defines it, so the figures can be checked
against both.  The interval is the engine's own when it reports one
(llama.cpp `timings.predicted_ms`), else the streamed latency minus the time
to first token; without either only the whole-request rate (tokens over
latency, prompt included) is left, and the source says so.  Draft counts
are read by the engine class that knows its own report
(`Engine.request_speculation`: llama.cpp `timings`, SGLang's mean accepted length).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from evalsuite.engines import request_speculation
from evalsuite.records import Completion

DecodeSource = Literal["engine", "latency-ttft", "latency", "none"]

TOKENS_PER_S_DEFINITION = (
    "decode tokens/s = (output tokens - 1) / (time of the last token - time of the first token): the first token "
    "comes from the prompt pass and is counted in the time to first token. This equals llama.cpp's "
    "predicted_per_second and 1 / mean inter-token latency (aiperf's per-user output token throughput)."
)

DECODE_SOURCE_TEXT: dict[str, str] = {
    "engine": "engine decode time (llama.cpp predicted_ms)",
    "latency-ttft": "wall-clock latency minus time to first token",
    "latency": "whole-request rate: tokens over wall-clock latency (prompt included; no first-token time)",
    "none": "no timing",
}


@dataclass(frozen=True)
class RequestSpeed:
    """Timing of one completion; NaN where the engine gave nothing to measure."""

    sample_id: str
    tokens: int
    decode_s: float
    source: DecodeSource
    ttft_s: float
    latency_s: float
    predicted_n: int | None = None
    draft_n: int | None = None
    draft_accepted: int | None = None
    accept_length: float = math.nan

    @property
    def tokens_per_s(self) -> float:
        """Decode rate by TOKENS_PER_S_DEFINITION; the whole-request rate when only latency is known."""
        if not (self.decode_s > 0) or self.tokens <= 0:
            return math.nan
        if self.source == "latency":
            return self.tokens / self.decode_s
        return (self.tokens - 1) / self.decode_s if self.tokens > 1 else math.nan

    @property
    def decode_tokens(self) -> int:
        """Tokens the decode interval covers (n - 1; n for the whole-request rate)."""
        if self.source == "latency":
            return self.tokens
        return max(self.tokens - 1, 0)


def _float(value: object) -> float | None:
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return float(value)
    return None


def request_speed(sample_id: str, completion: Completion) -> RequestSpeed:
    """Measure one completion (see the module docstring for the order of sources)."""
    t = completion.timings
    predicted_n = _float(t.get("predicted_n"))
    tokens = completion.completion_tokens
    if predicted_n is not None and predicted_n > 0:
        tokens = int(predicted_n)  # the count predicted_ms was measured over
    if tokens is None:
        tokens = 0
    latency = completion.latency_s if completion.latency_s and completion.latency_s > 0 else math.nan
    ttft = completion.ttft_s if completion.ttft_s is not None and completion.ttft_s >= 0 else math.nan
    predicted_ms = _float(t.get("predicted_ms"))
    if predicted_ms is not None and predicted_ms > 0:
        decode, source = predicted_ms / 1000.0, "engine"
    elif math.isfinite(latency) and math.isfinite(ttft) and latency > ttft:
        decode, source = latency - ttft, "latency-ttft"
    elif math.isfinite(latency):
        decode, source = latency, "latency"
    else:
        decode, source = math.nan, "none"
    spec = request_speculation(completion)
    return RequestSpeed(
        sample_id=sample_id,
        tokens=int(tokens),
        decode_s=decode,
        source=source,  # type: ignore[arg-type]
        ttft_s=ttft,
        latency_s=latency,
        predicted_n=int(predicted_n) if predicted_n is not None else None,
        draft_n=spec.drafted if spec is not None else None,
        draft_accepted=spec.accepted if spec is not None else None,
        accept_length=spec.mean_accepted_length if spec is not None else math.nan,
    )
