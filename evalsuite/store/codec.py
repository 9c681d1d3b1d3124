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

from evalsuite.records import Completion, Grade, Sample, SampleResult, TokenTrace
from evalsuite.store.alternatives import pack_top_strings, unpack_top_strings
from evalsuite.store.chosen import ChosenStrings, pack_chosen
from evalsuite.store.lean import Fetch, StoredTrace
from evalsuite.store.tokens import dumps_strings as _dumps_strings
from evalsuite.store.tokens import pack_detail, pack_strings, unpack_detail, unpack_strings

Strings = Literal["all", "tokens", "pieces", "none"]
"""How much token text to decode: everything, the chosen tokens' strings and exact bytes (what tells tokens
apart without ids) but not their alternatives', the chosen pieces only (text windows), or none (ids suffice)."""

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

LAYOUT1_TOKEN_COLUMNS = ("ids", "logprobs", "top_ids", "top_logprobs", "pieces", "top_pieces", "raw", "raw_lens")
"""The results columns that hold token data in layout 1 (NULL in layout 2, where the `tokens` table holds it)."""

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


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def result_to_row(result: SampleResult) -> tuple[Any, ...]:
    """A results row of layout 1: every column, the token columns included."""
    return _base_row(result) + _token_values(result.completion.tokens) + _split(result.completion)


def result_to_rows(result: SampleResult, layout: int) -> tuple[tuple[Any, ...], tuple[Any, ...] | None]:
    """The rows of layout 2 or 3: the results row (token columns NULL but its length and k) and its `tokens`
    row."""
    t = result.completion.tokens
    shape = (None, None) if t is None else (len(t), t.top_ids.shape[1])
    row = _base_row(result) + shape + (None,) * 8 + _split(result.completion)
    if t is None:
        return row, None
    ids = t.ids.astype("<i4").tobytes()
    top_lp = t.top_logprobs.astype("<f4", copy=False).tobytes()
    detail = pack_detail(t.ids, t.logprobs, t.top_ids, t.top_logprobs)
    if layout < 3:
        return row, (result.sample_id, ids, top_lp, detail, pack_strings(t))
    return row, (result.sample_id, ids, top_lp, detail, pack_chosen(t.pieces, t.raw), pack_top_strings(t))


def _base_row(result: SampleResult) -> tuple[Any, ...]:
    c = result.completion
    return (
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


def _split(c: Completion) -> tuple[Any, ...]:
    return (c.reasoning, c.answer, int(c.reasoning_cut))


def _token_values(t: TokenTrace | None) -> tuple[Any, ...]:
    """n_tokens, top_k and layout 1's eight token columns (all None without a trace)."""
    if t is None:
        return (None,) * 10
    if None in t.raw:
        raw_lens = np.array([-1 if b is None else len(b) for b in t.raw], "<i4")
        raw = b"".join(b for b in t.raw if b is not None)
    else:  # every token has its bytes: both in C
        chunks = cast("list[bytes]", t.raw)
        raw_lens = np.array(list(map(len, chunks)), "<i4")
        raw = b"".join(chunks)
    return (
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


def _trace_from_row(
    row: dict[str, Any], strings: Strings, layout: int, fetch: Fetch | None = None
) -> TokenTrace | None:
    """A trace from a results row of layout 1, or one joined with its `tokens` row (layouts 2 and 3, whose
    columns a lean trace reads through `fetch`, as the store gives it)."""
    n = row["n_tokens"]
    if n is None:
        return None
    k = row["top_k"]
    ids = np.frombuffer(row["ids"], "<i4").astype(np.int64)
    numbers_only = strings == "none" and bool((ids >= 0).all())
    if layout >= 2:
        assert fetch is not None, "a trace of layout 2 or 3 reads its columns through the store"
        return _packed_trace(row, ids, k, strings, layout, fetch)
    top_ids = np.frombuffer(row["top_ids"], "<i4").astype(np.int64).reshape(n, k)
    logprobs = np.frombuffer(row["logprobs"], "<f4").copy()
    top_lp = np.frombuffer(row["top_logprobs"], "<f4").reshape(n, k).copy()
    if numbers_only:
        return TokenTrace(ids, [], [], logprobs, top_ids, top_lp, [])
    pieces = json.loads(row["pieces"])
    if strings == "pieces" and (ids >= 0).all():
        return TokenTrace(ids, pieces, [], logprobs, top_ids, top_lp, [])
    top_pieces = [] if strings == "tokens" else json.loads(row["top_pieces"])
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
    return TokenTrace(ids, pieces, raw, logprobs, top_ids, top_lp, top_pieces)


def _packed_trace(
    row: dict[str, Any], ids: np.ndarray, k: int, strings: Strings, layout: int, fetch: Fetch
) -> TokenTrace:
    """A trace of layout 2 or 3 (see `store.tokens`), read as far as `strings` asks: lean (`StoredTrace`) where
    it can be, its other columns unpacked when first used."""
    with_ids = bool((ids >= 0).all())
    with_raw = not (strings == "pieces" and with_ids)
    if strings == "tokens" or (strings == "none" and with_ids) or (layout >= 3 and strings == "pieces"):
        lean = StoredTrace(ids, k, fetch, layout)
        return lean if strings == "none" else lean.with_strings(raw=with_raw)
    top_lp = np.frombuffer(row["top_logprobs"], "<f4").reshape(len(ids), k).copy()
    top_ids, logprobs = unpack_detail(row["detail"], ids, top_lp)
    if layout < 3:
        pieces, raw, top_pieces = unpack_strings(row["strings"], top_ids, raw=with_raw, top=strings == "all")
        return TokenTrace(ids, pieces, raw, logprobs, top_ids, top_lp, top_pieces)
    chosen = ChosenStrings(row["strings"])
    top_pieces = unpack_top_strings(row["top_strings"], top_ids)
    return TokenTrace(ids, chosen.pieces(), chosen.raw(), logprobs, top_ids, top_lp, top_pieces)


def row_to_result(
    row: dict[str, Any], layout: int, *, strings: Strings = "all", fetch: Fetch | None = None
) -> SampleResult:
    """A stored result from its row in `layout` (see `_trace_from_row` for `fetch`)."""
    completion = Completion(
        text=row["text"],
        finish_reason=row["finish_reason"],
        tokens=_trace_from_row(row, strings, layout, fetch),
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
