"""The typed reading of bodies and streams (engines/typed.py) gives exactly what the generic reading gives.

For any mutation of a well-formed answer, sent as JSON bytes whole or as server-sent events cut at any
points, the engine's reading (typed first, generic where the typed one refuses) must accept the same
Completion or refuse with the same words as the generic reading (`body.loads`, `read_events`,
`merge_chunks`).  And the token entries it holds are objects the garbage collector never walks: that
is what keeps the cost per token flat in the length of an answer.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator
from typing import Any
from unittest import mock

import numpy as np
import pytest
from fake_server import FakeState, completion_body, stream_events
from hypothesis import given, settings
from hypothesis import strategies as st
from test_response_fuzz import ENGINES, JSON_VALUES, LEGACY, _mutate, _paths

from evalsuite.engines import kept, typed, typed_stream
from evalsuite.engines.base import decoded
from evalsuite.engines.body import loads
from evalsuite.engines.columns import Columns, byte_lists_ok, legacy_columns
from evalsuite.engines.retry import RequestFailed
from evalsuite.engines.stream import Lines, merge_chunks, read_events
from evalsuite.engines.typed import (
    Alternative,
    Entry,
    EntryColumns,
    EntryTuple,
    ListColumns,
    TypedLists,
    decode_body,
)
from evalsuite.engines.typed_stream import read_stream
from evalsuite.records import Completion, GenerationParams

PARAMS = GenerationParams()


def _body(chat: bool, tokens: int = 3, k: int = 2, legacy: bool = False) -> dict[str, Any]:
    """A well-formed answer; `legacy`: the completions route's logprobs in vLLM's parallel lists."""
    request = {"messages": [{"role": "user", "content": "q"}]} if chat else {"prompt": "q"}
    state = FakeState(tokens=tokens, legacy=legacy)
    return completion_body(state, {**request, "logprobs": True if chat else k, "top_logprobs": k})


def _outcome(chat: bool, read: Any) -> Completion | str:
    """The Completion a reading gives, or the words of its refusal."""
    try:
        return read(ENGINES[chat])
    except RequestFailed as failure:
        return f"{failure.kind}: {failure}"
    except (ValueError, UnicodeDecodeError) as exc:  # what request_failure() makes "unreadable response" of
        return f"unreadable: {exc}"


def _same(typed: Completion | str, generic: Completion | str) -> None:
    if isinstance(generic, str) or isinstance(typed, str):
        assert typed == generic
        return
    fields = ("text", "reasoning", "answer", "reasoning_cut", "finish_reason", "usage", "timings", "engine_extra")
    assert {f: getattr(typed, f) for f in fields} == {f: getattr(generic, f) for f in fields}
    assert (typed.tokens is None) == (generic.tokens is None)
    if typed.tokens is not None and generic.tokens is not None:
        a, b = typed.tokens, generic.tokens
        for name in ("ids", "logprobs", "top_ids", "top_logprobs"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert (a.pieces, a.raw, a.top_pieces) == (b.pieces, b.raw, b.top_pieces)


def _read_body(raw: bytes) -> Any:
    def read(engine: Any) -> Completion:
        data, generic = decoded(raw)
        return engine.accept_read(data, generic, PARAMS, latency_s=0.0, ttft_s=None)[1]

    return read


def _generic_body(raw: bytes) -> Any:
    return lambda engine: engine.accept(loads(raw), PARAMS, latency_s=0.0, ttft_s=None)


def test_well_formed_bodies_are_read_typed_into_untracked_entries() -> None:
    for chat in (True, False):
        raw = json.dumps(_body(chat, tokens=20, k=5)).encode()
        data = decode_body(raw)
        assert data is not None
        typed = data["choices"][0]["logprobs"]["content"]
        assert isinstance(typed, EntryTuple) and len(typed) == 20
        content = typed.entries
        assert isinstance(content[0], Entry) and isinstance(content[0].top_logprobs[0], Alternative)  # type: ignore[index]
        gc.collect()  # tuples of untracked objects are untracked at their first collection
        assert not any(gc.is_tracked(x) for e in content for x in (e, e.top_logprobs, *(e.top_logprobs or ())))
        _same(_outcome(chat, _read_body(raw)), _outcome(chat, _generic_body(raw)))


@settings(max_examples=300, deadline=None)
@given(data=st.data(), shape=st.sampled_from(["chat", "completions", "legacy"]))
def test_mutated_bodies_read_typed_as_generically(data: st.DataObject, shape: str) -> None:
    chat = shape == "chat"
    body = LEGACY if shape == "legacy" else _body(chat)
    path = data.draw(st.sampled_from(_paths(body)))
    mutated = _mutate(body, path, data.draw(JSON_VALUES), data.draw(st.booleans()))
    raw = json.dumps(mutated).encode()  # NaN and infinities as Python's json writes them
    _same(_outcome(chat, _read_body(raw)), _outcome(chat, _generic_body(raw)))


def _sse(events: list[Any], crlf: bool) -> bytes:
    end = "\r\n" if crlf else "\n"
    return "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}{end}{end}" for e in events).encode()


def _pieces(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(raw), *(c % (len(raw) + 1) for c in cuts)})
    return [raw[a:b] for a, b in zip(points, points[1:])]


async def _aiter(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def _read_stream(pieces: list[bytes]) -> Any:
    def read(engine: Any) -> Completion:
        data, generic = asyncio.run(read_stream(_aiter(pieces)))
        return engine.accept_read(data, generic, PARAMS, latency_s=0.0, ttft_s=None)[1]

    return read


def _generic_stream(pieces: list[bytes]) -> Any:
    def read(engine: Any) -> Completion:
        lines = Lines()
        text = [line.rstrip(b"\r").decode("utf-8") for p in pieces for line in lines.feed(p)]
        text += [line.rstrip(b"\r").decode("utf-8") for line in lines.end()]
        chunks = asyncio.run(read_events(_aiter(text)))
        return engine.accept(merge_chunks(chunks), PARAMS, latency_s=0.0, ttft_s=None)

    return read


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    shape=st.sampled_from(["chat", "completions", "legacy"]),
    crlf=st.booleans(),
    cuts=st.lists(st.integers(0, 10**6), max_size=6),
    done=st.booleans(),
    in_memory=st.sampled_from([0, 40, kept.KEEP_IN_MEMORY]),
    fold_at=st.sampled_from([1, 3, typed_stream._FOLD_AT]),
    checked_at=st.sampled_from([1, 100, typed.TOP_BYTES_CHECKED_AT]),
)
def test_mutated_streams_read_typed_as_generically(
    data: st.DataObject,
    shape: str,
    crlf: bool,
    cuts: list[int],
    done: bool,
    in_memory: int,
    fold_at: int,
    checked_at: int,
) -> None:
    """`in_memory`: how much of the body stays in memory for a replay or a generic reading (the rest is read
    back from a file).  `fold_at`, `checked_at`: how many events are taken into the columns at a time, and how
    many bytes of alternatives' byte lists are checked at a time: a stream of many folds (a mutated value in
    one of them) and of many checks."""
    chat = shape == "chat"
    events: list[Any] = [e for e in stream_events(_body(chat, legacy=shape == "legacy")) if e != "[DONE]"]
    if data.draw(st.booleans()):
        where = data.draw(st.integers(0, len(events) - 1))
        path = data.draw(st.sampled_from(_paths(events[where])))
        events[where] = _mutate(events[where], path, data.draw(JSON_VALUES), data.draw(st.booleans()))
    if data.draw(st.booleans()):
        extra = data.draw(
            st.sampled_from(['{"error": {"message": "overloaded"}}', "not json", "[1]", '{"object": "error"}'])
        )
        events.insert(data.draw(st.integers(0, len(events))), extra)
    pieces = _pieces(_sse(events + (["[DONE]"] if done else []), crlf), cuts)
    with (
        mock.patch.object(kept, "KEEP_IN_MEMORY", in_memory),
        mock.patch.object(typed_stream, "_FOLD_AT", fold_at),
        mock.patch.object(typed, "TOP_BYTES_CHECKED_AT", checked_at),
    ):
        _same(_outcome(chat, _read_stream(pieces)), _outcome(chat, _generic_stream(pieces)))


def test_a_stream_with_an_error_event_fails_with_the_servers_words() -> None:
    events = stream_events(_body(True))
    events.insert(2, {"error": {"message": "overloaded", "code": 503}})
    with pytest.raises(RequestFailed, match="overloaded"):
        _read_stream(_pieces(_sse(events, False), [100, 200]))(ENGINES[True])


def test_streamed_entries_are_read_typed() -> None:
    for chat in (True, False):
        pieces = _pieces(_sse(stream_events(_body(chat, tokens=50, k=5)), crlf=False), [7, 500, 4000])
        data, generic = asyncio.run(read_stream(_aiter(pieces)))
        assert generic is not None and isinstance(data["choices"][0]["logprobs"]["content"], EntryColumns)
        _same(_outcome(chat, _read_stream(pieces)), _outcome(chat, _generic_stream(pieces)))


def test_streamed_legacy_lists_are_read_typed() -> None:
    """vLLM streams the completions route's lists a token an event: they are merged without the generic reader."""
    pieces = _pieces(_sse(stream_events(_body(False, tokens=50, k=5, legacy=True)), crlf=False), [7, 500, 4000])
    data, generic = asyncio.run(read_stream(_aiter(pieces)))
    lists = data["choices"][0]["logprobs"]
    assert generic is not None and isinstance(lists, ListColumns)
    assert len(lists) == len(lists.counts) == 50
    read = _outcome(False, _read_stream(pieces))
    assert isinstance(read, Completion) and read.tokens is not None and read.tokens.top_logprobs.shape == (50, 5)
    _same(read, _outcome(False, _generic_stream(pieces)))


