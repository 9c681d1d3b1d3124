"""Deterministic generators for the rig's constructed GGUF models.

The target is built to be *confident*, not flat noise: its unembedding is a
permutation of its embedding over ordinary text tokens, so the residual
stream of token x points at one successor token with a margin of many nats;
small random attention and MLP blocks then bend that walk by context, so the
text depends on the prompt and the top-1 is sometimes contested.  From it:

- `draft`: the target's first block only, with the same embeddings and head.
  It agrees with the target wherever the later blocks do not change the
  top-1, so draft acceptance is real, nonzero and below 100 %.
- `quant`: the target with every matrix requantized to Q4_0, compared against
  the full-precision target (lossy by construction).
- `dflash`: a one-block DFlash drafter laid out as `src/models/dflash.cpp`
  loads it (feature fusion `fc`, `enc.output_norm`, Qwen3 blocks with q/k
  norms, `dflash.target_layers`, `dflash.block_size`, a mask token), sharing
  the target's embeddings and head.  Its weights are random, so it exercises
  the real DFlash code path rather than predicting well.
- `mtp`: the target's blocks in the Qwen3.5 layout with a NextN block, the
  only kind of model this llama.cpp runs `draft-mtp` with (see `mtp_tensors`).

Every file name carries GENERATOR_VERSION; changing a construction bumps it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from evalsuite.rig.gguf_file import MASK_TOKEN, Shape, Tensors, Vocab, read_vocab, write_gguf

GENERATOR_VERSION = "v1"
SEED = 20240601
LOGIT_SCALE = 0.25
"""output_norm gain: a token's successor scores ~LOGIT_SCALE * n_embd = 32 nats above an unrelated token on average."""
BLOCK_SCALE = 1.1
"""Size of each block's contribution relative to the token's own embedding; tuned so a 1-block draft agrees ~90 % and the median top-2 margin is ~3 nats."""
DFLASH_BLOCK_SIZE = 8
DFLASH_TARGET_LAYERS = (1, 3)
"""Target layers whose *inputs* feed the DFlash drafter (llama.cpp's extract-layer convention)."""


@dataclass(frozen=True)
class ModelFiles:
    """Paths of the generated models in the cache."""

    target: Path
    draft: Path
    quant: Path
    dflash: Path
    mtp: Path

    def as_dict(self) -> dict[str, Path]:
        return {"target": self.target, "draft": self.draft, "quant": self.quant, "dflash": self.dflash, "mtp": self.mtp}


def _normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> np.ndarray:
    return (rng.standard_normal(shape) * std).astype(np.float32)


def _block(rng: np.random.Generator, shape: Shape, i: int, out_std: float) -> dict[str, np.ndarray]:
    """One Qwen3 block with unit norms, random projections and outputs scaled by out_std."""
    d, hd, ff = shape.n_embd, shape.head_dim, shape.n_ff
    return {
        f"blk.{i}.attn_norm.weight": np.ones(d, np.float32),
        f"blk.{i}.attn_q.weight": _normal(rng, (shape.n_head * hd, d), d**-0.5),
        f"blk.{i}.attn_k.weight": _normal(rng, (shape.n_head_kv * hd, d), d**-0.5),
        f"blk.{i}.attn_v.weight": _normal(rng, (shape.n_head_kv * hd, d), d**-0.5),
        f"blk.{i}.attn_output.weight": _normal(rng, (d, shape.n_head * hd), out_std * (shape.n_head * hd) ** -0.5),
        f"blk.{i}.attn_q_norm.weight": np.full(hd, 2.0, np.float32),
        f"blk.{i}.attn_k_norm.weight": np.full(hd, 2.0, np.float32),
        f"blk.{i}.ffn_norm.weight": np.ones(d, np.float32),
        f"blk.{i}.ffn_gate.weight": _normal(rng, (ff, d), d**-0.5),
        f"blk.{i}.ffn_up.weight": _normal(rng, (ff, d), d**-0.5),
        f"blk.{i}.ffn_down.weight": _normal(rng, (d, ff), out_std * ff**-0.5),
    }


