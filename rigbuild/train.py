"""Train a small Qwen3-layout model (torch, CPU) to reproduce given answers to given prompts.

The forward pass is llama.cpp's Qwen3 graph (RMS norms, per-head q/k norms,
NEOX rope, SwiGLU, tied embeddings), so the weights load into llama-server
unchanged.  Only tokens that occur in the data get embedding rows; every other
row stays zero, so at inference those tokens score exactly 0, and training
accounts for them as one extra class worth log(number of unused tokens).
Training stops once every answer token is the greedy top-1 by a safety margin
(so f16 storage and ggml's numerics cannot flip it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from evalsuite.rig.gguf_file import Shape


@dataclass(frozen=True)
class TrainConfig:
    """Model size and optimisation settings; part of what the committed checksum depends on."""

    n_embd: int = 128
    n_layer: int = 2
    n_head: int = 4
    n_ff: int = 256
    max_epochs: int = 600
    batch_size: int = 8
    lr: float = 4e-3
    seed: int = 0
    threads: int = 2
    margin: float = 4.0
    eval_every: int = 10

    def shape(self, n_vocab: int) -> Shape:
        return Shape(
            n_vocab=n_vocab,
            n_embd=self.n_embd,
            n_layer=self.n_layer,
            n_head=self.n_head,
            n_head_kv=self.n_head,
            n_ff=self.n_ff,
        )


@dataclass(frozen=True)
class Sequence_:
    """One training example: prompt ids (context only) followed by answer ids (learned)."""

    prompt: list[int]
    answer: list[int]


def train(
    examples: Sequence[Sequence_],
    n_vocab: int,
    config: TrainConfig = TrainConfig(),
    progress: Callable[[str], None] = print,
) -> dict[str, np.ndarray]:
    """Fit the model and return its tensors in GGUF naming (full vocabulary, f32)."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        from evalsuite.rig.errors import RigError

        raise RigError("Retraining the learned model needs torch (CPU): pip install torch.") from None

    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    torch.use_deterministic_algorithms(True)
    shape = config.shape(n_vocab)
    d, hd, n_head = shape.n_embd, shape.head_dim, shape.n_head

    used = sorted({t for ex in examples for t in ex.prompt + ex.answer})
    local = {tok: i for i, tok in enumerate(used)}
    other_logit = math.log(max(n_vocab - len(used), 1))

    seqs = [[local[t] for t in ex.prompt + ex.answer] for ex in examples]
    starts = [len(ex.prompt) for ex in examples]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    batches = [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]

    def make_batch(idx: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        width = max(len(seqs[i]) for i in idx)
        ids = torch.zeros((len(idx), width), dtype=torch.long)
        targets = torch.full((len(idx), width), -100, dtype=torch.long)
        for row, i in enumerate(idx):
            seq = torch.tensor(seqs[i])
            ids[row, : len(seq)] = seq
            targets[row, starts[i] - 1 : len(seq) - 1] = seq[starts[i] :]
        return ids, targets, (targets >= 0)

    tensors = [make_batch(b) for b in batches]

    def param(*size: int, std: float) -> torch.nn.Parameter:
        return torch.nn.Parameter(torch.randn(*size) * std)

    params: dict[str, torch.nn.Parameter] = {
        "embd": param(len(used), d, std=1.0),
        "output_norm": torch.nn.Parameter(torch.full((d,), 0.1)),
    }
    for i in range(shape.n_layer):
        params |= {
            f"{i}.attn_norm": torch.nn.Parameter(torch.ones(d)),
            f"{i}.q": param(n_head * hd, d, std=d**-0.5),
            f"{i}.k": param(n_head * hd, d, std=d**-0.5),
            f"{i}.v": param(n_head * hd, d, std=d**-0.5),
            f"{i}.o": param(d, n_head * hd, std=0.5 * (n_head * hd) ** -0.5),
            f"{i}.q_norm": torch.nn.Parameter(torch.ones(hd)),
            f"{i}.k_norm": torch.nn.Parameter(torch.ones(hd)),
            f"{i}.ffn_norm": torch.nn.Parameter(torch.ones(d)),
            f"{i}.gate": param(shape.n_ff, d, std=d**-0.5),
            f"{i}.up": param(shape.n_ff, d, std=d**-0.5),
            f"{i}.down": param(d, shape.n_ff, std=0.5 * shape.n_ff**-0.5),
        }

    def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + shape.rms_eps) * w

    def rope(x: torch.Tensor) -> torch.Tensor:  # x: [B, H, T, hd], NEOX halves
        t = x.shape[2]
        inv = shape.rope_base ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)
        ang = torch.arange(t, dtype=torch.float32)[:, None] * inv[None, :]
        cos, sin = ang.cos(), ang.sin()
        a, b = x[..., : hd // 2], x[..., hd // 2 :]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)

    def logits_of(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logits at the masked (answer) positions only: the prompt is context, never a target."""
        bsz, t = ids.shape
        h = params["embd"][ids]
        for i in range(shape.n_layer):
            x = rms(h, params[f"{i}.attn_norm"])

            def heads(w: torch.Tensor, norm: torch.Tensor | None) -> torch.Tensor:
                y = (x @ w.T).view(bsz, t, n_head, hd)  # noqa: B023 (called within this iteration)
                return (rms(y, norm) if norm is not None else y).transpose(1, 2)

            q = rope(heads(params[f"{i}.q"], params[f"{i}.q_norm"]))
            k = rope(heads(params[f"{i}.k"], params[f"{i}.k_norm"]))
            v = heads(params[f"{i}.v"], None)
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + attn.transpose(1, 2).reshape(bsz, t, d) @ params[f"{i}.o"].T
            x = rms(h, params[f"{i}.ffn_norm"])
            h = h + (F.silu(x @ params[f"{i}.gate"].T) * (x @ params[f"{i}.up"].T)) @ params[f"{i}.down"].T
        out = rms(h[mask], params["output_norm"]) @ params["embd"].T
        other = torch.full((*out.shape[:-1], 1), other_logit)
        return torch.cat([out, other], dim=-1)  # last column: all unused tokens together

    optim = torch.optim.Adam(params.values(), lr=config.lr)
    rng = np.random.default_rng(config.seed)

    def evaluate() -> tuple[float, float]:
        correct = total = 0
        worst = math.inf
        with torch.no_grad():
            for ids, targets, mask in tensors:
                logits = logits_of(ids, mask)
                tgt = targets[mask]
                best_other = logits.clone()
                best_other[torch.arange(len(tgt)), tgt] = -math.inf
                best_other[:, -1] = 0.0  # one unused token scores 0, not log(count)
                gap = logits[torch.arange(len(tgt)), tgt] - best_other.max(-1).values
                correct += int((gap > 0).sum())
                total += len(tgt)
                worst = min(worst, float(gap.min()))
        return correct / total, worst

    for epoch in range(1, config.max_epochs + 1):
        lr = config.lr * min(1.0, epoch / 10)
        for group in optim.param_groups:
            group["lr"] = lr
        for b in rng.permutation(len(tensors)):
            ids, targets, mask = tensors[b]
            loss = F.cross_entropy(logits_of(ids, mask), targets[mask])
            optim.zero_grad()
            loss.backward()
            optim.step()
        if epoch % config.eval_every == 0 or epoch == config.max_epochs:
            acc, worst = evaluate()
            progress(
                f"  epoch {epoch}: loss {loss.item():.4f}, greedy token accuracy {acc:.4f}, worst margin {worst:.2f}"
            )
            if acc == 1.0 and worst >= config.margin:
                break

    embd = np.zeros((n_vocab, d), np.float32)
    embd[used] = params["embd"].detach().numpy()
    out: dict[str, np.ndarray] = {
        "token_embd.weight": embd,
        "output_norm.weight": params["output_norm"].detach().numpy(),
    }
    names = {
        "attn_norm": "attn_norm",
        "q": "attn_q",
        "k": "attn_k",
        "v": "attn_v",
        "o": "attn_output",
        "q_norm": "attn_q_norm",
        "k_norm": "attn_k_norm",
        "ffn_norm": "ffn_norm",
        "gate": "ffn_gate",
        "up": "ffn_up",
        "down": "ffn_down",
    }
    for key, value in params.items():
        if "." in key:
            layer, part = key.split(".")
            out[f"blk.{layer}.{names[part]}.weight"] = value.detach().numpy().astype(np.float32)
    return out
