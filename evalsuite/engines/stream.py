"""Fold server-sent chat chunks back into the shape of one non-streamed response."""

from __future__ import annotations

from typing import Any


def merge_chunks(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """One response dict from streamed chunks: text and logprob entries concatenated, last usage/timings kept."""
    text: list[str] = []
    reasoning: list[str] = []
    entries: list[dict[str, Any]] = []
    finish: str | None = None
    merged: dict[str, Any] = {}
    for chunk in chunks:
        for key in ("usage", "timings", "model", "id", "system_fingerprint"):
            if chunk.get(key):
                merged[key] = chunk[key]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or choice.get("text") or "")
            reasoning.append(delta.get("reasoning_content") or "")
            logprobs = choice.get("logprobs") or {}
            entries.extend(logprobs.get("content") or [])
            finish = choice.get("finish_reason") or finish
    message = {"role": "assistant", "content": "".join(text)}
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    choice_out: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
    if entries:
        choice_out["logprobs"] = {"content": entries}
    merged["choices"] = [choice_out]
    return merged
