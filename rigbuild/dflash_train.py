"""Train a DFlash drafter (torch, CPU) against a Qwen3-layout rig target, and write it as GGUF.

The training forward pass is `dflash_graph.block_logits`, llama.cpp's DFlash
graph; the data are the target's own greedy continuations (for the learned
target: its trained answers, which it reproduces token for token).  Every
answer position n is an anchor: the block `[token_n, mask * n_draft]` must
predict tokens n+1 .. n+n_draft from the target features of positions < n.

The drafter shares the target's embeddings and output head (it ships neither),
so its width is the target's.  The mask token must be one whose embedding is
not zero: in the learned target every token absent from its training data has
a zero embedding row, and a zero input would give every mask position the same
(zero) query.  `<|assistant|>` is used: always present in prompts, never in
answers, so it never appears as an anchor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalsuite.rig.gguf_file import Vocab
from rigbuild.dflash_graph import Acceptance, DrafterShape, block_logits, require_torch, simulate_acceptance

MASK_TOKEN = "<|assistant|>"


@dataclass(frozen=True)
class DFlashTrainConfig:
    """Drafter size and optimisation settings; the committed checksum depends on them."""

    n_layer: int = 2
    n_head: int = 4
    n_ff: int = 512
    n_draft: int = 4
    target_layers: tuple[int, ...] = (0, 1)
    max_epochs: int = 40
    lr: float = 3e-3
    seed: int = 0
    threads: int = 1
    """One thread: on a shared 2-core machine torch's second thread mostly waits (measured 10x slower)."""
    eval_every: int = 5
    stop_acceptance: float = 0.80
    """Stop once the replayed server loop accepts this share of drafted tokens."""


@dataclass(frozen=True)
class DraftExample:
    """One greedy target sequence: `tokens[:start]` is the prompt, the rest what the target generates."""

    tokens: list[int]
    start: int


def init_drafter(dshape: DrafterShape, n_inp: int, gen: object) -> dict[str, Any]:  # torch (optional) tensors
    torch = require_torch()
    d, hd, ff = dshape.n_embd, dshape.head_dim, dshape.n_ff

    def param(*size: int, std: float) -> object:
        return torch.nn.Parameter(torch.randn(*size, generator=gen) * std)

    def ones(n: int, value: float = 1.0) -> object:
        return torch.nn.Parameter(torch.full((n,), value))

    params: dict[str, object] = {
        "fc.weight": param(d, n_inp, std=n_inp**-0.5),
        "enc.output_norm.weight": ones(d),
        "output_norm.weight": ones(d, 0.1),
    }
    for i in range(dshape.n_layer):
        p = f"blk.{i}."
        params |= {
            p + "attn_norm.weight": ones(d),
            p + "attn_q.weight": param(dshape.n_head * hd, d, std=d**-0.5),
            p + "attn_k.weight": param(dshape.n_head * hd, d, std=d**-0.5),
            p + "attn_v.weight": param(dshape.n_head * hd, d, std=d**-0.5),
            p + "attn_output.weight": param(d, dshape.n_head * hd, std=0.5 * (dshape.n_head * hd) ** -0.5),
            p + "attn_q_norm.weight": ones(hd),
            p + "attn_k_norm.weight": ones(hd),
            p + "ffn_norm.weight": ones(d),
            p + "ffn_gate.weight": param(ff, d, std=d**-0.5),
            p + "ffn_up.weight": param(ff, d, std=d**-0.5),
            p + "ffn_down.weight": param(d, ff, std=0.5 * ff**-0.5),
        }
    return params


EOG_TOKENS = ("<|end|>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>")


def eog_ids(vocab: Vocab) -> frozenset[int]:
    """End-of-generation ids of a rig vocabulary: its EOS and the end-of-turn tokens it has."""
    return frozenset({vocab.eos_id} | {i for i, t in enumerate(vocab.tokens) if t in EOG_TOKENS})


