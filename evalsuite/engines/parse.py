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
    choice.  Columns are gathered in lists and converted once: this runs for
    every token of every response.
    """
    n = len(entries)
    if k is None:
        k = max((len(e.get("top_logprobs") or ()) for e in entries), default=0)
    nan = math.nan
    ids: list[int] = []
    logprobs: list[float] = []
    top_ids: list[int] = []
    top_lp: list[float] = []
    pieces: list[str] = []
    raw: list[bytes | None] = []
    top_pieces: list[list[str]] = []
    for entry in entries:
        tid = entry.get("id")
        ids.append(tid if type(tid) is int else _token_id(entry))
        pieces.append(str(entry.get("token", "")))
        byte_list = entry.get("bytes")
        raw.append(bytes(byte_list) if isinstance(byte_list, list) else None)
        alternatives = (entry.get("top_logprobs") or ())[:k]
        lp = entry.get("logprob")
        logprobs.append(_logprob(entry) if lp is not None and (alternatives or lp != 0.0) else nan)
        names: list[str] = []
        for alt in alternatives:
            aid = alt.get("id")
            top_ids.append(aid if type(aid) is int else _token_id(alt))
            top_lp.append(_logprob(alt))
            names.append(str(alt.get("token", "")))
        pad = k - len(alternatives)
        if pad:
            top_ids.extend([-1] * pad)
            top_lp.extend([nan] * pad)
        top_pieces.append(names)
    return TokenTrace(
        ids=np.array(ids, np.int64),
        pieces=pieces,
        raw=raw,
        logprobs=np.array(logprobs, np.float32),
        top_ids=np.array(top_ids, np.int64).reshape(n, k),
        top_logprobs=np.array(top_lp, np.float32).reshape(n, k),
        top_pieces=top_pieces,
    )


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
