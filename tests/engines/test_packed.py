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
from itertools import chain
from typing import Any

import msgspec
import numpy as np
from fake_faults import _chunks, stream_events
from fake_server import FakeState, completion_body
from hypothesis import given
from hypothesis import strategies as st

from evalsuite.engines.columns import Columns, gather
from evalsuite.engines.http11 import ChunkedBody
from evalsuite.engines.packed import PackedNumbers, PackedStrings
from evalsuite.engines.typed import Entry, EntryColumns
from evalsuite.engines.typed_stream import TypedEvents

IDS = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(2**63, 2**70), st.none())
LOGPROBS = st.one_of(st.floats(), st.none())
TOKENS = st.one_of(st.text(max_size=4), st.sampled_from(["\0", "a\0b", ""]), st.none())


def _folds(values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[list[Any]]]:
    return st.lists(st.lists(values, max_size=5), max_size=5)


@given(folds=_folds(IDS))
def test_ids_come_back_as_taken_an_array_where_every_one_packs(folds: list[list[Any]]) -> None:
    _check_numbers(np.int64, folds, lambda v: v is not None and -(2**63) <= v < 2**63)


@given(folds=_folds(LOGPROBS))
def test_logprobs_come_back_as_taken_an_array_where_every_one_packs(folds: list[list[Any]]) -> None:
    _check_numbers(np.float64, folds, lambda v: v is not None and v == v)  # NaN: maybe an absent one


def _check_numbers(dtype: type, folds: list[list[Any]], packs: Any) -> None:
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
    ours, theirs = typed.columns(ID_LIMIT), gather(entries, ID_LIMIT)
    assert (ours is None) == (theirs is None)
    if ours is not None and theirs is not None:
        assert _view(ours) == _view(theirs)
        for mine, other in zip(ours.arrays or (), theirs.arrays or ()):
            assert (mine is None) == (other is None)
            if mine is not None:
                np.testing.assert_array_equal(mine, other)


ID_LIMIT = 2**64


def _view(columns: Columns) -> list[Any]:
    fields = ("ids", "tokens", "logprobs", "raw", "counts", "top_ids", "top_tokens", "top_logprobs", "spelt")
    values = [getattr(columns, name) for name in fields] + [columns.top_spelt]
    return [v.tolist() if isinstance(v, np.ndarray) else v for v in values]


@given(folds=_folds(TOKENS))
def test_token_strings_come_back_as_taken(folds: list[list[Any]]) -> None:
    column = PackedStrings()
    for fold in folds:
        column.extend(list(fold))
    assert column.values() == list(chain.from_iterable(folds))


def test_a_stream_in_flight_holds_its_columns_packed() -> None:
    """4,096 tokens with top-5 alternatives, read and not yet finished: as lists of Python objects its columns
    held about 1,000 bytes a token."""
    tokens = 4096
    request = {"messages": [{"role": "user", "content": "q"}], "logprobs": True, "top_logprobs": 5}
    raw = b"".join(_chunks(stream_events(completion_body(FakeState(tokens=tokens), request))))
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
    assert held / tokens < 400, f"{held / tokens:.0f} bytes a token"
