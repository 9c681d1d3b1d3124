"""The one-pass column gathering agrees with the entry-by-entry rules it replaces on the hot path.

`columns.gather` may only accept what the schema's named walk (`ResponseSchema._entry`) accepts, and
what it accepts must parse to the same TokenTrace and spell the same text as the walk over the entries.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest
from fake_server import FakeState, completion_body
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_response_fuzz import JSON_VALUES, _mutate, _paths

from evalsuite.engines.agree import token_text
from evalsuite.engines.columns import LOGPROB_SLACK, _ids_ok, _logprobs_ok, _numbers, gather
from evalsuite.engines.parse import _walk, trace_from_entries
from evalsuite.engines.retry import RequestFailed
from evalsuite.engines.validate import MAX_TOKEN_ID, ResponseSchema
from evalsuite.records import TokenTrace
from evalsuite.store.tokens import pack_strings, unpack_strings

LIMIT = 2048


def _entries(tokens: int = 4, k: int = 3) -> list[dict[str, Any]]:
    body = completion_body(
        FakeState(tokens=tokens), {"messages": [{"role": "user", "content": "q"}], "logprobs": True, "top_logprobs": k}
    )
    return body["choices"][0]["logprobs"]["content"]


def _walk_accepts(entries: list[Any], limit: int) -> bool:
    schema = ResponseSchema(chat=True, vocab_size=limit)
    try:
        for i, entry in enumerate(entries):
            schema._entry(entry, f"content[{i}]", chosen=True)
    except RequestFailed:
        return False
    return True


def _same_trace(a: TokenTrace, b: TokenTrace) -> None:
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.logprobs, b.logprobs)  # NaN == NaN here
    np.testing.assert_array_equal(a.top_ids, b.top_ids)
    np.testing.assert_array_equal(a.top_logprobs, b.top_logprobs)
    assert (a.pieces, a.raw, a.top_pieces) == (b.pieces, b.raw, b.top_pieces)


def _agrees(entries: list[Any], limit: int = LIMIT) -> bool:
    """gather's verdict, after checking it against the walk's (and its columns against the walk's trace)."""
    columns = gather(entries, limit)
    walk_ok = _walk_accepts(entries, limit)
    if columns is None:
        return False
    assert walk_ok, "gather accepted entries the named walk refuses"
    _same_trace(columns.trace(), _walk(entries, None))
    assert columns.text() == token_text(entries)
    return True


@settings(max_examples=400, deadline=None)
@given(data=st.data(), k=st.sampled_from([0, 1, 3]))
def test_gather_never_accepts_what_the_walk_refuses(data: st.DataObject, k: int) -> None:
    entries = _entries(3, k)
    path = data.draw(st.sampled_from(_paths(entries)))
    mutated = _mutate({"e": entries}, ("e", *path), data.draw(JSON_VALUES), data.draw(st.booleans()))["e"]
    _agrees(mutated)


@pytest.mark.parametrize(
    "where, value",
    [
        ((0, "logprob"), math.nan),
        ((0, "logprob"), -math.inf),
        ((0, "logprob"), 0.5),
        ((0, "logprob"), True),
        ((0, "logprob"), -(10**400)),  # an integer no float can hold
        ((1, "id"), True),
        ((1, "id"), LIMIT),
        ((1, "id"), -1),
        ((1, "id"), 2**64),
        ((1, "id"), 3.0),
        ((2, "token"), "token_id:abc"),
        ((2, "token"), f"token_id:{LIMIT}"),
        ((2, "token"), 7),
        ((2, "bytes"), [256]),
        ((2, "bytes"), "abc"),
        ((2, "bytes"), {5: 1}),
        ((0, "top_logprobs"), {"a": -1.0}),
        ((0, "top_logprobs", 1, "logprob"), math.nan),
        ((0, "top_logprobs", 1, "id"), MAX_TOKEN_ID),
        ((0, "top_logprobs", 1, "bytes"), [-1]),
        ((0, "top_logprobs", 1), "alt"),
        ((3,), None),
    ],
)
def test_each_rule_sends_the_entries_to_the_named_walk(where: tuple[Any, ...], value: Any) -> None:
    entries = copy.deepcopy(_entries())
    node: Any = entries
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    assert not _agrees(entries)
    assert not _walk_accepts(entries, LIMIT)


def test_every_real_shape_takes_the_fast_path() -> None:
    llama = _entries(5, 3)
    openai = [{k: v for k, v in e.items() if k != "id"} for e in copy.deepcopy(llama)]
    for e in openai:
        e["top_logprobs"] = [{k: v for k, v in alt.items() if k != "id"} for alt in e["top_logprobs"]]
    vllm_ids = [{"token": f"token_id:{100 + i}", "logprob": -0.5, "bytes": [116]} for i in range(3)]
    drafts = copy.deepcopy(llama)
    drafts[1]["top_logprobs"] = []  # an accepted draft token: no alternatives, logprob 0.0 means "not reported"
    drafts[1]["logprob"] = 0.0
    drafts[2].pop("top_logprobs")
    drafts[3]["logprob"] = None
    ragged = copy.deepcopy(llama)
    ragged[0]["top_logprobs"] = ragged[0]["top_logprobs"][:1]
    no_text = [{"id": 5, "logprob": -0.1}, {"id": 6, "logprob": -0.2}]
    for entries in (llama, openai, vllm_ids, drafts, ragged, no_text, []):
        assert _agrees(entries), entries
    assert math.isnan(gather(drafts, LIMIT).trace().logprobs[1])  # type: ignore[union-attr]  # accepted above
    assert gather(no_text, LIMIT).text() is None  # type: ignore[union-attr]  # accepted above


@given(
    ids=st.lists(st.one_of(st.none(), st.integers(-(2**70), 2**70)), max_size=6),
    logprobs=st.lists(
        st.one_of(st.none(), st.floats(), st.floats(-1e308, 1e-3), st.integers(-(2**1100), 0)), max_size=6
    ),
)
@example(ids=[], logprobs=[None, -1.6e308, -1.6e308])  # finite, and absent beside them: their sum overflows
def test_ids_and_logprobs_are_checked_alike_as_arrays_and_as_lists(ids: list[Any], logprobs: list[Any]) -> None:
    """The array checks apply the schema's rule to every value, absent ones allowed: ids as an array or, where one
    is absent or beyond int64, as a list; logprobs as an array, huge finite ones whose sum overflows included."""
    ids_rule = all(v is None or 0 <= v < LIMIT for v in ids)
    assert _ids_ok(ids, _numbers(ids, np.int64), LIMIT) == ids_rule
    assert _ids_ok(ids, None, LIMIT) == ids_rule

    def finite_low(v: Any) -> bool:
        try:
            return math.isfinite(v) and v <= LOGPROB_SLACK
        except OverflowError:
            return False

    lp_rule = all(v is None or finite_low(v) for v in logprobs)
    assert _logprobs_ok(logprobs, _numbers(logprobs, np.float64)) == lp_rule


def test_the_vocabulary_bounds_ids_and_token_id_renderings() -> None:
    entries = _entries(3, 2)
    top = max(max(e["id"], *(a["id"] for a in e["top_logprobs"])) for e in entries)
    assert _agrees(entries, top + 1)
    assert not _agrees(entries, top)
    rendered = [{"token": "token_id:9", "logprob": -0.1}]
    assert _agrees(rendered, 10) and not _agrees(rendered, 9)


def test_trace_from_entries_is_unchanged_for_entries_the_walk_alone_reads() -> None:
    odd = copy.deepcopy(_entries(3, 2))
    odd[0]["logprob"] = math.nan  # refused by the schema, but parsing on its own keeps it as missing
    assert gather(odd, 2**63) is None
    _same_trace(trace_from_entries(odd), _walk(odd, None))
    assert trace_from_entries(_entries(3, 3), k=1).top_ids.shape == (3, 1)


def test_logprob_arrays_keep_missing_values_and_clip_impossible_ones() -> None:
    from evalsuite.engines.columns import logprob_array

    values = [None, -math.inf, -1e40, -1e30, -2.5, 0.0, math.nan, -1e-50]
    out = logprob_array(values)
    assert out.dtype == np.float32
    assert np.isnan(out[0]) and np.isnan(out[6])
    np.testing.assert_array_equal(out[[1, 2, 3, 4, 5, 7]], np.float32([-1e30, -1e30, -1e30, -2.5, 0.0, -0.0]))
    assert np.isfinite(out[~np.isnan(out)]).all()


def test_a_trace_keeps_its_top_strings_flat_until_its_rows_are_read_and_stores_what_they_say() -> None:
    full = gather(_entries(4, 3), LIMIT)
    ragged_entries = copy.deepcopy(_entries(4, 3))
    ragged_entries[1]["top_logprobs"] = ragged_entries[1]["top_logprobs"][:1]
    ragged = gather(ragged_entries, LIMIT)
    assert full is not None and ragged is not None
    trace = full.trace()
    assert trace.top_names() == full.top_tokens  # no rows built to store it
    assert trace.top_pieces == [full.top_tokens[i : i + 3] for i in range(0, 12, 3)]
    assert ragged.trace().top_names() is None
    assert [len(row) for row in ragged.trace().top_pieces] == [3, 1, 3, 3]
    edited = full.trace()
    edited.top_pieces[2] = ["x", "y", "z"]  # rows read and changed: the store keeps the change
    for stored in (trace, edited):
        assert unpack_strings(pack_strings(stored), stored.top_ids)[2] == stored.top_pieces


@given(st.lists(st.integers(0, 3), min_size=1, max_size=12))
def test_rows_of_alternatives_are_cut_by_each_tokens_count_with_accepted_drafts_left_empty(counts: list[int]) -> None:
    entries = copy.deepcopy(_entries(len(counts), 3))
    for entry, count in zip(entries, counts):  # a speculative server's answer: no alternatives on accepted drafts
        entry["top_logprobs"] = entry["top_logprobs"][:count]
    columns = gather(entries, LIMIT)
    assert columns is not None
    rows = columns.trace().top_pieces
    assert rows == [[alt["token"] for alt in entry["top_logprobs"]] for entry in entries]
    assert rows == trace_from_entries(entries).top_pieces  # the entry-by-entry reading agrees