def train_drafter(
    examples: Sequence[DraftExample],
    features: Sequence[Any],  # torch tensors (torch is optional, so not named in types)
    embd: np.ndarray,
    mask_id: int,
    config: DFlashTrainConfig = DFlashTrainConfig(),
    progress: Callable[[str], None] = print,
    eog: frozenset[int] = frozenset(),
) -> tuple[dict[str, np.ndarray], Acceptance]:
    """Fit the drafter; return its tensors (GGUF names, f32) and its replayed acceptance on the examples.

    `features[i]` are the target features of `examples[i].tokens`
    (`dflash_graph.target_features`); `embd` the target's token embeddings,
    which are also its output head (tied, as in the rig's Qwen3 targets).
    """
    torch = require_torch()
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    gen = torch.Generator().manual_seed(config.seed)
    full = torch.from_numpy(np.ascontiguousarray(embd, dtype=np.float32))
    used = sorted({t for ex in examples for t in ex.tokens} | {mask_id})
    local = {tok: i for i, tok in enumerate(used)}
    rows = torch.tensor(used)
    head = full[rows]
    other_logit = math.log(max(full.shape[0] - len(used), 1))  # unused rows score exactly 0
    dshape = DrafterShape(
        n_embd=full.shape[1],
        n_layer=config.n_layer,
        n_head=config.n_head,
        n_ff=config.n_ff,
        n_draft=config.n_draft,
        target_layers=tuple(config.target_layers),
    )
    params = init_drafter(dshape, int(features[0].shape[1]), gen)
    optim = torch.optim.Adam(params.values(), lr=config.lr)

    batches = []
    for ex, feats in zip(examples, features):
        ids = torch.tensor(ex.tokens)
        anchors = torch.arange(ex.start, len(ex.tokens) - 1)
        block = torch.full((len(anchors), dshape.block_size), mask_id)
        block[:, 0] = ids[anchors]
        where = anchors[:, None] + torch.arange(1, dshape.block_size)[None, :]
        target = torch.full(where.shape, -100)
        ok = where < len(ex.tokens)
        target[ok] = torch.tensor([local[int(t)] for t in ids[where[ok]]])
        batches.append((feats, block, anchors, target))

    def replay() -> Acceptance:
        return Acceptance.total(
            simulate_acceptance(params, dshape, f, ex.tokens, ex.start, mask_id, full, head, rows, eog)
            for ex, f in zip(examples, features)
        )

    rng = np.random.default_rng(config.seed)
    result = Acceptance(0, 0, 0)
    for epoch in range(1, config.max_epochs + 1):
        lr = config.lr * min(1.0, epoch / 5) * (0.5 * (1 + math.cos(math.pi * epoch / config.max_epochs)) * 0.9 + 0.1)
        for group in optim.param_groups:
            group["lr"] = lr
        total = 0.0
        for b in rng.permutation(len(batches)):
            feats, block, anchors, target = batches[b]
            logits = block_logits(params, dshape, feats, block, anchors, full, head)[:, 1:]
            logits = torch.cat([logits, torch.full((*logits.shape[:-1], 1), other_logit)], dim=-1)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
            optim.zero_grad()
            loss.backward()
            optim.step()
            total += float(loss.detach())
        if epoch % config.eval_every == 0 or epoch == config.max_epochs:
            result = replay()
            progress(
                f"  epoch {epoch}: loss {total / len(batches):.4f}, replayed acceptance {result.rate:.1%}, "
                f"tokens per verification {result.tau:.2f}"
            )
            if result.rate >= config.stop_acceptance:
                break
    arrays = {name: p.detach().numpy().astype(np.float32) for name, p in params.items()}
    return arrays, result


