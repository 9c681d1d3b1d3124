"""The schema and agreement checks on their own: every class of malformed body is refused, real shapes pass."""

from __future__ import annotations

import copy
import json
import math
import re
import sys
from typing import Any

import pytest
from fake_server import FakeState, apply_patch, completion_body

from evalsuite.engines.agree import _MARKUP, _normal, check_agreement
from evalsuite.engines.retry import RequestFailed
from evalsuite.engines.stream import merge_chunks
from evalsuite.engines.validate import MAX_TOKEN_ID, ResponseSchema

CHAT = {"messages": [{"role": "user", "content": "Question q1"}], "logprobs": True, "top_logprobs": 3, "max_tokens": 64}
LEGACY = {"prompt": "Question q1", "logprobs": 3, "max_tokens": 64}


def _good(request: dict[str, Any] = CHAT) -> dict[str, Any]:
    return completion_body(FakeState(tokens=6), copy.deepcopy(request))


def _refused(body: Any, *, chat: bool = True, vocab: int | None = None) -> str:
    with pytest.raises(RequestFailed) as info:
        ResponseSchema(chat=chat, vocab_size=vocab).check(body)
    assert info.value.retryable
    return str(info.value)


def test_well_formed_answers_of_every_shape_pass() -> None:
    ResponseSchema(chat=True, vocab_size=2048).check(_good())
    ResponseSchema(chat=False).check(_good(LEGACY))
    legacy = {
        "choices": [
            {
                "text": "x y",
                "finish_reason": "length",
                "logprobs": {
                    "tokens": ["x", " y"],
                    "token_logprobs": [-0.5, None],
                    "top_logprobs": [{"x": -0.5}, None],
                },
            }
        ]
    }
    ResponseSchema(chat=False).check(legacy)
    openai = {
        "choices": [
            {
                "message": {"role": "assistant", "content": None, "reasoning_content": "hm"},
                "finish_reason": "length",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": 3,
            "completion_tokens": 2,
            "completion_tokens_details": {"reasoning_tokens": 2},
            "prompt_tokens_details": None,
        },
    }
    ResponseSchema(chat=True).check(openai)


@pytest.mark.parametrize(
    ("patch", "words"),
    [
        ([["set", "choices", [{}]]], "choices[0].message"),
        ([["set", "choices", [1]]], "choices[0] is 1"),
        ([["set", "choices", []]], "non-empty list"),
        ([["del", "choices"]], "choices is None"),
        ([["set", "choices.0.message", "hello"]], "choices[0].message is 'hello' (a string)"),
        ([["set", "choices.0.message.content", 42]], "message.content is 42 (a number)"),
        ([["set", "choices.0.message.content", ["a"]]], "message.content"),
        ([["del", "choices.0.finish_reason"]], "finish_reason"),
        ([["set", "choices.0.finish_reason", ""]], "finish_reason"),
        ([["set", "choices.0.finish_reason", "abort"]], "did not complete"),
        ([["set", "usage", [1, 2]]], "usage is [1, 2] (a list)"),
        ([["set", "usage.completion_tokens", "6"]], "usage.completion_tokens"),
        ([["set", "usage.completion_tokens", -1]], "usage.completion_tokens"),
        ([["set", "choices.0.logprobs", "x"]], "choices[0].logprobs"),
        ([["set", "choices.0.logprobs.content", {"a": 1}]], "logprobs.content"),
        ([["set", "choices.0.logprobs.content.1", 7]], "content[1] is 7"),
        ([["set", "choices.0.logprobs.content.2.id", 2**64]], "content[2].id"),
        ([["set", "choices.0.logprobs.content.2.id", 2**31]], "[0, 2**31)"),
        ([["set", "choices.0.logprobs.content.2.id", -3]], "content[2].id is -3"),
        ([["set", "choices.0.logprobs.content.2.id", 1.5]], "integer token id"),
        ([["set", "choices.0.logprobs.content.2.id", True]], "integer token id"),
        ([["set", "choices.0.logprobs.content.0.logprob", 0.5]], "<= 0"),
        ([["set", "choices.0.logprobs.content.0.logprob", "-0.1"]], "logprob"),
        ([["set", "choices.0.logprobs.content.0.top_logprobs", {"x": -1}]], "top_logprobs"),
        ([["set", "choices.0.logprobs.content.0.top_logprobs.1", "alt"]], "top_logprobs[1] is 'alt'"),
        ([["set", "choices.0.logprobs.content.0.top_logprobs.1.id", -1]], "top_logprobs[1].id"),
        ([["set", "choices.0.logprobs.content.0.bytes", [300]]], "bytes"),
        ([["set", "choices.0.logprobs.content.0.token", 5]], "content[0].token"),
        ([["set", "choices.0.logprobs.content.0.token", "token_id:99999999999"]], "token_id"),
        ([["set", "choices.0.token_ids", [1, 2]]], "token_ids but 6 logprob entries"),
        ([["set", "choices.0.token_ids", [1, 2, 3, 4, 5, -6]]], "token_ids[5]"),
        ([["set", "model", 7]], "model"),
        ([["set", "usage.completion_tokens", 2]], "returns 6 tokens but its usage counts 2"),
    ],
)
def test_malformed_shapes_are_refused_naming_path_and_value(patch: list[list[Any]], words: str) -> None:
    assert words in _refused(apply_patch(_good(), patch))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_logprobs_are_refused(value: float) -> None:
    # Python's json reads NaN / Infinity, which no real server should send
    body = json.loads(json.dumps(apply_patch(_good(), [["set", "choices.0.logprobs.content.3.logprob", value]])))
    assert "finite" in _refused(body)


def test_token_ids_beyond_a_known_vocabulary_are_refused() -> None:
    body = _good()
    top = max(e["id"] for e in body["choices"][0]["logprobs"]["content"])
    ResponseSchema(chat=True, vocab_size=top + 10).check(body)
    assert "vocabulary of" in _refused(body, vocab=top)
    assert MAX_TOKEN_ID == 2**31


def test_error_bodies_and_completions_shapes() -> None:
    failure = _refused({"error": {"message": "CUDA out of memory", "code": 500}})
    assert "CUDA out of memory" in failure
    assert "choices[0].text" in _refused(apply_patch(_good(LEGACY), [["set", "choices.0.text", None]]), chat=False)
    legacy = {
        "choices": [{"text": "x", "finish_reason": "stop", "logprobs": {"tokens": ["x"], "token_logprobs": [1.0]}}]
    }
    assert "token_logprobs[0]" in _refused(legacy, chat=False)
    legacy["choices"][0]["logprobs"] = {"tokens": ["x"], "token_logprobs": [-1.0], "top_logprobs": [{"x": None}]}
    assert "top_logprobs[0]['x'] is None" in _refused(legacy, chat=False)
    assert "(body)" in _refused([1, 2])


def _entries(*pieces: str) -> list[dict[str, Any]]:
    return [{"id": i, "token": p, "bytes": list(p.encode()), "logprob": -0.1} for i, p in enumerate(pieces)]


def test_text_must_agree_with_its_tokens() -> None:
    check_agreement("The answer is 12", _entries("The", " answer", " is", " 12"), finish_reason="length")
    with pytest.raises(RequestFailed, match="does not match its 4 returned tokens"):
        check_agreement("The answer is 13", _entries("The", " answer", " is", " 12"), finish_reason="length")
    with pytest.raises(RequestFailed, match="does not match"):
        check_agreement("", _entries("The", " answer"), finish_reason="stop")
    with pytest.raises(RequestFailed, match="does not match"):  # extra tokens are fine only when they stopped it
        check_agreement("The", _entries("The", " answer"), finish_reason="stop", stop=["\n\n"])


def test_what_servers_legitimately_leave_out_of_the_text_is_not_a_disagreement() -> None:
    # trimmed whitespace, think tags split off into reasoning, special end-of-turn markup
    check_agreement("hmm 4", _entries("<think>", "hmm", "</think>", "\n\n", "4", "<|im_end|>"), finish_reason="stop")
    # a stop string that ended the generation is in the tokens, not in the text
    check_agreement("x = 4", _entries("x", " =", " 4", "\n\nQuestion"), finish_reason="stop", stop=["\n\nQuestion"])
    # a multi-byte character split over two tokens: bytes join it, strings alone cannot
    check_agreement("π", [{"bytes": [0xCF]}, {"bytes": [0x80]}], finish_reason="stop")
    check_agreement("π ≈ 3", [{"token": "\ufffd"}, {"token": "\ufffd"}, {"token": " 3"}], finish_reason="stop")
    # ids only (vLLM's token_id:N without bytes): nothing to compare
    check_agreement("anything", [{"token": "token_id:5"}], finish_reason="stop")
    vllm = [{"token": "token_id:5", "bytes": list(b"token_id:5")}, {"token": "token_id:6", "bytes": list(b"b")}]
    check_agreement("ab", vllm, finish_reason="stop")  # vLLM may spell the placeholder itself in bytes


def test_the_comparison_drops_the_whitespace_the_regex_class_names() -> None:
    every = "".join(map(chr, range(sys.maxunicode + 1)))  # each code point once, lone surrogates included
    assert _normal(every) == re.sub(r"\s+", "", _MARKUP.sub("", every))
    assert _normal(" <think>a\u2003b</think>\n\x1fc<|im_end|>") == "abc"


def test_stream_chunks_with_bad_shapes_are_refused() -> None:
    with pytest.raises(RequestFailed, match="stream event 0 has a choice"):
        merge_chunks([{"choices": [3]}])
    with pytest.raises(RequestFailed, match="delta.content"):
        merge_chunks([{"choices": [{"delta": {"content": 5}}]}])
    with pytest.raises(RequestFailed, match="reports model 'b' after 'a'"):
        merge_chunks([{"model": "a", "choices": []}, {"model": "b", "choices": []}])
    merged = merge_chunks(
        [{"choices": [{"text": "a", "finish_reason": None}]}, {"choices": [{"text": "b", "finish_reason": "stop"}]}]
    )
    assert merged["choices"][0]["text"] == "ab" and "message" not in merged["choices"][0]


def test_a_message_without_any_reply_is_refused_and_a_body_without_choices_is_quoted() -> None:
    assert "message.content is None" in _refused(
        {"choices": [{"message": {"role": "assistant"}, "finish_reason": "stop"}]}
    )
    ResponseSchema(chat=True).check({"choices": [{"message": {"content": ""}, "finish_reason": "stop"}]})
    assert "the server sent {'detail': 'Model is loading'}" in _refused({"detail": "Model is loading"})


def test_sse_error_events_and_cut_streams() -> None:
    import asyncio

    from evalsuite.engines.stream import read_events

    async def events(lines: list[str]) -> list[dict[str, Any]]:
        async def source():
            for line in lines:
                yield line

        return await read_events(source())

    ok = [
        'data: {"choices": [{"delta": {"content": "a"}}]}',
        "",
        'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}',
    ]
    assert len(asyncio.run(events(ok))) == 2  # a finish reason without [DONE] is a complete answer
    with pytest.raises(RequestFailed, match="overloaded"):
        asyncio.run(events(ok[:2] + ["event: error", 'data: {"message": "overloaded"}', ""]))
    with pytest.raises(RequestFailed, match="after 1 events without"):
        asyncio.run(events(ok[:2]))
    multi = [
        'data: {"choices": [{"delta": {"content":',
        'data: "a"}, "finish_reason": "stop"}]}',
        "",
        "data: [DONE]",
        "",
    ]
    assert asyncio.run(events(multi))[0]["choices"][0]["delta"]["content"] == "a"
