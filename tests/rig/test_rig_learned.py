"""The committed learned model, served by the real llama-server: it answers as trained.

A few fixture problems (right and wrong ones, both tasks) keep this quick; the
bench script grades all 65 (`bench/rig_speed.py --accuracy`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from evalsuite.rig.assets import RigAssets
from evalsuite.rig.committed import verify_learned_checksum
from evalsuite.rig.launcher import RunningServer, serve_with_assets
from rigbuild.learned import LearnedItem, is_correct, learned_items

pytestmark = pytest.mark.rig


def _pick() -> list[LearnedItem]:
    items = learned_items()
    chosen: list[LearnedItem] = []
    for task in ("math500", "gsm8k"):
        for correct in (True, False):
            chosen += [i for i in items if i.sample.task == task and i.correct == correct][:2]
    return chosen


ITEMS = _pick()


@pytest.fixture(scope="module")
def learned_servers(
    rig_assets: RigAssets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, RunningServer]]:
    names = ["learned-baseline", "learned-draft"]
    with serve_with_assets(names, rig_assets, log_dir=tmp_path_factory.mktemp("rig-logs"), threads=1) as running:
        yield running


def _ask(client: httpx.Client, server: RunningServer, item: LearnedItem) -> dict[str, Any]:
    body = {
        "messages": list(item.sample.messages),
        "max_tokens": 700,
        "temperature": 0.0,
        "seed": 42,
        "cache_prompt": False,
        "logprobs": True,
        "top_logprobs": 2,
    }
    response = client.post(server.base_url + "/v1/chat/completions", json=body)
    response.raise_for_status()
    return response.json()


@pytest.fixture(scope="module")
def answers(learned_servers: dict[str, RunningServer], rig_http: httpx.Client) -> dict[str, list[dict[str, Any]]]:
    return {name: [_ask(rig_http, server, item) for item in ITEMS] for name, server in learned_servers.items()}


def test_committed_learned_model_matches_its_checksum(rig_assets: RigAssets) -> None:
    assert verify_learned_checksum(rig_assets.models["learned"])


def test_learned_model_reproduces_its_trained_answers(answers: dict[str, list[dict[str, Any]]]) -> None:
    for item, response in zip(ITEMS, answers["learned-baseline"]):
        choice = response["choices"][0]
        assert choice["finish_reason"] == "stop", item.sample.id
        assert choice["message"]["content"].strip() == item.answer.strip(), item.sample.id
        assert is_correct(item, choice["message"]["content"]) == item.correct, item.sample.id


def test_learned_draft_is_lossless_and_accepts(answers: dict[str, list[dict[str, Any]]]) -> None:
    drafted = accepted = 0
    for base, spec in zip(answers["learned-baseline"], answers["learned-draft"]):
        base_ids = [e["id"] for e in base["choices"][0]["logprobs"]["content"]]
        spec_ids = [e["id"] for e in spec["choices"][0]["logprobs"]["content"]]
        assert base_ids == spec_ids
        drafted += spec["timings"]["draft_n"]
        accepted += spec["timings"]["draft_n_accepted"]
    assert drafted > 0 and accepted / drafted > 0.5