FRAMINGS = {
    "plain": "data: {}\n\n",
    "no space": "data:{}\n\n",
    "comments": ": keep-alive\ndata: {}\n\n",
    "named events": "event: message\ndata: {}\n\n",
    "ids": "id: 7\ndata: {}\n\n",
    "extra blank lines": "data: {}\n\n\n",
    "carriage returns": "data: {}\r\n\r\n",
    "bare carriage returns": "data: {}\r\n\n",
}


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("chat", [True, False])
def test_each_framing_cut_anywhere_reads_typed_as_generically(framing: str, chat: bool) -> None:
    events = stream_events(_body(chat, tokens=3, k=2))
    raw = "".join(FRAMINGS[framing].format(e if isinstance(e, str) else json.dumps(e)) for e in events).encode()
    lines = [i + 1 for i, byte in enumerate(raw) if byte == ord("\n")]
    around = sorted({n - 1 for n in lines} | {n + 1 for n in lines if n < len(raw)})  # a piece of "\n" and a byte
    for pieces in (
        [raw],
        _pieces(raw, lines),
        _pieces(raw, lines[1::2]),
        _pieces(raw, [n - 1 for n in lines]),
        _pieces(raw, around),
    ):
        _, generic = asyncio.run(read_stream(_aiter(pieces)))
        assert generic is not None  # read typed
        _same(_outcome(chat, _read_stream(pieces)), _outcome(chat, _generic_stream(pieces)))


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("id", 2**31),  # beyond int32: typed fine, out of range
        ("id", -1),
        ("id", True),
        ("id", 2**64),
        ("logprob", 0.5),
        ("logprob", 0),  # an integer logprob: read as a number both ways
        ("logprob", True),
        ("logprob", float("nan")),
        ("logprob", 1e400),
        ("bytes", [256]),
        ("bytes", [0, 255]),
        ("bytes", [-1]),
        ("bytes", [1.0]),
        ("bytes", [1, 2, 1000]),
        ("bytes", [[1]]),
        ("bytes", "abc"),
        ("bytes", 7),
        ("bytes", [True]),
        ("bytes", []),
        ("bytes", None),
        ("token", "token_id:99999999999"),
        ("token", "token_id:7"),
        ("token", 5),
        ("top_logprobs", []),
        ("top_logprobs", None),
        ("top_logprobs", {}),
    ],
)
@pytest.mark.parametrize("alternative", [False, True])
def test_each_entry_rule_reads_alike_typed_and_generically(where: str, value: Any, alternative: bool) -> None:
    body = _body(True, tokens=4, k=3)
    entry = body["choices"][0]["logprobs"]["content"][2]
    if alternative and where != "top_logprobs":
        entry = entry["top_logprobs"][1]
    entry[where] = value
    raw = json.dumps(body).encode()
    _same(_outcome(True, _read_body(raw)), _outcome(True, _generic_body(raw)))