def target_tensors(vocab: Vocab, shape: Shape, seed: int = SEED) -> dict[str, np.ndarray]:
    """The confident target's weights (see the module docstring)."""
    rng = np.random.default_rng(seed)
    d = shape.n_embd
    embd = rng.standard_normal((shape.n_vocab, d))
    embd *= np.sqrt(d) / np.linalg.norm(embd, axis=1, keepdims=True)
    walk = vocab.normal_ids()
    head = np.zeros_like(embd)
    head[walk] = embd[rng.permutation(walk)]  # token y scores high after x when successor(x) = y
    out: dict[str, np.ndarray] = {
        "token_embd.weight": embd.astype(np.float32),
        "output.weight": head.astype(np.float32),
        "output_norm.weight": np.full(d, LOGIT_SCALE, np.float32),
    }
    for i in range(shape.n_layer):
        out.update(_block(rng, shape, i, BLOCK_SCALE))
    return out


def _tensors(arrays: dict[str, np.ndarray], matrix_type: str) -> Tensors:
    """Matrices as `matrix_type` (embeddings and head at least F16), vectors as F32."""
    tensors = Tensors()
    for name, array in arrays.items():
        if array.ndim == 1:
            tensors.add(name, array, "F32")
        elif name in ("token_embd.weight", "output.weight") and matrix_type == "F32":
            tensors.add(name, array, "F16")
        else:
            tensors.add(name, array, matrix_type)
    return tensors


def dflash_tensors(shape: Shape, seed: int = SEED + 1) -> dict[str, np.ndarray]:
    """A one-block DFlash drafter; embeddings and head come from the target at run time."""
    rng = np.random.default_rng(seed)
    d = shape.n_embd
    n_inp = len(DFLASH_TARGET_LAYERS) * d
    out: dict[str, np.ndarray] = {
        "fc.weight": _normal(rng, (d, n_inp), n_inp**-0.5),
        "enc.output_norm.weight": np.ones(d, np.float32),
        "output_norm.weight": np.full(d, LOGIT_SCALE, np.float32),
    }
    for i in range(shape.n_layer):
        out.update(_block(rng, shape, i, BLOCK_SCALE))
    return out


MTP_SSM = {"conv_kernel": 4, "state_size": 32, "group_count": 2, "time_step_rank": 4}


