"""The completions route's legacy logprobs (`tokens`, `token_logprobs`, `top_logprobs`), read by columns.

vLLM's /v1/completions answers in these parallel lists.  The schema check makes them into columns all
at once (parsing and the text check read those); the reference is the entry-by-entry reading they
replace: the same trace for any lists, and the same Completion or the same named refusal for any
mutated answer.
"""

from __future__ import annotations

import copy
import math
import warnings
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_response_fuzz import ENGINES, JSON_VALUES, LEGACY, _mutate, _paths

from evalsuite.engines import columns, validate
from evalsuite.engines.parse import _trace_from_legacy, _walk
from evalsuite.engines.retry import RequestFailed
from evalsuite.records import GenerationParams

TOKENS = st.sampled_from(["a", " b", "token_id:7", "token_id:x", "", "é", "token_", "id:3"])
LOGPROBS = st.sampled_from([-0.5, -2.0, 0.0, -1.0]) | st.floats(-50, 0) | st.none()
TOPS = st.none() | st.dictionaries(TOKENS, st.sampled_from([-0.5, -1.0, -3.0]) | st.floats(-50, 0), max_size=4)


def _reference(logprobs: dict[str, Any]) -> Any:
    """The entry-by-entry reading: one entry a token, its alternatives most likely first (stable for ties)."""
    tokens = logprobs["tokens"]
    entries = [
        {
            "token": t,
            "logprob": lp,
            "top_logprobs": [{"token": a, "logprob": v} for a, v in sorted((top or {}).items(), key=lambda kv: -kv[1])],
        }
        for t, lp, top in zip(tokens, logprobs["token_logprobs"], logprobs["top_logprobs"])
    ]
    return _walk(entries, None)


@settings(max_examples=400, deadline=None)
@given(rows=st.lists(st.tuples(TOKENS, LOGPROBS, TOPS), max_size=12))
def test_the_trace_from_the_lists_is_the_entry_by_entry_trace(rows: list[tuple[str, Any, Any]]) -> None:
    logprobs = {
        "tokens": [r[0] for r in rows],
        "token_logprobs": [r[1] for r in rows],
        "top_logprobs": [r[2] for r in rows],
    }
    ours, ref = _trace_from_legacy(logprobs), _reference(logprobs)
    for name in ("ids", "logprobs", "top_ids", "top_logprobs"):
        np.testing.assert_array_equal(getattr(ours, name), getattr(ref, name))
    assert (ours.pieces, ours.top_pieces, ours.raw) == (ref.pieces, ref.top_pieces, ref.raw)


def _outcome(body: dict[str, Any]) -> Any:
    """What the engine makes of a completions answer: its text, finish reason and trace, or the refusal."""
    try:
        completion = ENGINES[False].accept(body, GenerationParams(), latency_s=0.0, ttft_s=None)
    except RequestFailed as failure:
        return f"{failure.kind}: {failure}"
    trace = completion.tokens
    arrays = None if trace is None else [getattr(trace, n).tolist() for n in ("ids", "top_ids")]
    floats = (
        None
        if trace is None
        else [np.nan_to_num(getattr(trace, n), nan=9.0).tolist() for n in ("logprobs", "top_logprobs")]
    )
    pieces = None if trace is None else (trace.pieces, trace.top_pieces)
    return completion.text, completion.finish_reason, arrays, floats, pieces


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_a_mutated_answer_comes_out_as_from_the_value_by_value_walk(data: st.DataObject) -> None:
    body = LEGACY
    for _ in range(data.draw(st.integers(1, 2))):
        paths = [p for p in _paths(body) if "logprobs" in p]
        if not paths:  # the first edit removed the columns
            break
        path = data.draw(st.sampled_from(paths))
        body = _mutate(body, path, data.draw(JSON_VALUES | st.sampled_from([math.nan, math.inf, 10**400]))
                       , data.draw(st.booleans()))  # fmt: skip
    with mock.patch.object(validate, "legacy_columns", return_value=None):
        walked = _outcome(body)
    assert _outcome(body) == walked