BYTE_LIST_ITEMS = st.one_of(
    st.integers(-300, 1300), st.integers(), st.floats(), st.booleans(), st.none(), st.text(max_size=3)
)
BYTE_LIST_VALUES = st.one_of(
    st.none(),
    st.lists(st.integers(0, 255), max_size=6),
    st.lists(BYTE_LIST_ITEMS, max_size=6),
    st.lists(st.lists(st.integers(0, 255), max_size=2), max_size=2),
    BYTE_LIST_ITEMS,
)


def _spelled(value: Any, compact: bool) -> bytes:
    return json.dumps(value, separators=(",", ":") if compact else (" , ", " : ")).encode()


@settings(max_examples=500, deadline=None)
@given(values=st.lists(BYTE_LIST_VALUES, min_size=1, max_size=8), compact=st.booleans())
def test_raw_byte_lists_are_accepted_exactly_when_each_is_a_list_of_byte_values(
    values: list[Any], compact: bool
) -> None:
    """The check of the alternatives' raw `bytes` never passes what the generic rule refuses, and passes what
    servers send (null, or a list of integers 0-255, compact or spaced)."""

    def rule(value: Any) -> bool:  # validate.py: null, or a list bytes() takes (booleans aside: refused typed)
        if value is None:
            return True
        return isinstance(value, list) and all(type(v) is int and 0 <= v <= 255 for v in value)

    joined = b"\0".join(_spelled(v, compact) for v in values)
    assert byte_lists_ok(joined) == all(map(rule, values))


