"""A stream's token columns packed fold by fold (engines/packed.py) give back exactly the values taken in.

Packing must be invisible to the checks: a column whose every fold packed comes back as an array of the
same values, and one where some fold could not (an absent value, an id past int64, a string holding the
separator) as the very list of values an unpacked column held.  And it must pay: a stream in flight holds
far less than its columns as Python objects took.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable
from itertools import chain
from typing import Any

import msgspec
import numpy as np
import pytest
from fake_faults import _chunks, stream_events
from fake_server import FakeState, completion_body
from hypothesis import given
from hypothesis import strategies as st
from test_typed import _columns_view

from evalsuite.engines.columns import Columns, gather, legacy_columns
from evalsuite.engines.http11 import ChunkedBody
from evalsuite.engines.packed import PackedNumbers, PackedStrings
from evalsuite.engines.stream import LEGACY_KEYS
from evalsuite.engines.typed import Entry, EntryColumns, ListColumns, TypedLists
from evalsuite.engines.typed_stream import TypedEvents

IDS = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(2**63, 2**70), st.none())
LOGPROBS = st.one_of(st.floats(), st.none())
TOKENS = st.one_of(st.text(max_size=4), st.sampled_from(["\0", "a\0b", ""]), st.none())
ID_LIMIT = 2**64


def _folds(values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[list[Any]]]:
    return st.lists(st.lists(values, max_size=5), max_size=5)


@given(folds=_folds(IDS))
def test_ids_come_back_as_taken_an_array_where_every_one_packs(folds: list[list[Any]]) -> None:
    _check_numbers(np.int64, folds, lambda v: v is not None and -(2**63) <= v < 2**63)


@given(folds=_folds(LOGPROBS))
def test_logprobs_come_back_as_taken_an_array_where_every_one_packs(folds: list[list[Any]]) -> None:
    _check_numbers(np.float64, folds, lambda v: v is not None and v == v)  # NaN: maybe an absent one


def _check_numbers(dtype: type, folds: list[list[Any]], packs: Callable[[Any], bool]) -> None:
    column = PackedNumbers(dtype)
    for fold in folds:
        column.extend(list(fold))
    taken = list(chain.from_iterable(folds))
    values = column.values()
    if all(map(packs, taken)):
        assert isinstance(values, np.ndarray) and values.dtype == dtype
        assert values.tolist() == taken
    else:
        assert values == taken
        assert [type(v) for v in values] == [type(v) for v in taken]  # ints stay ints, floats floats


ENTRY_IDS = st.one_of(st.integers(0, 40), st.integers(2**63 - 2, 2**64 - 1), st.none())
ENTRY_LOGPROBS = st.one_of(st.floats(-30, 0), st.just(0.5), st.none())


@st.composite
def _entry(draw: st.DrawFn, alternatives: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": draw(ENTRY_IDS),
        "token": draw(TOKENS),
        "logprob": draw(ENTRY_LOGPROBS),
        "bytes": draw(st.one_of(st.none(), st.lists(st.integers(0, 255), max_size=3))),
    }
    if alternatives:
        entry["top_logprobs"] = [draw(_entry(0)) for _ in range(draw(st.integers(0, alternatives)))]
    return entry


@given(entries=st.lists(_entry(3), max_size=12), cuts=st.lists(st.integers(0, 12), max_size=4))
def test_stream_columns_check_as_the_entries_do(entries: list[dict[str, Any]], cuts: list[int]) -> None:
    """The columns of entries taken a fold at a time (cut anywhere) are the ones `columns.gather` makes of the
    same entries as dicts, or both refuse them."""
    typed = EntryColumns()
    points = sorted({0, len(entries), *(c % (len(entries) + 1) for c in cuts)})
    for a, b in zip(points, points[1:]):
        typed.add(msgspec.json.decode(json.dumps(entries[a:b]), type=tuple[Entry, ...]))
    _same_columns(typed.columns(ID_LIMIT), gather(entries, ID_LIMIT))


LIST_TOKENS = st.one_of(st.text(max_size=3), st.sampled_from(["\0", "token_id:7", "token_id:99999999999"]))
LIST_LOGPROBS = st.one_of(st.floats(-30, 0), st.sampled_from([0.5, float("-inf")]), st.none())
TOPS = st.one_of(st.none(), st.dictionaries(LIST_TOKENS, st.floats(-30, 0) | st.just(float("-inf")), max_size=3))


@st.composite
def _list_fold(draw: st.DrawFn) -> tuple[list[Any], list[Any], list[Any]]:
    """One fold's values of the three lists: mostly as many of each, now and then a list short or absent."""
    n = draw(st.integers(0, 4))
    sizes = [n if draw(st.integers(0, 5)) else draw(st.integers(0, 4)) for _ in range(3)]
    return (
        draw(st.lists(LIST_TOKENS, min_size=sizes[0], max_size=sizes[0])),
        draw(st.lists(LIST_LOGPROBS, min_size=sizes[1], max_size=sizes[1])),
        draw(st.lists(TOPS, min_size=sizes[2], max_size=sizes[2])),
    )


