"""The response parser reads every text exactly as Python's json does: same value, same types, same refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typed_json import typed

from evalsuite.engines.body import loads

VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


def _outcome(parse: Any, text: bytes | str) -> Any:
    try:
        return typed(parse(text))
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return "refused"


@settings(max_examples=300, deadline=None)
@given(value=VALUES, as_bytes=st.booleans())
def test_any_json_value_reads_the_same(value: Any, as_bytes: bool) -> None:
    text = json.dumps(value, ensure_ascii=False)
    raw = text.encode("utf-8", "surrogatepass") if as_bytes else text
    assert _outcome(loads, raw) == _outcome(json.loads, raw)


@settings(max_examples=300, deadline=None)
@given(value=VALUES, cut=st.integers(0, 200), junk=st.binary(max_size=3))
def test_broken_text_is_refused_or_read_the_same(value: Any, cut: int, junk: bytes) -> None:
    raw = json.dumps(value).encode()
    broken = raw[:cut] + junk + raw[cut:]
    assert _outcome(loads, broken) == _outcome(json.loads, broken)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id": 18446744073709551616}',  # beyond 64 bits: an int, not a float
        b'{"id": -9223372036854775809}',
        b'{"id": 9223372036854775807}',
        b'{"logprob": NaN, "x": -Infinity}',
        b'{"x": 1e400}',
        b'{"t": "\\ud800"}',  # a lone surrogate escape
        b'\xef\xbb\xbf{"bom": 1}',
        '{"t": 1}'.encode("utf-16"),
        b'{"a": 1, "a": 2}',
        b'{"t": "\xff"}',
        b"",
    ],
)
def test_the_texts_where_the_two_parsers_differ(raw: bytes) -> None:
    assert _outcome(loads, raw) == _outcome(json.loads, raw)
