"""Any mutation of a well-formed answer is either accepted whole or refused as a retryable failure, never a crash."""

from __future__ import annotations

import copy
from typing import Any

from fake_server import FakeState, completion_body, stream_events
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsuite.config import TargetConfig
from evalsuite.engines import make_engine
from evalsuite.engines.retry import RequestFailed
from evalsuite.engines.stream import merge_chunks
from evalsuite.records import GenerationParams

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


ENGINES = {
    chat: make_engine(TargetConfig(name="t", base_url="http://127.0.0.1:9/v1", api="chat" if chat else "completions"))
    for chat in (True, False)
}


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        out.extend(_paths(child, (*prefix, key)))
    return out


def _mutate(body: dict[str, Any], path: tuple[Any, ...], value: Any, delete: bool) -> dict[str, Any]:
    body = copy.deepcopy(body)
    node: Any = body
    for key in path[:-1]:
        node = node[key]
    if delete and isinstance(node, dict):
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return body


LEGACY = {
    "choices": [
        {
            "index": 0,
            "text": "a b",
            "finish_reason": "length",
            "logprobs": {
                "tokens": ["a", " b"],
                "token_logprobs": [-0.1, -0.2],
                "top_logprobs": [{"a": -0.1, "c": -2.0}, {" b": -0.2}],
            },
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 2},
}


@settings(max_examples=300, deadline=None)
@given(data=st.data(), shape=st.sampled_from(["chat", "completions", "legacy"]))
def test_mutated_answers_never_crash_the_engine(data: st.DataObject, shape: str) -> None:
    chat = shape == "chat"
    request = {"messages": [{"role": "user", "content": "q"}]} if chat else {"prompt": "q"}
    body = completion_body(FakeState(tokens=3), {**request, "logprobs": True if chat else 2, "top_logprobs": 2})
    if shape == "legacy":
        body = LEGACY
    path = data.draw(st.sampled_from(_paths(body)))
    mutated = _mutate(body, path, data.draw(JSON_VALUES), data.draw(st.booleans()))
    engine = ENGINES[chat]
    try:
        completion = engine.accept(mutated, GenerationParams(), latency_s=0.0, ttft_s=None)
    except RequestFailed as failure:
        assert failure.retryable and str(failure)
        return
    # accepted: whatever was stored is well-typed
    assert isinstance(completion.text, str) and isinstance(completion.finish_reason, str)
    if completion.tokens is not None:
        assert ((completion.tokens.ids >= -1) & (completion.tokens.ids < 2**31)).all()


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_mutated_stream_events_never_crash_the_engine(data: st.DataObject) -> None:
    request = {"messages": [{"role": "user", "content": "q"}], "logprobs": True, "top_logprobs": 2}
    events = [e for e in stream_events(completion_body(FakeState(tokens=3), request)) if e != "[DONE]"]
    where = data.draw(st.integers(0, len(events) - 1))
    path = data.draw(st.sampled_from(_paths(events[where])))
    events[where] = _mutate(events[where], path, data.draw(JSON_VALUES), data.draw(st.booleans()))
    try:
        completion = ENGINES[True].accept(merge_chunks(events), GenerationParams(), latency_s=0.0, ttft_s=None)
    except RequestFailed as failure:
        assert failure.retryable and str(failure)
        return
    assert isinstance(completion.text, str) and isinstance(completion.finish_reason, str)