@settings(max_examples=300, deadline=None)
@given(values=st.lists(BYTE_LIST_VALUES, min_size=3, max_size=3), compact=st.booleans())
def test_alternatives_bytes_read_typed_as_generically(values: list[Any], compact: bool) -> None:
    """Whatever the alternatives' `bytes` hold (null, byte values, numbers out of range, nested lists, other
    types), written compact or spaced, the typed reading accepts or refuses them as the generic one does."""
    body = _body(True, tokens=3, k=2)
    for entry, value in zip(body["choices"][0]["logprobs"]["content"], values):
        entry["top_logprobs"][1]["bytes"] = value
    raw = json.dumps(body, separators=(",", ":") if compact else (" , ", " : ")).encode()
    _same(_outcome(True, _read_body(raw)), _outcome(True, _generic_body(raw)))


def test_every_number_up_to_four_digits_is_a_byte_value_exactly_when_below_256() -> None:
    for value in range(10_000):
        for spelled in (f"[{value}]", f"[1,{value}]", f"[{value} , 7]"):
            assert byte_lists_ok(f"[65]\0{spelled}\0null".encode()) == (value <= 255), spelled


@pytest.mark.parametrize(
    "joined",
    [b"5\0[[1]]", b"[[1]]\0 5", b"[1]\0[[2]]\07", b"[1]\0[2,[3]]", b"[1]\07\0[4]", b"[1]\0true", b"[1]\0{}"],
)
def test_raw_byte_lists_that_are_not_each_one_flat_list_are_refused(joined: bytes) -> None:
    assert not byte_lists_ok(joined)


def test_no_raw_byte_lists_or_only_empty_ones_pass() -> None:
    assert byte_lists_ok(b"") and byte_lists_ok(b"null\0[]\0null") and byte_lists_ok(b"[ ]\0[]\0[1]\0[\t]")


