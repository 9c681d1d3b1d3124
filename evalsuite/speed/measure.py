"""Speed of one request, read from what the engine reported.

Decode speed is completion tokens over decode time.  The decode time is the
engine's own when it reports one (llama.cpp `timings.predicted_ms`), else the
wall-clock latency minus the time to first token, else the whole latency; the
source is kept so a report can say which measure it shows.  Draft counts come
from llama.cpp `timings` (`draft_n`, `draft_n_accepted`) or SGLang's
`meta_info.spec_accept_length`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from evalsuite.records import Completion

DecodeSource = Literal["engine", "latency-ttft", "latency", "none"]

DECODE_SOURCE_TEXT: dict[str, str] = {
    "engine": "engine decode time (llama.cpp predicted_ms)",
    "latency-ttft": "wall-clock latency minus time to first token",
    "latency": "wall-clock latency (includes prompt processing)",
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
        return self.tokens / self.decode_s if self.decode_s > 0 and self.tokens > 0 else math.nan


def _float(value: object) -> float | None:
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return float(value)
    return None


def request_speed(sample_id: str, completion: Completion) -> RequestSpeed:
    """Measure one completion (see the module docstring for the order of sources)."""
    t = completion.timings
    predicted_n = _float(t.get("predicted_n"))
    tokens = completion.completion_tokens
    if tokens is None:
        tokens = int(predicted_n) if predicted_n is not None else 0
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
    draft_n, accepted = _float(t.get("draft_n")), _float(t.get("draft_n_accepted"))
    meta = completion.engine_extra.get("meta_info") if isinstance(completion.engine_extra, dict) else None
    accept_len = _float(meta.get("spec_accept_length")) if isinstance(meta, dict) else None
    return RequestSpeed(
        sample_id=sample_id,
        tokens=int(tokens),
        decode_s=decode,
        source=source,  # type: ignore[arg-type]
        ttft_s=ttft,
        latency_s=latency,
        predicted_n=int(predicted_n) if predicted_n is not None else None,
        draft_n=int(draft_n) if draft_n is not None else None,
        draft_accepted=int(accepted) if accepted is not None else None,
        accept_length=accept_len if accept_len is not None else math.nan,
    )