@given(folds=st.lists(_list_fold(), min_size=1, max_size=5))
def test_streamed_lists_check_as_their_merge_does(folds: list[tuple[list[Any], list[Any], list[Any]]]) -> None:
    """vLLM's lists taken a fold at a time give the columns `columns.legacy_columns` makes of the lists the
    generic merge extends (an empty one left out), or both refuse them: lists of unequal length, a token
    naming an id past the limit, alternatives out of order (sorted then), and so on."""
    packed = ListColumns()
    for tokens, logprobs, tops in folds:
        packed.add(list(tokens), list(logprobs), list(tops))
    merged = {key: list(chain.from_iterable(fold[i] for fold in folds)) for i, key in enumerate(LEGACY_KEYS)}
    lists = TypedLists({key: values for key, values in merged.items() if values})
    assert len(packed) == len(merged["tokens"])
    _same_columns(packed.columns(ID_LIMIT), legacy_columns(lists, ID_LIMIT, typed=True))


def _same_columns(ours: Columns | None, theirs: Columns | None) -> None:
    """Both readings refuse, or give the same value in every field (NaN, an absent logprob, equal to NaN)."""
    assert json.dumps(_columns_view(ours), default=repr) == json.dumps(_columns_view(theirs), default=repr)


@given(folds=_folds(TOKENS))
def test_token_strings_come_back_as_taken(folds: list[list[Any]]) -> None:
    column = PackedStrings()
    for fold in folds:
        column.extend(list(fold))
    assert column.values() == list(chain.from_iterable(folds))


@pytest.mark.parametrize(("legacy", "most"), [(False, 400), (True, 200)])
def test_a_stream_in_flight_holds_its_columns_packed(legacy: bool, most: int) -> None:
    """4,096 tokens with top-5 alternatives, read and not yet finished: as lists of Python objects its columns
    held about 1,000 bytes a token, and vLLM's lists (`legacy`) about 600."""
    tokens = 4096
    request: dict[str, Any] = {"prompt": "q", "logprobs": 5}
    if not legacy:
        request = {"messages": [{"role": "user", "content": "q"}], "logprobs": True, "top_logprobs": 5}
    raw = b"".join(_chunks(stream_events(completion_body(FakeState(tokens=tokens, legacy=legacy), request))))
    body = ChunkedBody()
    pieces = [b"".join(body.feed(raw[i : i + 65536])) for i in range(0, len(raw), 65536)]
    gc.collect()
    tracemalloc.start()
    try:
        events = TypedEvents(None)
        for piece in pieces:
            events.feed(piece)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert events.events == tokens + 2  # every token's event, the finish and the usage
    assert held / tokens < most, f"{held / tokens:.0f} bytes a token"
