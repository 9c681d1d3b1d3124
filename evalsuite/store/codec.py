"""Row <-> record conversion for the run store.

Token columns are stored as raw little-endian arrays (int32 ids, float32
logprobs) rather than JSON, so loading a 1,319 x 2,000-token run is a memcpy
per sample, not millions of parsed numbers.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Literal, cast

import numpy as np
import orjson

from evalsuite.records import Completion, Grade, Sample, SampleResult, TokenTrace

Strings = Literal["all", "pieces", "none"]
"""How much token text to decode: everything, the chosen pieces only (text windows), or none (ids suffice)."""

RESULT_COLUMNS = (
    "sample_id",
    "task",
    "strata",
    "finished_at",
    "attempts",
    "text",
    "finish_reason",
    "usage",
    "timings",
    "latency_s",
    "ttft_s",
    "engine_extra",
    "n_tokens",
    "top_k",
    "ids",
    "logprobs",
    "top_ids",
    "top_logprobs",
    "pieces",
    "top_pieces",
    "raw",
    "raw_lens",
    "reasoning",
    "answer",
    "reasoning_cut",
)

ADDED_RESULT_COLUMNS = {"reasoning": "TEXT", "answer": "TEXT", "reasoning_cut": "INTEGER"}
"""Columns later than the first store schema: added to older stores when they are opened (NULL there)."""


def add_missing_columns(conn: Any) -> None:
    """Bring an older store's results table up to RESULT_COLUMNS; old rows read as 'no reasoning split'."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(results)")}
    if not present:
        return  # a new store: the schema creates every column
    for name, kind in ADDED_RESULT_COLUMNS.items():
        if name not in present:
            try:
                conn.execute(f"ALTER TABLE results ADD COLUMN {name} {kind}")
            except sqlite3.OperationalError as exc:  # another process added it in the meantime
                if "duplicate column" not in str(exc):
                    raise


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)  # built once: ~10 calls a result
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"))  # escapes what UTF-8 cannot hold (lone surrogates)


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def _dumps_strings(value: list[str] | list[list[str]]) -> str:
    """Token strings as the same JSON `_dumps` writes, ~10x faster: orjson for text UTF-8 can hold.

    A lone surrogate (half of a character split across byte-level tokens) is not UTF-8: orjson refuses
    it and SQLite could not store it, so such lists are written with \\u escapes, which read back the same.
    """
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return _ASCII_ENCODER.encode(value)


def result_to_row(result: SampleResult) -> tuple[Any, ...]:
    c = result.completion
    t = c.tokens
    base = (
        result.sample_id,
        result.task,
        _dumps(result.strata),
        result.finished_at,
        result.attempts,
        c.text,
        c.finish_reason,
        _dumps(c.usage),
        _dumps(c.timings),
        c.latency_s,
        c.ttft_s,
        _dumps(c.engine_extra),
    )
    split = (c.reasoning, c.answer, int(c.reasoning_cut))
    if t is None:
        return base + (None,) * 10 + split
    if None in t.raw:
        raw_lens = np.array([-1 if b is None else len(b) for b in t.raw], "<i4")
        raw = b"".join(b for b in t.raw if b is not None)
    else:  # every token has its bytes: both in C
        chunks = cast("list[bytes]", t.raw)
        raw_lens = np.array(list(map(len, chunks)), "<i4")
        raw = b"".join(chunks)
    return (
        base
        + (
            len(t),
            t.top_ids.shape[1],
            t.ids.astype("<i4").tobytes(),
            t.logprobs.astype("<f4", copy=False).tobytes(),  # already float32: no copy before the bytes
            t.top_ids.astype("<i4").tobytes(),
            t.top_logprobs.astype("<f4", copy=False).tobytes(),
            _dumps_strings(t.pieces),
            _dumps_strings(t.top_pieces),
            raw,
            raw_lens.tobytes(),
        )
        + split
    )


def _trace_from_row(row: dict[str, Any], strings: Strings) -> TokenTrace | None:
    n = row["n_tokens"]
    if n is None:
        return None
    k = row["top_k"]
    ids = np.frombuffer(row["ids"], "<i4").astype(np.int64)
    top_ids = np.frombuffer(row["top_ids"], "<i4").astype(np.int64).reshape(n, k)
    logprobs = np.frombuffer(row["logprobs"], "<f4").copy()
    top_lp = np.frombuffer(row["top_logprobs"], "<f4").reshape(n, k).copy()
    if strings == "none" and (ids >= 0).all():
        return TokenTrace(ids, [], [], logprobs, top_ids, top_lp, [])
    pieces = json.loads(row["pieces"])
    if strings == "pieces" and (ids >= 0).all():
        return TokenTrace(ids, pieces, [], logprobs, top_ids, top_lp, [])
    lens = np.frombuffer(row["raw_lens"], "<i4")
    blob = row["raw"] or b""
    raw: list[bytes | None] = []
    offset = 0
    for length in lens.tolist():
        if length < 0:
            raw.append(None)
        else:
            raw.append(blob[offset : offset + length])
            offset += length
    return TokenTrace(ids, pieces, raw, logprobs, top_ids, top_lp, json.loads(row["top_pieces"]))


def row_to_result(row: dict[str, Any], *, strings: Strings = "all") -> SampleResult:
    completion = Completion(
        text=row["text"],
        finish_reason=row["finish_reason"],
        tokens=_trace_from_row(row, strings),
        usage=json.loads(row["usage"]),
        timings=json.loads(row["timings"]),
        latency_s=row["latency_s"],
        ttft_s=row["ttft_s"],
        engine_extra=json.loads(row["engine_extra"]),
        reasoning=row.get("reasoning"),
        answer=row.get("answer"),
        reasoning_cut=bool(row.get("reasoning_cut")),
    )
    return SampleResult(
        sample_id=row["sample_id"],
        task=row["task"],
        strata=json.loads(row["strata"]),
        completion=completion,
        attempts=row["attempts"],
        finished_at=row["finished_at"],
    )


GRADE_COLUMNS = ("sample_id", "status", "extracted", "reason", "score", "details", "grader", "grader_version")


def grade_to_row(grade: Grade, grader: str, version: str) -> tuple[Any, ...]:
    return (
        grade.sample_id,
        grade.status,
        grade.extracted,
        grade.reason,
        grade.score,
        _dumps(grade.details),
        grader,
        version,
    )


def row_to_grade(row: dict[str, Any]) -> Grade:
    return Grade(
        sample_id=row["sample_id"],
        status=row["status"],
        extracted=row["extracted"],
        reason=row["reason"],
        score=row["score"],
        details=json.loads(row["details"]),
    )


def sample_to_row(sample: Sample) -> tuple[Any, ...]:
    return (
        sample.id,
        sample.task,
        _dumps(list(sample.messages)),
        _dumps(sample.reference),
        _dumps(sample.strata),
        _dumps(sample.metadata),
    )


def row_to_sample(row: dict[str, Any]) -> Sample:
    return Sample(
        id=row["sample_id"],
        task=row["task"],
        messages=tuple(json.loads(row["messages"])),
        reference=json.loads(row["reference"]),
        strata=json.loads(row["strata"]),
        metadata=json.loads(row["metadata"]),
    )
