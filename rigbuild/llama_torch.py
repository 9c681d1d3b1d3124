"""A llama-architecture GGUF target (SmolLM2) in torch: greedy decoding that keeps the DFlash features.

DFlash drafts from the target's hidden states: the *inputs* of the target
layers named in `dflash.target_layers`, for every token the target has
processed (`res->t_layer_inp` in llama.cpp's `src/models/llama.cpp`).  A
drafter is trained on the target's own greedy continuations, so one pass
that generates greedily and keeps those layer inputs yields both the data
and the features; decoding many prompts in one batch keeps a CPU busy.

The weights are the GGUF's own (Q4_1 and Q8_0 dequantized by `gguf`), with
llama.cpp's conventions: the converter permuted Q and K for the NORM rotary
layout (adjacent pairs), K and V are rounded through f16 as the KV cache
stores them, and the output head is the token embedding (tied).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsuite.rig.gguf_file import Shape, read_model
from rigbuild.dflash_graph import f16, require_torch, rms


def rope_norm(x: Any, pos: Any, base: float) -> Any:
    """llama.cpp's NORM rotary embedding (adjacent pairs) of x [..., H, hd] at positions `pos` [...]."""
    torch = require_torch()
    hd = x.shape[-1]
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    ang = pos.to(torch.float32)[..., None, None] * inv
    cos, sin = ang.cos(), ang.sin()
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


@dataclass
class GreedySequence:
    """A prompt, the target's greedy continuation, and the features of every token but the last."""

    tokens: list[int]
    start: int
    features: Any  # torch.Tensor [len(tokens) - 1, len(layers) * n_embd], float16


