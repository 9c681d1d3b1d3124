"""Parse OpenAI-style JSON responses into Completion records.

One parser serves every dialect: llama.cpp adds token `id`s and `timings`,
vLLM can render tokens as "token_id:N" and add `token_ids`, others give
strings or only text.  Whatever is missing stays missing (-1 / NaN), never
guessed.  A thinking model's reasoning is split from its answer here
(`reasoning.py`), whether the server split it or left `<think>` tags inline.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evalsuite.engines.columns import Columns, gather, id_array, legacy_columns, logprob_array, ranked_alternatives
from evalsuite.engines.reasoning import split_inline, split_message
from evalsuite.records import Completion, TokenTrace

_ANY_ID = 2**63  # parsing keeps whatever ids it is given; the schema (validate.py) bounds them


def trace_from_entries(entries: list[dict[str, Any]], k: int | None = None) -> TokenTrace:
    """Column-wise TokenTrace from `logprobs.content[]`-shaped entries.

    An entry without alternatives (an accepted draft token on a speculative
    llama-server) gets NaN alternatives so it is never read as a confident
    choice.  Missing values stay missing (-1 ids, NaN logprobs).  Well-formed
    entries go through `columns.gather` (one pass per field at C speed); the
    entry-by-entry walk below is for the rest and for a fixed `k`.
    """
    if k is None:
        columns = gather(entries, _ANY_ID)
        if columns is not None:
            return columns.trace()
    return _walk(entries, k)


def _walk(entries: list[dict[str, Any]], k: int | None) -> TokenTrace:
    """trace_from_entries, one entry at a time: for any shape, and for a given k (extra alternatives dropped)."""
    n = len(entries)
    if k is None:
        k = max((len(e.get("top_logprobs") or ()) for e in entries), default=0)
    ids: list[Any] = []
    logprobs: list[Any] = []
    top_ids: list[Any] = []
    top_lp: list[Any] = []
    pieces: list[str] = []
    raw: list[bytes | None] = []
    top_pieces: list[list[str]] = []
    pad_ids, pad_lp = [-1] * k, [None] * k
    for entry in entries:
        ids.append(entry.get("id"))
        pieces.append(entry.get("token") or "")
        byte_list = entry.get("bytes")
        raw.append(bytes(byte_list) if byte_list is not None else None)
        alternatives = entry.get("top_logprobs") or ()
        if len(alternatives) > k:
            alternatives = alternatives[:k]
        lp = entry.get("logprob")
        logprobs.append(lp if alternatives or lp != 0.0 else None)
        names = []
        for alt in alternatives:
            top_ids.append(alt.get("id"))
            top_lp.append(alt.get("logprob"))
            names.append(alt.get("token") or "")
        if len(alternatives) < k:
            top_ids.extend(pad_ids[len(alternatives) :])
            top_lp.extend(pad_lp[len(alternatives) :])
        top_pieces.append(names)
    return TokenTrace(
        ids=id_array(ids, pieces),
        pieces=pieces,
        raw=raw,
        logprobs=logprob_array(logprobs),
        top_ids=id_array(top_ids, [n for row in top_pieces for n in row + [""] * (k - len(row))]).reshape(n, k),
        top_logprobs=logprob_array(top_lp).reshape(n, k),
        top_pieces=top_pieces,
    )


def _apply_token_ids(trace: TokenTrace, token_ids: list[int] | None) -> None:
    """vLLM's `token_ids` (return_token_ids) fills ids the entries lacked."""
    if token_ids and len(token_ids) == len(trace) and not trace.has_ids:
        trace.ids = np.asarray(token_ids, np.int64)


def completion_from_chat(
    resp: dict[str, Any], *, latency_s: float = 0.0, ttft_s: float | None = None, columns: Columns | None = None
) -> Completion:
    """A Completion from a `/v1/chat/completions` or `/v1/completions` JSON body.

    `columns` are the first choice's token columns when the schema check already gathered them.
    """
    choices = resp.get("choices") or []
    if not choices:
        raise ValueError(f"response has no choices: keys {sorted(resp)}")
    choice = choices[0]
    message = choice.get("message")
    if isinstance(message, dict):
        split = split_message(message.get("content"), message.get("reasoning_content") or message.get("reasoning"))
    else:
        split = split_inline(choice.get("text") or "")
    logprobs = choice.get("logprobs")
    trace: TokenTrace | None = None
    if columns is not None:
        trace = columns.trace()
    elif isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
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
        text=split.text,
        reasoning=split.reasoning,
        answer=split.answer,
        reasoning_cut=split.cut,
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
    columns = legacy_columns(logprobs, _ANY_ID)
    if columns is not None:
        return columns.trace()
    tokens = logprobs.get("tokens") or []
    lps = logprobs.get("token_logprobs") or [None] * len(tokens)
    tops = logprobs.get("top_logprobs") or [None] * len(tokens)
    entries = [
        {"token": token, "logprob": lp, "top_logprobs": [{"token": t, "logprob": v} for t, v in alts]}
        for token, lp, alts in zip(tokens, lps, ranked_alternatives(tops))
    ]
    return trace_from_entries(entries)
