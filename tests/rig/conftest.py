"""Fixtures for tests against the real llama-server rig.

`rig_assets` (session scope) builds llama-server on first use (10-15 minutes
on 2 idle cores, then cached) and generates the rig's models; `rig_chat` sends
one raw chat completion.  Any test folder can request them; tests that do
must be marked `@pytest.mark.rig`.  `rig_servers` (for the modules here) gives
the servers a module's `rig_servers` marker names, each started once for every
module that names it in a row.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from evalsuite.rig.assets import RigAssets, ensure_assets
from evalsuite.rig.launcher import RunningServer, serve


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


class SharedServers:
    """Rig servers started on first use and kept while the next module names them too.

    A vLLM server takes one to two minutes to load on two cores; modules that need the same configuration
    (the vLLM baseline) share one start.  A server no following module names is stopped at once, so a module
    never runs beside servers it did not ask for.
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._servers: dict[str, tuple[RunningServer, contextlib.ExitStack]] = {}

    def get(self, names: Sequence[str]) -> dict[str, RunningServer]:
        """The named servers, starting those not running yet."""
        for name in names:
            if name not in self._servers:
                stack = contextlib.ExitStack()
                running = stack.enter_context(serve([name], log_dir=self.log_dir, progress=_say))
                self._servers[name] = (running[name], stack)
        return {name: self._servers[name][0] for name in names}

    def keep(self, names: Collection[str]) -> None:
        """Stop every server not named."""
        for name in [n for n in self._servers if n not in names]:
            self._servers.pop(name)[1].close()


def _say(message: str) -> None:
    print(f"[rig] {message}", flush=True)


SHARED = pytest.StashKey[SharedServers]()


@pytest.fixture(scope="session")
def shared_servers(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[SharedServers]:
    pool = request.config.stash[SHARED] = SharedServers(tmp_path_factory.mktemp("rig-server-logs"))
    yield pool
    pool.keep(())


@pytest.fixture(scope="module")
def rig_servers(request: pytest.FixtureRequest, shared_servers: SharedServers) -> dict[str, RunningServer]:
    """The servers the module's `@pytest.mark.rig_servers(NAME, ...)` names, by name."""
    marker = request.node.get_closest_marker("rig_servers")
    assert marker is not None, f"{request.node.nodeid} asks for rig_servers without naming them in its marker"
    return shared_servers.get(marker.args)


def _named(item: pytest.Item | None) -> tuple[str, ...]:
    marker = item.get_closest_marker("rig_servers") if item is not None else None
    return marker.args if marker is not None else ()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After each test that used shared servers, stop those the next test does not name."""
    pool = item.config.stash.get(SHARED, None)
    if pool is not None and _named(item):
        pool.keep(_named(nextitem))
