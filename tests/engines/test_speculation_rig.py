"""A real speculative llama-server: the engine class reads its draft counts, the speed summary uses them.

The rig's `draft` configuration (target plus a draft model) serves three
samples; every stored response carries llama.cpp's own `timings`, and the
figures `evalsuite.speed` derives must be exactly the ones
`LlamaCppEngine.request_speculation` reads from those timings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from projects import make_project

from evalsuite.config import load_config
from evalsuite.engines import engine_class, request_speculation
from evalsuite.rig.launcher import serve
from evalsuite.runner import execute, plan_run
from evalsuite.speed import speed_summary
from evalsuite.store import open_run

pytestmark = pytest.mark.rig


@pytest.fixture(scope="module")
def draft_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log_dir = tmp_path_factory.mktemp("draft")
    with serve(
        ["draft"], threads=2, log_dir=log_dir, progress=lambda msg: print(f"[rig] {msg}", flush=True)
    ) as servers:
        yield servers["draft"].base_url + "/v1"


def test_real_draft_counts_are_read_by_the_engine_class(draft_server: str, tmp_path: Path) -> None:
    config = make_project(tmp_path, draft_server, n=3)
    folder = asyncio.run(execute(plan_run(load_config(config), "base", "echo", max_tokens=48))).folder
    store = open_run(folder)
    completions = [r.completion for r in store.results().values()]
    read = [engine_class("llamacpp").request_speculation(c) for c in completions]
    assert len(read) == 3 and all(s is not None and s.drafted is not None for s in read)
    assert all(s == request_speculation(c) for s, c in zip(read, completions))  # unnamed: the same reader answers
    drafted = sum(int(c.timings["draft_n"]) for c in completions)
    accepted = sum(int(c.timings["draft_n_accepted"]) for c in completions)
    assert drafted > 0 and accepted > 0
    speed = speed_summary(store)
    assert (speed.draft_n, speed.draft_accepted) == (drafted, accepted)
    assert speed.acceptance_rate == pytest.approx(accepted / drafted)
