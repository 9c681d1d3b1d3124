"""A real llama-server serving a thinking chat template: reasoning split out, every response passes the checks.

The rig's target model is served with the Qwen3.5 chat template shipped in
the pinned llama.cpp sources, whose generation prompt opens `<think>`. The
model never learned to close it, so every answer is cut inside its reasoning:
with `--reasoning-format deepseek` the server returns it as
`reasoning_content`, and the run must store it as reasoning, keep every token,
and flag the cut; with `--reasoning-format none` the text comes back as is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from projects import make_project

from evalsuite.config import load_config
from evalsuite.rig.assets import ensure_assets
from evalsuite.rig.build import rig_paths
from evalsuite.rig.launcher import RIG_CONFIGS, server_args
from evalsuite.runner import execute, plan_run
from evalsuite.serve.process import ServerCommand, served
from evalsuite.store import open_run

pytestmark = pytest.mark.rig

TEMPLATE = "models/templates/Qwen3.5-4B.jinja"


@pytest.fixture(scope="module")
def thinking_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    template = rig_paths().src / TEMPLATE
    assets = ensure_assets(progress=lambda msg: print(f"[rig] {msg}", flush=True), include_learned=False)
    if not template.is_file():
        pytest.skip(f"{template} is not in the pinned llama.cpp sources")
    args = server_args(RIG_CONFIGS["baseline"], assets, "{port}", threads=2)
    args += ["--chat-template-file", str(template), "--reasoning-format", request.param]
    with served([ServerCommand("thinking", tuple(args))], tmp_path_factory.mktemp("thinking")) as servers:
        yield servers["thinking"].base_url + "/v1"


def _run(folder: Path, base_url: str, stream: bool) -> Path:
    config = make_project(folder, base_url, n=3, target_extra="stream = true" if stream else "")
    plan = plan_run(load_config(config), "base", "echo", max_tokens=24)
    return asyncio.run(execute(plan)).folder


@pytest.mark.parametrize("thinking_server", ["deepseek"], indirect=True)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_split_reasoning_from_a_real_server_is_stored_as_reasoning(
    thinking_server: str, stream: bool, tmp_path: Path
) -> None:
    results = open_run(_run(tmp_path, thinking_server, stream)).results()
    assert len(results) == 3
    for result in results.values():
        c = result.completion
        assert c.reasoning and c.answer == "" and c.truncated_in_reasoning
        assert len(c.tokens) == 24 and c.token_level == "ids"  # every generated token kept for the diff


@pytest.mark.parametrize("thinking_server", ["none"], indirect=True)
def test_unsplit_output_from_a_real_server_passes_every_check(thinking_server: str, tmp_path: Path) -> None:
    results = open_run(_run(tmp_path, thinking_server, stream=False)).results()
    assert len(results) == 3
    for result in results.values():
        c = result.completion
        assert c.text and len(c.tokens) == 24 and c.truncated
