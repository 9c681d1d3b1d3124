"""Fixtures for tests against the real llama-server rig.

`rig_assets` (session scope) builds llama-server on first use (10-15 minutes
on 2 idle cores, then cached) and generates the rig's models; `rig_chat` sends
one raw chat completion.  Any test folder can request them; tests that do
must be marked `@pytest.mark.rig`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from evalsuite.rig.assets import RigAssets, ensure_assets


@pytest.fixture(scope="session")
def rig_assets() -> RigAssets:
    """The built server binary and every rig model, by role."""
    return ensure_assets(progress=lambda msg: print(f"[rig] {msg}", flush=True))


@pytest.fixture(scope="session")
def rig_http() -> Iterator[httpx.Client]:
    """One HTTP client for all rig requests (generous timeout: 2 shared CPU cores)."""
    with httpx.Client(timeout=300.0) as client:
        yield client


Chat = Callable[..., dict[str, Any]]


@pytest.fixture(scope="session")
def rig_chat(rig_http: httpx.Client) -> Chat:
    """`rig_chat(base_url, prompt, max_tokens=40, **extra)`: one raw chat completion as JSON."""

    def chat(base_url: str, prompt: str, max_tokens: int = 40, **extra: Any) -> dict[str, Any]:
        return raw_chat(rig_http, base_url, prompt, max_tokens, **extra)

    return chat


def raw_chat(client: httpx.Client, base_url: str, prompt: str, max_tokens: int = 40, **extra: Any) -> dict[str, Any]:
    """A greedy, seeded, uncached chat completion with per-token ids and top-5 logprobs."""
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "seed": 42,
        "logprobs": True,
        "top_logprobs": 5,
        "cache_prompt": False,
        **extra,
    }
    response = client.post(base_url + "/v1/chat/completions", json=body)
    response.raise_for_status()
    return response.json()