class LlamaTarget:
    """The target's forward pass over a padded batch with a KV cache per layer."""

    def __init__(self, path: Path) -> None:
        """The llama GGUF at `path`, its weights in float32 (`gguf_file.read_model` dequantizes them)."""
        _, shape, arrays = read_model(path)
        self._load(shape, arrays)

    @classmethod
    def of(cls, shape: Shape, arrays: dict[str, Any]) -> LlamaTarget:
        """A target over weights already in memory (GGUF names, float32 arrays or tensors)."""
        target = cls.__new__(cls)
        target._load(shape, arrays)
        return target

    def _load(self, shape: Shape, arrays: dict[str, Any]) -> None:
        torch = require_torch()
        self.shape = shape
        self.w = {k: v if isinstance(v, torch.Tensor) else torch.from_numpy(v) for k, v in arrays.items()}
        self.embd = self.w["token_embd.weight"]
        self.head = self.w.get("output.weight", self.embd)

    def forward(self, ids: Any, pos: Any, cache: list[tuple[Any, Any]], layers: Sequence[int]) -> tuple[Any, list[Any]]:
        """Process `ids` [B, T] at positions `pos` [B, T] (written into the cache at those positions).

        Each row attends to its cache entries at positions <= its own; returns the
        next-token logits of the last column [B, V] and the inputs of `layers`.
        """
        torch = require_torch()
        s = self.shape
        hd, eps = s.head_dim, s.rms_eps
        n_b, n_t = ids.shape
        rep = s.n_head // s.n_head_kv
        h = self.embd[ids]
        rows = torch.arange(n_b)[:, None].expand(n_b, n_t)
        t_max = cache[0][0].shape[2]
        visible = torch.arange(t_max)[None, None, :] <= pos[:, :, None]  # [B, T, Tmax]
        bias = torch.where(visible, 0.0, float("-inf")).repeat(1, rep, 1)[:, None]  # [B, 1, rep * T, Tmax]
        taken: list[Any] = []
        for il in range(s.n_layer):
            if il in layers:
                taken.append(h)
            p = f"blk.{il}."
            x = rms(h, self.w[p + "attn_norm.weight"], eps)
            q = rope_norm((x @ self.w[p + "attn_q.weight"].T).view(n_b, n_t, s.n_head, hd), pos, s.rope_base)
            k = rope_norm((x @ self.w[p + "attn_k.weight"].T).view(n_b, n_t, s.n_head_kv, hd), pos, s.rope_base)
            v = (x @ self.w[p + "attn_v.weight"].T).view(n_b, n_t, s.n_head_kv, hd)
            ck, cv = cache[il]  # [B, G, Tmax, D]: attention reads them as matrices, without copies
            ck[rows, :, pos] = f16(k)
            cv[rows, :, pos] = f16(v)
            qg = q.view(n_b, n_t, s.n_head_kv, rep, hd).permute(0, 2, 3, 1, 4).reshape(n_b, s.n_head_kv, -1, hd)
            scores = (qg @ ck.transpose(-1, -2)) / hd**0.5 + bias
            out = (scores.softmax(-1) @ cv).view(n_b, s.n_head_kv, rep, n_t, hd)
            out = out.permute(0, 3, 1, 2, 4).reshape(n_b, n_t, -1)
            h = h + out @ self.w[p + "attn_output.weight"].T
            x = rms(h, self.w[p + "ffn_norm.weight"], eps)
            gate = x @ self.w[p + "ffn_gate.weight"].T
            h = (
                h
                + (torch.nn.functional.silu(gate) * (x @ self.w[p + "ffn_up.weight"].T))
                @ self.w[p + "ffn_down.weight"].T
            )
        logits = rms(h[:, -1], self.w["output_norm.weight"], eps) @ self.head.T
        return logits, taken

    def new_cache(self, n_b: int, t_max: int) -> list[tuple[Any, Any]]:
        torch = require_torch()
        s = self.shape
        return [
            (torch.zeros(n_b, s.n_head_kv, t_max, s.head_dim), torch.zeros(n_b, s.n_head_kv, t_max, s.head_dim))
            for _ in range(s.n_layer)
        ]

    def greedy(
        self,
        prompts: Sequence[Sequence[int]],
        layers: Sequence[int],
        max_tokens: int,
        eog: frozenset[int],
        slots: int = 64,
        progress: Callable[[str], None] = lambda _m: None,
    ) -> list[GreedySequence]:
        """Greedy continuations of `prompts`, decoded `slots` at a time.

        A slot whose sequence ends takes the next prompt at once (its stale cache
        entries lie beyond the new sequence's positions, so they stay masked),
        so every step runs a full batch until the last prompts.  Then the cache
        keeps only the live slots' rows: gathering them at every step copied
        the whole cache twice a step, and doubled the peak memory.
        """
        torch = require_torch()
        t_max = max(len(p) for p in prompts) + max_tokens
        cache = self.new_cache(min(slots, len(prompts)), t_max)
        tokens: list[list[int]] = [list(p) for p in prompts]
        feats: list[list[Any]] = [[] for _ in prompts]
        owner: list[int | None] = [None] * cache[0][0].shape[0]  # slot -> prompt index
        pending = iter(range(len(prompts)))
        done = 0

        def admit(slot: int) -> None:
            b = next(pending, None)
            owner[slot] = b
            if b is None:
                return
            view = [(k[slot : slot + 1], v[slot : slot + 1]) for k, v in cache]  # views: written in place
            ids = torch.tensor([tokens[b]])
            logits, taken = self.forward(ids, torch.arange(ids.shape[1])[None, :], view, layers)
            feats[b].append(torch.cat(taken, dim=-1)[0].half())
            tokens[b].append(int(logits[0].argmax()))

        def finished(b: int) -> bool:
            return tokens[b][-1] in eog or len(tokens[b]) - len(prompts[b]) >= max_tokens

        with torch.no_grad():
            for slot in range(len(owner)):
                admit(slot)
            while any(b is not None for b in owner):
                for slot, b in enumerate(owner):
                    while b is not None and finished(b):
                        done += 1
                        if done % 32 == 0:
                            progress(f"    {done} of {len(prompts)} sequences generated")
                        admit(slot)
                        b = owner[slot]
                live = [(slot, b) for slot, b in enumerate(owner) if b is not None]
                if not live:
                    break
                if len(live) < len(owner):  # every prompt is admitted: the finished slots' rows go, once
                    rows = torch.tensor([slot for slot, _ in live])
                    cache = [(k[rows], v[rows]) for k, v in cache]
                    owner = [b for _, b in live]
                    live = [(slot, b) for slot, (_, b) in enumerate(live)]
                pos = torch.tensor([[len(tokens[b]) - 1] for _, b in live])
                logits, taken = self.forward(torch.tensor([[tokens[b][-1]] for _, b in live]), pos, cache, layers)
                feat = torch.cat(taken, dim=-1)[:, 0].half()
                best = logits.argmax(-1).tolist()
                for j, (_, b) in enumerate(live):
                    feats[b].append(feat[j : j + 1])
                    tokens[b].append(int(best[j]))
        return [
            GreedySequence(tokens[b], len(prompts[b]), torch.cat(feats[b], dim=0)[: len(tokens[b]) - 1])
            for b in range(len(prompts))
        ]

    def features(
        self, sequences: Sequence[tuple[Sequence[int], int]], layers: Sequence[int], batch: int = 8
    ) -> list[GreedySequence]:
        """The features of (tokens, start) sequences already decoded, in one teacher-forced pass each.

        What `greedy` keeps, made again from its tokens (equal up to float rounding: the prompt and the
        answer are processed at once instead of token by token), in about half the time decoding takes.
        """
        torch = require_torch()
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i][0]))  # like lengths together: less padding
        out: dict[int, GreedySequence] = {}
        with torch.no_grad():
            for first in range(0, len(order), batch):
                rows = order[first : first + batch]
                group = [sequences[i] for i in rows]
                width = max(len(tokens) for tokens, _ in group)
                ids = torch.zeros(len(group), width, dtype=torch.long)  # padding follows each row: never seen
                for row, (tokens, _) in enumerate(group):
                    ids[row, : len(tokens)] = torch.tensor(list(tokens))
                pos = torch.arange(width)[None, :].expand(len(group), width)
                _, taken = self.forward(ids, pos, self.new_cache(len(group), width), layers)
                feats = torch.cat(taken, dim=-1).half()
                for row, (i, (tokens, start)) in enumerate(zip(rows, group)):
                    out[i] = GreedySequence(list(tokens), start, feats[row, : len(tokens) - 1].clone())
        return [out[i] for i in range(len(sequences))]
