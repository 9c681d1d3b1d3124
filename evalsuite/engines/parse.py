"""Parse OpenAI-style JSON responses into Completion records.

One parser serves every dialect: llama.cpp adds token `id`s and `timings`,
vLLM can render tokens as "token_id:N" and add `token_ids`, others give
strings or only text.  Whatever is missing stays missing (-1 / NaN), never
guessed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from evalsuite.records import Completion, TokenTrace

_TOKEN_ID_PREFIX = "token_id:"


def _token_id(entry: dict[str, Any]) -> int:
    if isinstance(entry.get("id"), int):
        return int(entry["id"])
    token = entry.get("token")
    if isinstance(token, str) and token.startswith(_TOKEN_ID_PREFIX):
        try:
            return int(token[len(_TOKEN_ID_PREFIX) :])
        except ValueError:
            return -1
    return -1


def _logprob(entry: dict[str, Any]) -> float:
    value = entry.get("logprob")
    if value is None:
        return math.nan
    return max(float(value), -1e30)  # -inf appears for impossible tokens; keep arrays finite


def trace_from_entries(entries: list[dict[str, Any]], k: int | None = None) -> TokenTrace:
    """Column-wise TokenTrace from `logprobs.content[]`-shaped entries.

    An entry without alternatives (an accepted draft token on a speculative
    llama-server) gets NaN alternatives so it is never read as a confident
    choice.
    """
    n = len(entries)
    if k is None:
        k = max((len(e.get("top_logprobs") or ()) for e in entries), default=0)
    ids = np.full(n, -1, np.int64)
    logprobs = np.full(n, np.nan, np.float32)
    top_ids = np.full((n, k), -1, np.int64)
    top_lp = np.full((n, k), np.nan, np.float32)
    pieces: list[str] = []
    raw: list[bytes | None] = []
    top_pieces: list[list[str]] = []
    for i, entry in enumerate(entries):
        ids[i] = _token_id(entry)
        pieces.append(str(entry.get("token", "")))
        byte_list = entry.get("bytes")
        raw.append(bytes(byte_list) if isinstance(byte_list, list) else None)
        alternatives = entry.get("top_logprobs") or []
        if alternatives:
            logprobs[i] = _logprob(entry)
        elif entry.get("logprob") not in (None, 0.0):
            logprobs[i] = _logprob(entry)
        names: list[str] = []
        for j, alt in enumerate(alternatives[:k]):
            top_ids[i, j] = _token_id(alt)
            top_lp[i, j] = _logprob(alt)
            names.append(str(alt.get("token", "")))
        top_pieces.append(names)
    return TokenTrace(ids, pieces, raw, logprobs, top_ids, top_lp, top_pieces)


def _apply_token_ids(trace: TokenTrace, token_ids: list[int] | None) -> None:
    """vLLM's `token_ids` (return_token_ids) fills ids the entries lacked."""
    if token_ids and len(token_ids) == len(trace) and not trace.has_ids:
        trace.ids = np.asarray(token_ids, np.int64)


def completion_from_chat(resp: dict[str, Any], *, latency_s: float = 0.0, ttft_s: float | None = None) -> Completion:
    """A Completion from a `/v1/chat/completions` or `/v1/completions` JSON body."""
    choices = resp.get("choices") or []
    if not choices:
        raise ValueError(f"response has no choices: keys {sorted(resp)}")
    choice = choices[0]
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else choice.get("text")
    if isinstance(message, dict) and message.get("reasoning_content"):
        text = f"{message['reasoning_content']}{text or ''}"
    logprobs = choice.get("logprobs")
    trace: TokenTrace | None = None
    if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
        trace = trace_from_entries(logprobs["content"])
    elif isinstance(logprobs, dict) and isinstance(logprobs.get("tokens"), list):
        trace = _trace_from_legacy(logprobs)
    if trace is not None:
        _apply_token_ids(trace, choice.get("token_ids"))
    timings = {k: float(v) for k, v in (resp.get("timings") or {}).items() if isinstance(v, (int, float))}
    usage = {k: int(v) for k, v in (resp.get("usage") or {}).items() if isinstance(v, int)}
    extra = {}
    meta = resp.get("meta_info")
    if isinstance(meta, dict):
        extra["meta_info"] = meta
    metrics = resp.get("metrics")
    if isinstance(metrics, dict):
        extra["metrics"] = metrics
    return Completion(
        text=text or "",
        finish_reason=choice.get("finish_reason"),
        tokens=trace,
        usage=usage,
        timings=timings,
        latency_s=latency_s,
        ttft_s=ttft_s,
        engine_extra=extra,
    )


def _trace_from_legacy(logprobs: dict[str, Any]) -> TokenTrace:
    """The completions route's legacy shape: parallel `tokens` / `token_logprobs` / `top_logprobs` lists."""
    tokens = logprobs.get("tokens") or []
    lps = logprobs.get("token_logprobs") or [None] * len(tokens)
    tops = logprobs.get("top_logprobs") or [None] * len(tokens)
    entries = []
    for token, lp, top in zip(tokens, lps, tops):
        alts = sorted(((t, v) for t, v in (top or {}).items()), key=lambda kv: -kv[1])
        entries.append(
            {"token": token, "logprob": lp, "top_logprobs": [{"token": t, "logprob": v} for t, v in alts]}
        )
    return trace_from_entries(entries)