def mtp_tensors(target: dict[str, np.ndarray], shape: Shape, seed: int = SEED + 2) -> dict[str, np.ndarray]:
    """The target's blocks in the Qwen3.5 layout plus one NextN (MTP) block.

    Layer 0 is a gated-delta-net (recurrent) layer with zero outputs: this
    llama.cpp's Qwen3.5 hybrid memory needs at least one recurrent layer.
    Layers 1..n take the target's blocks; Qwen3.5 attention has an output gate
    (Q projection twice as wide), set to sigmoid(0) = 0.5 and undone by a
    doubled output projection.  The graphs still differ (M-RoPE, the gated
    path), so this model is compared against itself without speculation
    (`mtp-baseline`), not against `baseline`.  The NextN block passes the next
    token's embedding through (eh_proj = [I | 0], zero block outputs), so it
    predicts that token's successor, the walk the target mostly follows.
    """
    rng = np.random.default_rng(seed)
    d, hd, n = shape.n_embd, shape.head_dim, shape.n_layer
    key_dim = MTP_SSM["state_size"] * MTP_SSM["group_count"]
    value_dim = MTP_SSM["state_size"] * MTP_SSM["time_step_rank"]
    heads = MTP_SSM["time_step_rank"]
    out = {k: v for k, v in target.items() if not k.startswith("blk.")}
    out |= {
        "blk.0.attn_norm.weight": np.ones(d, np.float32),
        "blk.0.post_attention_norm.weight": np.ones(d, np.float32),
        "blk.0.attn_qkv.weight": _normal(rng, (2 * key_dim + value_dim, d), d**-0.5),
        "blk.0.attn_gate.weight": _normal(rng, (value_dim, d), d**-0.5),
        "blk.0.ssm_conv1d.weight": _normal(rng, (2 * key_dim + value_dim, MTP_SSM["conv_kernel"]), 0.5),
        "blk.0.ssm_dt.bias": np.zeros(heads, np.float32),
        "blk.0.ssm_a": -np.ones(heads, np.float32),
        "blk.0.ssm_beta.weight": _normal(rng, (heads, d), d**-0.5),
        "blk.0.ssm_alpha.weight": _normal(rng, (heads, d), d**-0.5),
        "blk.0.ssm_norm.weight": np.ones(MTP_SSM["state_size"], np.float32),
        "blk.0.ssm_out.weight": np.zeros((d, value_dim), np.float32),
        "blk.0.ffn_gate.weight": _normal(rng, (shape.n_ff, d), d**-0.5),
        "blk.0.ffn_up.weight": _normal(rng, (shape.n_ff, d), d**-0.5),
        "blk.0.ffn_down.weight": np.zeros((d, shape.n_ff), np.float32),
    }
    for i in range(1, n + 2):
        src = min(i - 1, n - 1)
        w = {k.split(".", 2)[2]: v for k, v in target.items() if k.startswith(f"blk.{src}.")}
        q = w["attn_q.weight"].reshape(shape.n_head, hd, d)
        out[f"blk.{i}.attn_q.weight"] = np.concatenate([q, np.zeros_like(q)], axis=1).reshape(-1, d)
        for name in ("attn_norm", "attn_k", "attn_v", "attn_q_norm", "attn_k_norm", "ffn_gate", "ffn_up"):
            out[f"blk.{i}.{name}.weight"] = w[f"{name}.weight"]
        out[f"blk.{i}.post_attention_norm.weight"] = w["ffn_norm.weight"]
        out[f"blk.{i}.attn_output.weight"] = 2.0 * w["attn_output.weight"]
        out[f"blk.{i}.ffn_down.weight"] = w["ffn_down.weight"]
    m = n + 1
    out[f"blk.{m}.attn_output.weight"] = np.zeros_like(out[f"blk.{m}.attn_output.weight"])
    out[f"blk.{m}.ffn_down.weight"] = np.zeros_like(out[f"blk.{m}.ffn_down.weight"])
    out[f"blk.{m}.nextn.eh_proj.weight"] = np.concatenate([np.eye(d), np.zeros((d, d))], axis=1).astype(np.float32)
    out[f"blk.{m}.nextn.enorm.weight"] = np.ones(d, np.float32)
    out[f"blk.{m}.nextn.hnorm.weight"] = np.ones(d, np.float32)
    return out


