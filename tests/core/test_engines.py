"""Response parsing for each dialect: real llama-server recordings, vLLM and legacy shapes, text only."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from projects import recordings_dir

from evalsuite.engines.parse import completion_from_chat
from evalsuite.engines.stream import merge_chunks
from evalsuite.engines.vllm import parse_counters

RECORDINGS = recordings_dir()


@pytest.mark.skipif(not RECORDINGS.exists(), reason="shared recordings not present")
def test_real_llamacpp_responses_parse_with_ids_bytes_and_draft_gaps() -> None:
    base = json.load(gzip.open(RECORDINGS / "base_f16.json.gz"))
    spec = json.load(gzip.open(RECORDINGS / "spec_f16_self.json.gz"))
    b = completion_from_chat(base["responses"][0]["response"])
    s = completion_from_chat(spec["responses"][0]["response"])
    entries = base["responses"][0]["response"]["choices"][0]["logprobs"]["content"]
    assert b.token_level == "ids" and len(b.tokens) == len(entries)
    assert b.tokens.ids.tolist() == [e["id"] for e in entries]
    assert b.tokens.raw[0] == bytes(entries[0]["bytes"])
    assert b.tokens.top_logprobs.shape == (len(entries), 5)
    # the baseline sampled every token itself: all have alternatives, sorted best first
    assert b.tokens.has_top.all()
    assert (np.diff(b.tokens.top_logprobs, axis=1) <= 0).all()
    # accepted draft tokens come back with logprob 0.0 and no alternatives: marked missing, not confident
    gaps = ~s.tokens.has_top
    assert gaps.sum() > len(s.tokens) // 2
    assert np.isnan(s.tokens.logprobs[gaps]).all()
    assert s.timings["draft_n"] >= s.timings["draft_n_accepted"] > 0
    assert b.text == "".join(b.tokens.pieces)


def test_vllm_token_id_strings_and_token_ids_field() -> None:
    resp = {
        "choices": [
            {
                "message": {"content": "ab"},
                "finish_reason": "stop",
                "token_ids": [11, 12],
                "logprobs": {
                    "content": [
                        {
                            "token": "token_id:11",
                            "logprob": -0.1,
                            "top_logprobs": [
                                {"token": "token_id:11", "logprob": -0.1},
                                {"token": "token_id:99", "logprob": -2.5},
                            ],
                        },
                        {
                            "token": "token_id:12",
                            "logprob": -0.2,
                            "top_logprobs": [{"token": "token_id:12", "logprob": -0.2}],
                        },
                    ]
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    c = completion_from_chat(resp)
    assert c.tokens.ids.tolist() == [11, 12]
    assert c.tokens.top_ids.tolist() == [[11, 99], [12, -1]]
    assert np.isnan(c.tokens.top_logprobs[1, 1])
    assert c.completion_tokens == 2 and not c.truncated


def test_legacy_completions_logprobs_and_text_only() -> None:
    legacy = {
        "choices": [
            {
                "text": "x y",
                "finish_reason": "length",
                "logprobs": {
                    "tokens": ["x", " y"],
                    "token_logprobs": [-0.5, -0.1],
                    "top_logprobs": [{"x": -0.5, "z": -1.5}, {" y": -0.1, " q": -3.0}],
                },
            }
        ]
    }
    c = completion_from_chat(legacy)
    assert c.token_level == "strings" and c.truncated
    assert c.tokens.top_pieces == [["x", "z"], [" y", " q"]]
    plain = completion_from_chat({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]})
    assert plain.token_level == "text" and plain.tokens is None and plain.text == "hi"
    with pytest.raises(ValueError, match="no choices"):
        completion_from_chat({"error": "x"})


def test_reasoning_content_is_kept_before_the_answer() -> None:
    c = completion_from_chat({"choices": [{"message": {"reasoning_content": "think. ", "content": "42"}}]})
    assert c.text == "think. 42"


def test_stream_chunks_merge_into_one_response() -> None:
    chunks = [
        {"choices": [{"delta": {"content": "a"}, "logprobs": {"content": [{"id": 1, "token": "a", "logprob": -0.1}]}}]},
        {"choices": [{"delta": {"content": "b"}, "logprobs": {"content": [{"id": 2, "token": "b", "logprob": -0.2}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"completion_tokens": 2}, "timings": {"predicted_n": 2}},
    ]
    c = completion_from_chat(merge_chunks(chunks))
    assert c.text == "ab" and c.finish_reason == "stop" and c.tokens.ids.tolist() == [1, 2]
    assert c.usage == {"completion_tokens": 2} and c.timings == {"predicted_n": 2.0}


def test_vllm_metrics_counters_sum_over_labels() -> None:
    text = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 22.0
vllm:num_requests_running{engine="0"} 1.0
"""
    assert parse_counters(text) == {"vllm:spec_decode_num_drafts": 15.0, "vllm:spec_decode_num_accepted_tokens": 22.0}