@pytest.mark.parametrize("key", ["tokens", "token_logprobs", "top_logprobs", "text_offset"])
@pytest.mark.parametrize("value", [None, "ab", 5, {"a": -1.0}, [], [None], ["x", "y"], [{"a": "b"}], [True]])
def test_each_legacy_list_value_in_a_stream_reads_alike_typed_and_generically(key: str, value: Any) -> None:
    events = stream_events(_body(False, tokens=4, k=2, legacy=True))
    events[1]["choices"][0]["logprobs"][key] = value
    pieces = _pieces(_sse(events, crlf=False), [30, 300])
    _same(_outcome(False, _read_stream(pieces)), _outcome(False, _generic_stream(pieces)))


@pytest.mark.parametrize("key", ["tokens", "token_logprobs", "top_logprobs"])
@pytest.mark.parametrize(
    "value", [None, "ab", "token_id:5", 0, -2, True, 10**400, {"a": -1.0}, {"a": 0}, {"a": True}, {"a": None}, {}, []]
)
def test_each_legacy_list_item_in_a_body_reads_alike_typed_and_generically(key: str, value: Any) -> None:
    """The lists' value types are checked while decoding: any item of another type reads as generically."""
    body = _body(False, tokens=4, k=2, legacy=True)
    body["choices"][0]["logprobs"][key][1] = value
    raw = json.dumps(body).encode()
    _same(_outcome(False, _read_body(raw)), _outcome(False, _generic_body(raw)))


def test_well_formed_legacy_lists_are_read_typed() -> None:
    raw = json.dumps(_body(False, tokens=20, k=5, legacy=True)).encode()
    data = decode_body(raw)
    assert data is not None and isinstance(data["choices"][0]["logprobs"], TypedLists)
    read = _outcome(False, _read_body(raw))
    assert isinstance(read, Completion) and read.tokens is not None and read.tokens.top_logprobs.shape == (20, 5)
    _same(read, _outcome(False, _generic_body(raw)))


def _event_cuts(events: list[Any]) -> list[int]:
    """The byte offset where each event of `_sse(events, False)` starts."""
    sizes = [len(_sse([e], False)) for e in events]
    return [sum(sizes[:i]) for i in range(len(events) + 1)]


BLOCK_CHANGES: list[tuple[tuple[Any, ...], Any]] = [
    (("choices", 0, "index"), 1),
    (("choices", 0, "index"), True),
    (("choices", 0, "index"), "0"),
    (("object",), "error"),
    (("error",), None),
    (("error",), {"message": "overloaded"}),
    (("error",), False),
    (("usage",), {"completion_tokens": 1}),
    (("usage",), None),
    (("timings",), {"predicted_n": 1}),
    (("choices", 0, "finish_reason"), "stop"),
    (("choices", 0, "finish_reason"), 5),
    (("choices", 0, "finish_reason"), ""),
    (("choices", 0, "token_ids"), [7]),
    (("choices", 0, "token_ids"), None),
    (("choices", 0, "logprobs"), None),
    (("choices", 0, "logprobs", "tokens"), ["a"]),
    (("choices", 0, "logprobs", "content"), None),
    (("choices", 0, "logprobs", "content"), []),
    (("model",), "another-model"),
    (("model",), None),
    (("id",), "cmpl-other"),
    (("system_fingerprint",), "b2"),
    (("choices",), []),
    (("choices",), None),
    (("choices", 1), {"index": 1, "delta": {"content": "x"}, "finish_reason": "stop"}),
]
CHAT_CHANGES: list[tuple[tuple[Any, ...], Any]] = [
    (("choices", 0, "delta", "content"), None),
    (("choices", 0, "delta", "content"), ""),
    (("choices", 0, "delta", "content"), 5),
    (("choices", 0, "delta", "reasoning_content"), "thinking"),
    (("choices", 0, "delta", "reasoning_content"), None),
    (("choices", 0, "delta", "reasoning_content"), ["x"]),
    (("choices", 0, "delta", "reasoning"), "thinking"),
    (("choices", 0, "delta"), None),
    (("choices", 0, "delta"), {}),
    (("choices", 0, "delta"), {"reasoning_content": "one", "reasoning": "two"}),
    (("choices", 0, "text"), "also text"),
]
TEXT_CHANGES: list[tuple[tuple[Any, ...], Any]] = [
    (("choices", 0, "text"), None),
    (("choices", 0, "text"), 5),
    (("choices", 0, "delta"), {"content": "x"}),
]
LEGACY_CHANGES: list[tuple[tuple[Any, ...], Any]] = [
    (("choices", 0, "logprobs", "tokens"), None),
    (("choices", 0, "logprobs", "token_logprobs"), "x"),
    (("choices", 0, "logprobs", "top_logprobs"), None),
    (("choices", 0, "logprobs", "content"), []),
]
SHAPE_CHANGES = {
    "chat": BLOCK_CHANGES + CHAT_CHANGES,
    "completions": BLOCK_CHANGES + TEXT_CHANGES,
    "legacy": BLOCK_CHANGES + TEXT_CHANGES + LEGACY_CHANGES,
}