def write_drafter(
    out: Path, arrays: dict[str, np.ndarray], config: DFlashTrainConfig, target: Path, mask_id: int
) -> None:
    """The drafter as the GGUF `src/models/dflash.cpp` loads (no embeddings or head: the target's are shared)."""
    from evalsuite.rig.gguf_file import Shape, Tensors, read_model, read_vocab_file, write_gguf

    _, tshape, _ = read_model(target)
    shape = Shape(
        n_vocab=tshape.n_vocab,
        n_embd=tshape.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        n_head_kv=config.n_head,
        n_ff=config.n_ff,
        rope_base=10000.0,
        rms_eps=1e-6,
    )
    tensors = Tensors()
    for name, array in arrays.items():
        tensors.add(name, array, "F32")
    write_gguf(
        out,
        arch="dflash",
        name="rig-learned-dflash",
        shape=shape,
        tensors=tensors,
        vocab=read_vocab_file(target),
        extra={
            "dflash.block_size": config.n_draft + 1,
            "dflash.target_layers": [int(x) for x in config.target_layers],
            "tokenizer.ggml.mask_token_id": mask_id,
        },
    )


FIXTURE_TASKS = ("math500", "gsm8k", "livecodebench")
GREEDY_MAX_TOKENS = 384
"""The demo targets' cap (evalsuite.toml); drafts past it are never verified."""


def fixture_messages() -> list[list[dict[str, str]]]:
    """The chat messages of every fixture problem of the packaged tasks, exactly as `eval` sends them."""
    from evalsuite.tasks.build import packaged_fixture

    return [list(sample.messages) for task in FIXTURE_TASKS for sample in packaged_fixture(task)[1]]


def greedy_examples(
    base_url: str, messages: Sequence[list[dict[str, str]]], max_tokens: int = GREEDY_MAX_TOKENS
) -> list[DraftExample]:
    """The target's own greedy sequences from a live server: prompt ids as the chat endpoint builds them,
    then the ids it generates (what a drafter must predict)."""
    import httpx

    examples: list[DraftExample] = []
    with httpx.Client(base_url=base_url, timeout=600.0) as client:
        for msgs in messages:
            prompt = client.post("/apply-template", json={"messages": msgs}).json()["prompt"]
            ids = client.post("/tokenize", json={"content": prompt, "add_special": True, "parse_special": True})
            body = {
                "messages": msgs,
                "max_tokens": max_tokens,
                "temperature": 0.0,
                "seed": 42,
                "top_k": 1,
                "cache_prompt": False,
                "logprobs": True,
                "top_logprobs": 1,
            }
            reply = client.post("/v1/chat/completions", json=body).json()
            out = [int(t["id"]) for t in reply["choices"][0]["logprobs"]["content"]]
            prompt_ids = ids.json()["tokens"]
            examples.append(DraftExample(prompt_ids + out, len(prompt_ids)))
    return examples


def retrain_learned_dflash(out: Path, progress: Callable[[str], None] = print) -> tuple[str, Acceptance]:
    """Train the DFlash drafter against the learned target into `out`; its sha256 and replayed acceptance."""
    from evalsuite.rig.assets import ensure_assets
    from evalsuite.rig.committed import LEARNED_MODEL, sha256_of
    from evalsuite.rig.gguf_file import read_model, read_vocab_file
    from evalsuite.rig.launcher import serve_with_assets
    from rigbuild.dflash_graph import target_features

    assets = ensure_assets(progress)
    # one thread: llama.cpp's threads spin at barriers, and on a busy 2-core machine two of them crawl
    with serve_with_assets(["learned-baseline"], assets, threads=1) as servers:
        examples = greedy_examples(servers["learned-baseline"].base_url, fixture_messages())
    config = DFlashTrainConfig()
    _, shape, arrays = read_model(LEARNED_MODEL)
    vocab = read_vocab_file(LEARNED_MODEL)
    mask_id = vocab.token_id(MASK_TOKEN)
    features = [target_features(arrays, shape, ex.tokens, config.target_layers) for ex in examples]
    n_tokens = sum(len(ex.tokens) - ex.start for ex in examples)
    progress(f"Training the DFlash drafter on {len(examples)} greedy sequences ({n_tokens} generated tokens).")
    weights, acceptance = train_drafter(
        examples, features, arrays["token_embd.weight"], mask_id, config, progress, eog_ids(vocab)
    )
    write_drafter(out, weights, config, LEARNED_MODEL, mask_id)
    return sha256_of(out), acceptance