def _mtp_extra(shape: Shape) -> dict[str, object]:
    hd = shape.head_dim
    return {
        "qwen35.nextn_predict_layers": 1,
        "qwen35.rope.dimension_count": hd,
        "qwen35.rope.dimension_sections": [hd // 2, 0, 0, 0],
        "qwen35.attention.recurrent_layers": [True] + [False] * (shape.n_layer + 1),
        "qwen35.ssm.conv_kernel": MTP_SSM["conv_kernel"],
        "qwen35.ssm.inner_size": MTP_SSM["state_size"] * MTP_SSM["time_step_rank"],
        "qwen35.ssm.state_size": MTP_SSM["state_size"],
        "qwen35.ssm.time_step_rank": MTP_SSM["time_step_rank"],
        "qwen35.ssm.group_count": MTP_SSM["group_count"],
    }


def generate_models(vocab_dir: Path, out_dir: Path, progress: Callable[[str], None] = print) -> ModelFiles:
    """Write (or reuse) the constructed models; a few seconds, bit-identical on every machine."""
    files = ModelFiles(
        target=out_dir / f"rig-target-{GENERATOR_VERSION}-f32.gguf",
        draft=out_dir / f"rig-draft-{GENERATOR_VERSION}-f32.gguf",
        quant=out_dir / f"rig-target-{GENERATOR_VERSION}-q4_0.gguf",
        dflash=out_dir / f"rig-dflash-{GENERATOR_VERSION}-f32.gguf",
        mtp=out_dir / f"rig-target-mtp-{GENERATOR_VERSION}-f32.gguf",
    )
    if all(p.is_file() for p in files.as_dict().values()):
        return files
    progress(f"Generating the rig's models into {out_dir}.")
    vocab = read_vocab(vocab_dir)
    shape = Shape(n_vocab=len(vocab))
    weights = target_tensors(vocab, shape)
    write_gguf(
        files.target, arch="qwen3", name="rig-target", shape=shape, tensors=_tensors(weights, "F32"), vocab=vocab
    )
    write_gguf(
        files.quant, arch="qwen3", name="rig-target-q4_0", shape=shape, tensors=_tensors(weights, "Q4_0"), vocab=vocab
    )
    write_gguf(
        files.mtp,
        arch="qwen35",
        name="rig-target-mtp",
        shape=replace(shape, n_layer=shape.n_layer + 2),
        tensors=_tensors(mtp_tensors(weights, shape), "F32"),
        vocab=vocab,
        extra=_mtp_extra(shape),
    )
    draft_shape = replace(shape, n_layer=1)
    draft = {k: v for k, v in weights.items() if not k.startswith("blk.") or k.startswith("blk.0.")}
    write_gguf(
        files.draft, arch="qwen3", name="rig-draft", shape=draft_shape, tensors=_tensors(draft, "F32"), vocab=vocab
    )
    dflash_shape = replace(shape, n_layer=1)
    write_gguf(
        files.dflash,
        arch="dflash",
        name="rig-dflash",
        shape=dflash_shape,
        tensors=_tensors(dflash_tensors(dflash_shape), "F32"),
        vocab=vocab,
        extra={
            "dflash.block_size": DFLASH_BLOCK_SIZE,
            "dflash.target_layers": [int(x) for x in DFLASH_TARGET_LAYERS],
            "tokenizer.ggml.mask_token_id": vocab.token_id(MASK_TOKEN),
        },
    )
    return files


def reference_logits(arrays: dict[str, np.ndarray], shape: Shape, token_ids: list[int] | np.ndarray) -> np.ndarray:
    """A plain numpy forward pass of a Qwen3-layout model: logits [n_tokens, n_vocab].

    Used to check the construction (confidence, draft agreement) without a
    server; it follows llama.cpp's Qwen3 graph (RMS norms, q/k norms, NEOX rope).
    """
    ids = np.asarray(token_ids, dtype=np.int64)
    n, hd = len(ids), shape.head_dim
    n_layer = sum(1 for k in arrays if k.endswith(".attn_q.weight"))

    def rms(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + shape.rms_eps) * w

    inv = shape.rope_base ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(n)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(x: np.ndarray) -> np.ndarray:
        a, b = x[..., : hd // 2], x[..., hd // 2 :]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

    h = arrays["token_embd.weight"][ids].astype(np.float64)
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(n_layer):
        w = {k.split(".", 2)[2]: v for k, v in arrays.items() if k.startswith(f"blk.{i}.")}
        x = rms(h, w["attn_norm.weight"])
        q = rope(rms((x @ w["attn_q.weight"].T).reshape(n, -1, hd), w["attn_q_norm.weight"]))
        k = rope(rms((x @ w["attn_k.weight"].T).reshape(n, -1, hd), w["attn_k_norm.weight"]))
        v = (x @ w["attn_v.weight"].T).reshape(n, -1, hd)
        rep = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attn = np.einsum("hqk,khd->qhd", scores / scores.sum(-1, keepdims=True), v).reshape(n, -1)
        h = h + attn @ w["attn_output.weight"].T
        x = rms(h, w["ffn_norm.weight"])
        gate = x @ w["ffn_gate.weight"].T
        h = h + ((gate / (1 + np.exp(-gate))) * (x @ w["ffn_up.weight"].T)) @ w["ffn_down.weight"].T
    head = arrays.get("output.weight", arrays["token_embd.weight"])
    return rms(h, arrays["output_norm.weight"]) @ head.T