def _changed(event: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    if path[-1] == 1:  # a second choice
        return _mutate(event, path[:-1], [*event["choices"], value], False)
    return _mutate(event, path, value, False)


@pytest.mark.parametrize(
    ("shape", "path", "value"), [(s, p, v) for s, changes in SHAPE_CHANGES.items() for p, v in changes]
)
@pytest.mark.parametrize("where", ["one", "every", "alternate"])
def test_a_block_of_events_with_any_field_changed_reads_typed_as_generically(
    shape: str, path: tuple[Any, ...], value: Any, where: str
) -> None:
    """Events that come in one piece (framed in the usual way, taken without looking at each line): a change
    to one of them, to every one or to every other one reads exactly as the generic reader reads it."""
    chat = shape == "chat"
    events: list[Any] = stream_events(_body(chat, tokens=8, k=2, legacy=shape == "legacy"))
    tokens = range(1, 8)  # the middle events, all of one piece below; 0 and the finish, usage and [DONE] apart
    picked = {"one": [4], "every": list(tokens), "alternate": list(tokens)[::2]}[where]
    for i in picked:
        events[i] = _changed(events[i], path, value)
    cuts = _event_cuts(events)
    raw = _sse(events, False)
    for pieces in ([raw], _pieces(raw, [cuts[1], cuts[8]])):
        _same(_outcome(chat, _read_stream(pieces)), _outcome(chat, _generic_stream(pieces)))
        _same_merge(pieces)


def _same_merge(pieces: list[bytes]) -> None:
    """Where the typed reader took a stream, it merged exactly what the generic reader merges (a refused
    answer is named from the generic reading, so outcomes alone would not show a typed merge gone wrong)."""
    try:
        data, generic = asyncio.run(read_stream(_aiter(pieces)))
    except RequestFailed:
        return
    if generic is None:
        return

    def view(merged: dict[str, Any]) -> str:
        choice = dict(merged["choices"][0])
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, ListColumns):  # packed: its columns against those of the generic merge's lists
            choice["logprobs"] = _columns_view(logprobs.columns(2**31))
        elif isinstance(logprobs, dict) and "tokens" in logprobs:
            choice["logprobs"] = _columns_view(legacy_columns(logprobs, 2**31))
        elif "content" in (logprobs or {}):
            choice["logprobs"] = {"content": len(choice["logprobs"]["content"])}
        return json.dumps({**merged, "choices": [choice]}, sort_keys=True, default=str)

    assert view(data) == view(generic())


def _columns_view(columns: Columns | None) -> list[Any] | None:
    """Every field of some columns as plain values (arrays as lists), to compare two readings' columns."""
    if columns is None:
        return None
    fields = ("ids", "tokens", "logprobs", "raw", "counts", "top_ids", "top_tokens", "top_logprobs", "spelt")
    values = [getattr(columns, name) for name in fields] + [columns.top_spelt]
    values += [None if a is None else a.tolist() for a in columns.arrays or ()]
    return [v.tolist() if isinstance(v, np.ndarray) else v for v in values]
