"""Request bodies: the bytes sent read back as httpx's `json=` would have sent them, with the same refusals."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typed_json import typed

from evalsuite.config import TargetConfig
from evalsuite.engines import make_engine
from evalsuite.engines.body import dumps_body
from evalsuite.records import GenerationParams, Sample

KEYS = st.text(st.characters(codec=None, exclude_categories=()), max_size=5)  # lone surrogates included
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(KEYS | st.integers(0, 9), inner, max_size=4)
    ),
    max_leaves=12,
)


def _sent(encode: Any, value: Any) -> Any:
    try:
        raw = encode(value)
    except (ValueError, TypeError) as exc:  # the refusals: NaN, surrogates as UTF-8, unknown types
        return ("refused", type(exc).__name__)
    return typed(json.loads(raw))


def _httpx_json(value: Any) -> bytes:
    return httpx.Request("POST", "http://x/", json=value).content


@settings(max_examples=400, deadline=None)
@given(value=st.dictionaries(KEYS | st.integers(0, 9), VALUES, max_size=5))  # a body is an object
def test_any_body_is_sent_as_httpx_would_send_it(value: dict[Any, Any]) -> None:
    assert _sent(dumps_body, value) == _sent(_httpx_json, value)


@pytest.mark.parametrize("value", [{"temperature": math.nan}, {"extra": [1.0, {"x": -math.inf}]}, [math.inf]])
def test_non_finite_numbers_are_refused_not_sent_as_null(value: Any) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        dumps_body(value)


@pytest.mark.asyncio
async def test_the_engine_request_carries_the_body_and_the_json_content_type() -> None:
    target = TargetConfig(name="t", engine="llamacpp", base_url="http://127.0.0.1:9", extra={"mirostat": 0})
    engine = make_engine(target)
    engine.model = "m"
    params = GenerationParams(max_tokens=8, temperature=0.0, top_logprobs=2)
    sample = Sample("s", "t", ({"role": "user", "content": "héllo"},), None, {})
    try:
        body = engine.request_body(sample, params)
        request = engine._request(body)
    finally:
        await engine.aclose()
    assert str(request.url) == "http://127.0.0.1:9/v1/chat/completions"
    assert request.method == "POST" and request.headers["content-type"] == "application/json"
    assert int(request.headers["content-length"]) == len(request.content)
    assert json.loads(request.content) == body == json.loads(_httpx_json(body))
    assert request.headers["accept-encoding"] == "gzip, deflate"  # the client's own headers still apply