def test_valid_legacy_lists_give_columns_and_each_fault_none() -> None:
    def lists(lps: list[Any], tops: list[Any]) -> dict[str, Any]:
        return {"tokens": ["a"] * len(lps), "token_logprobs": lps, "top_logprobs": tops}

    assert columns.legacy_columns(lists([-0.1, None, 0], [{"a": -0.1}, None, {}]), 2**31) is not None
    for lps, tops in [
        ([math.nan], [None]),
        ([-0.1], [{"a": None}]),
        ([-0.1], [{"a": math.inf}]),
        ([True], [None]),
        ([-0.1], [["a", -0.1]]),
        ([10**400], [None]),
        ([5.0], [None]),
        ([-0.1, -0.2], [None]),
    ]:
        assert columns.legacy_columns(lists(lps, tops), 2**31) is None, (lps, tops)


def test_tokens_rendered_as_ids_give_their_ids_and_plain_tokens_none() -> None:
    lists = {
        "tokens": ["token_id:7", "a"],
        "token_logprobs": [-0.1, -0.2],
        "top_logprobs": [{"token_id:9": -0.1}, None],
    }
    trace = _trace_from_legacy(lists)
    assert trace.ids.tolist() == [7, -1]
    assert trace.top_ids[0].tolist() == [9]
    plain = _trace_from_legacy({"tokens": ["a", "b"], "token_logprobs": [-0.1, -0.2], "top_logprobs": [None, None]})
    assert plain.ids.tolist() == [-1, -1]


def test_alternatives_already_ranked_are_taken_as_sent_and_others_ranked() -> None:
    """Servers send each object most likely first; only an object out of that order is sorted (stably)."""
    sent = {
        "tokens": ["a", "b", "c"],
        "token_logprobs": [-0.1, -0.2, -0.3],
        "top_logprobs": [{"a": -1.0}, {"b": -0.5, "x": -0.5, "y": -0.7}, {"c": -0.2}],  # rises only between objects
    }
    with mock.patch.object(columns, "ranked_runs", side_effect=AssertionError("sorted what was ranked")):
        got = columns.legacy_columns(sent, 2**31)
    assert got is not None and got.top_tokens == ["a", "b", "x", "y", "c"] and got.counts == [1, 3, 1]
    unranked = {**sent, "top_logprobs": [{"a": -1.0}, {"y": -0.7, "b": -0.5, "x": -0.5}, {"c": -0.2}]}
    got = columns.legacy_columns(unranked, 2**31)
    assert got is not None and got.top_tokens == ["a", "b", "x", "y", "c"]
    assert got.top_logprobs == [-1.0, -0.5, -0.5, -0.7, -0.2]


def test_alternatives_of_one_count_per_token_are_ranked_row_by_row() -> None:
    """The usual shape (k alternatives every token): ranked within each row, rising between rows, taken as
    sent; one row out of order, or a NaN, and the answer is read the slow way: sorted, or refused for the NaN."""
    sent = {
        "tokens": ["a", "b", "c"],
        "token_logprobs": [-0.1, -0.2, -0.3],
        "top_logprobs": [{"a": -1.0, "z": -2.0}, {"b": -0.5, "x": -0.5}, {"c": -0.2, "w": -9.0}],
    }
    with mock.patch.object(columns, "ranked_runs", side_effect=AssertionError("sorted what was ranked")):
        got = columns.legacy_columns(sent, 2**31)
    assert got is not None and got.top_tokens == ["a", "z", "b", "x", "c", "w"] and got.counts == [2, 2, 2]
    for top, expected in (({"w": -9.0, "c": -0.2}, ["a", "z", "b", "x", "c", "w"]), ({"c": math.nan, "w": -9.0}, None)):
        unranked = {**sent, "top_logprobs": [*sent["top_logprobs"][:2], top]}
        with mock.patch.object(columns, "ranked_runs", wraps=columns.ranked_runs) as ranking:
            got = columns.legacy_columns(unranked, 2**31)
        assert ranking.called  # not taken as sent
        assert (got and got.top_tokens) == expected  # a NaN logprob is refused, as anywhere


def test_alternatives_at_minus_infinity_are_refused_without_numpy_warnings() -> None:
    """-inf is not a log-probability the suite stores; two in a row used to be subtracted while the order was
    checked (NaN, and numpy's RuntimeWarning on the user's terminal before the refusal)."""
    body = copy.deepcopy(LEGACY)
    body["choices"][0]["logprobs"]["top_logprobs"] = [
        {"a": -0.1, "x": -math.inf, "y": -math.inf},
        {" b": -0.2, "u": -1.0, "v": -2.0},
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RequestFailed, match=r"top_logprobs\[0\]\['x'\] is -inf"):
            ENGINES[False].accept(body, GenerationParams(), latency_s=0.0, ttft_s=None)
