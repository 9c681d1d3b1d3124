"""What a probe reads from the server: each document once, everything the engine learns from it kept."""

from __future__ import annotations

from typing import Any

import pytest
from fake_server import FakeServer

from evalsuite.config import TargetConfig
from evalsuite.engines import make_engine


@pytest.mark.asyncio
async def test_llamacpp_probe_reads_models_once_and_keeps_its_meta(fake_server: FakeServer) -> None:
    fake_server.state.n_vocab = 3000
    engine = make_engine(TargetConfig(name="t", engine="llamacpp", base_url=fake_server.base_url))
    read = engine._get_json
    urls: list[str] = []

    async def counting(url: str) -> Any:
        urls.append(url)
        return await read(url)

    engine._get_json = counting  # type: ignore[method-assign]  # a spy on the one method every probe reads through
    try:
        info = await engine.probe()
    finally:
        await engine.aclose()
    assert sorted(u.rsplit("/", 1)[1] for u in urls) == ["models", "props"]
    assert info["models"] == ["fake-model"] and info["model"] == "fake-model"
    assert info["model_meta"] == {"n_vocab": 3000, "n_ctx_train": 4096}
    assert engine.vocab_size == 3000
