"""The committed DFlash drafter against the learned target, in the real llama-server.

It must draft for real (acceptance >= 50 %, several tokens per verification),
stay lossless, and draft exactly what llama.cpp's graph as written in
`rigbuild.dflash_graph` predicts: the server's per-request draft and
acceptance counts are compared with a replay of its draft/verify loop in torch
(skipped where torch is not installed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from evalsuite.rig.assets import RigAssets
from evalsuite.rig.committed import LEARNED_DFLASH, LEARNED_MODEL, verify_learned_checksum
from evalsuite.rig.launcher import RunningServer, serve_with_assets
from rigbuild.dflash_train import DraftExample, eog_ids, fixture_messages, greedy_examples

pytestmark = pytest.mark.rig

MESSAGES = fixture_messages()[::6]  # a dozen problems across the three tasks
MAX_TOKENS = 384


@pytest.fixture(scope="module")
def dflash_servers(
    rig_assets: RigAssets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, RunningServer]]:
    names = ["learned-baseline", "learned-dflash"]
    with serve_with_assets(names, rig_assets, log_dir=tmp_path_factory.mktemp("dflash-logs"), threads=1) as running:
        yield running


def _ask(client: httpx.Client, url: str, messages: list[dict[str, str]]) -> dict[str, Any]:
    body = {
        "messages": messages,
        "max_tokens": MAX_TOKENS,
        "temperature": 0.0,
        "seed": 42,
        "top_k": 1,
        "cache_prompt": False,
        "logprobs": True,
        "top_logprobs": 2,
    }
    response = client.post(url + "/v1/chat/completions", json=body)
    response.raise_for_status()
    return response.json()


@pytest.fixture(scope="module")
def replies(dflash_servers: dict[str, RunningServer], rig_http: httpx.Client) -> dict[str, list[dict[str, Any]]]:
    return {name: [_ask(rig_http, s.base_url, m) for m in MESSAGES] for name, s in dflash_servers.items()}


def _ids(reply: dict[str, Any]) -> list[int]:
    return [int(t["id"]) for t in reply["choices"][0]["logprobs"]["content"]]


def test_committed_drafter_matches_its_checksum(rig_assets: RigAssets) -> None:
    assert rig_assets.models["learned-dflash"] == LEARNED_DFLASH
    assert verify_learned_checksum(LEARNED_DFLASH)
    assert LEARNED_DFLASH.stat().st_size < 8 << 20


def test_dflash_is_lossless_against_the_learned_target(replies: dict[str, list[dict[str, Any]]]) -> None:
    for i, (base, spec) in enumerate(zip(replies["learned-baseline"], replies["learned-dflash"])):
        assert _ids(spec) == _ids(base), f"prompt {i}: DFlash changed the learned target's output"


def test_dflash_really_drafts(replies: dict[str, list[dict[str, Any]]]) -> None:
    timings = [r["timings"] for r in replies["learned-dflash"]]
    drafted = sum(t["draft_n"] for t in timings)
    accepted = sum(t["draft_n_accepted"] for t in timings)
    predicted = sum(t["predicted_n"] for t in timings)
    assert drafted > 0 and accepted / drafted >= 0.5, f"accepted {accepted}/{drafted}"
    assert predicted / (predicted - accepted) >= 2.0, f"tau {predicted / (predicted - accepted):.2f}"


def test_server_drafts_what_the_torch_graph_predicts(
    dflash_servers: dict[str, RunningServer], replies: dict[str, list[dict[str, Any]]]
) -> None:
    torch = pytest.importorskip("torch")
    from evalsuite.rig.gguf_file import read_model, read_vocab_file
    from rigbuild.dflash_graph import DrafterShape, simulate_acceptance, target_features

    _, tshape, target = read_model(LEARNED_MODEL)
    _, dshape_raw, drafter = read_model(LEARNED_DFLASH)
    import gguf

    reader = gguf.GGUFReader(LEARNED_DFLASH)
    layers = tuple(int(x) for x in reader.fields["dflash.target_layers"].contents())
    mask_id = int(reader.fields["tokenizer.ggml.mask_token_id"].contents())
    n_draft = int(reader.fields["dflash.block_size"].contents()) - 1
    dshape = DrafterShape(dshape_raw.n_embd, dshape_raw.n_layer, dshape_raw.n_head, dshape_raw.n_ff, n_draft, layers)
    params = {k: torch.from_numpy(v.copy()) for k, v in drafter.items()}
    embd = torch.from_numpy(target["token_embd.weight"].copy())
    eog = eog_ids(read_vocab_file(LEARNED_DFLASH))
    examples: list[DraftExample] = greedy_examples(dflash_servers["learned-baseline"].base_url, MESSAGES, MAX_TOKENS)
    exact = 0
    for ex, reply in zip(examples, replies["learned-dflash"]):
        feats = target_features(target, tshape, ex.tokens, layers)
        replay = simulate_acceptance(params, dshape, feats, ex.tokens, ex.start, mask_id, embd, embd, eog=eog)
        server = reply["timings"]
        exact += (replay.drafted, replay.accepted) == (server["draft_n"], server["draft_n_accepted"])
        print(
            f"drafted/accepted: replay {replay.drafted}/{replay.accepted}, "
            f"server {server['draft_n']}/{server['draft_n_accepted']}"
        )
    assert exact >= len(examples) - 1, f"only {exact}/{len(examples)} prompts replayed exactly"
