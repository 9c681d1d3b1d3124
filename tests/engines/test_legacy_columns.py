"""The completions route's legacy logprobs (`tokens`, `token_logprobs`, `top_logprobs`), read by columns.

vLLM's /v1/completions answers in these parallel lists.  They are checked all together and turned into
a trace straight from the lists; the reference is the entry-by-entry reading they replace: the same
trace for any lists, and the same acceptance or the same named refusal for any mutated answer.
"""

from __future__ import annotations

import math
from typing import Any
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_response_fuzz import JSON_VALUES, LEGACY, _mutate, _paths

from evalsuite.engines import columns, validate
from evalsuite.engines.parse import _trace_from_legacy, _walk
from evalsuite.engines.retry import RequestFailed
from evalsuite.engines.validate import ResponseSchema

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


def _verdict(body: dict[str, Any]) -> str:
    try:
        ResponseSchema(chat=False).check(body)
    except RequestFailed as failure:
        return f"{failure.kind}: {failure}"
    return "accepted"


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_the_columns_check_accepts_and_refuses_as_the_value_by_value_walk(data: st.DataObject) -> None:
    body = LEGACY
    for _ in range(data.draw(st.integers(1, 2))):
        paths = [p for p in _paths(body) if "logprobs" in p]
        if not paths:  # the first edit removed the columns
            break
        path = data.draw(st.sampled_from(paths))
        body = _mutate(body, path, data.draw(JSON_VALUES | st.sampled_from([math.nan, math.inf, 10**400]))
                       , data.draw(st.booleans()))  # fmt: skip
    with mock.patch.object(validate, "legacy_logprobs_ok", return_value=False):
        walked = _verdict(body)
    assert _verdict(body) == walked


def test_valid_legacy_logprobs_pass_together_and_each_fault_fails() -> None:
    assert columns.legacy_logprobs_ok([-0.1, None, 0], [{"a": -0.1}, None, {}])
    for lps, tops in [
        ([math.nan], [None]),
        ([-0.1], [{"a": None}]),
        ([-0.1], [{"a": math.inf}]),
        ([True], [None]),
        ([-0.1], [["a", -0.1]]),
        ([10**400], [None]),
        ([5.0], [None]),
    ]:
        assert not columns.legacy_logprobs_ok(lps, tops), (lps, tops)


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
