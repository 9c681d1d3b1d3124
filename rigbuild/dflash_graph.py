"""llama.cpp's DFlash drafting graph, and the Qwen3 target features that feed it, in torch.

This is the forward pass `src/models/dflash.cpp` and `common/speculative.cpp`
(`draft-dflash`) run, written so that a drafter trained here loads into
llama-server unchanged and drafts what this code predicts:

- Target features: for every token the target has processed, the *inputs* of
  the target layers named in `dflash.target_layers` (the residual stream
  before that block; layer 0 is the token embedding), concatenated.
- Encoder (the KV injection): `g = rms_norm(fc @ features) * enc.output_norm`;
  in every drafter layer `K = rope(k_norm(wk @ g))` and `V = wv @ g` are written
  into the drafter's KV cache at the target token's position.  No attn_norm.
- Decoder (the noise block): tokens `[id_last, mask * n_draft]` at positions
  `n .. n + n_draft`, embedded with the target's embeddings; Qwen3 blocks whose
  attention is *non-causal* over the injected context (positions `< n`) and the
  whole block; the final `output_norm` and the target's output head.  Block
  position i >= 1 predicts the token at position n + i (no shift).
- The server reads the argmax at positions 1..n_draft as the draft (cut
  before the first position whose probability among the 10 best is under
  `--spec-draft-p-min`), keeps the longest prefix the target agrees with, and
  moves the anchor on by accepted + 1 tokens (`simulate_acceptance` replays
  exactly that).

K and V pass through f16 as in llama.cpp's default KV cache.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from evalsuite.rig.gguf_file import Shape

if TYPE_CHECKING:
    import torch

DRAFT_TOP_K = 10
"""Candidates llama.cpp's draft sampler keeps per block position; `--spec-draft-p-min` reads the best one's share of them."""


def require_torch() -> Any:
    """The torch module, or an error that says how to install it (CPU wheels are enough)."""
    try:
        import torch
    except ImportError:
        from evalsuite.rig.errors import RigError

        raise RigError("Training the DFlash drafter needs torch (CPU): pip install torch.") from None
    return torch


def rms(x: torch.Tensor, w: torch.Tensor | None, eps: float) -> torch.Tensor:
    """ggml_rms_norm followed by the weight (llama.cpp's LLM_NORM_RMS)."""
    torch = require_torch()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w


def rope(x: torch.Tensor, pos: torch.Tensor, base: float) -> torch.Tensor:
    """NEOX rotary embedding over the last dimension; `pos` broadcasts against x's leading dims (x: [..., H, hd])."""
    torch = require_torch()
    hd = x.shape[-1]
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    ang = pos.to(torch.float32)[..., None, None] * inv  # [..., 1, hd/2]
    cos, sin = ang.cos(), ang.sin()
    a, b = x[..., : hd // 2], x[..., hd // 2 :]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def f16(x: torch.Tensor) -> torch.Tensor:
    """Round through half precision, as the KV cache stores K and V."""
    return x.half().float()


def target_features(
    arrays: dict[str, np.ndarray], shape: Shape, ids: Sequence[int], layers: Sequence[int]
) -> torch.Tensor:
    """The Qwen3 target's inputs of `layers` for every token: [len(ids), len(layers) * n_embd]."""
    torch = require_torch()
    w = {k: torch.from_numpy(v) for k, v in arrays.items()}
    n, hd, eps = len(ids), shape.head_dim, shape.rms_eps
    pos = torch.arange(n)
    h = w["token_embd.weight"][torch.tensor(list(ids))]
    mask = torch.full((n, n), float("-inf")).triu(1)
    taken: dict[int, Any] = {}  # torch tensors; torch is imported lazily, so no static type here
    with torch.no_grad():
        for il in range(max(layers) + 1):
            taken[il] = h
            if il == max(layers):
                break
            p = f"blk.{il}."
            x = rms(h, w[p + "attn_norm.weight"], eps)
            q = rope(
                rms((x @ w[p + "attn_q.weight"].T).view(n, -1, hd), w[p + "attn_q_norm.weight"], eps),
                pos,
                shape.rope_base,
            )
            k = rope(
                rms((x @ w[p + "attn_k.weight"].T).view(n, -1, hd), w[p + "attn_k_norm.weight"], eps),
                pos,
                shape.rope_base,
            )
            v = (x @ w[p + "attn_v.weight"].T).view(n, -1, hd)
            rep = q.shape[1] // k.shape[1]
            k, v = f16(k).repeat_interleave(rep, 1), f16(v).repeat_interleave(rep, 1)
            att = (torch.einsum("qhd,khd->hqk", q, k) / hd**0.5 + mask).softmax(-1)
            h = h + torch.einsum("hqk,khd->qhd", att, v).reshape(n, -1) @ w[p + "attn_output.weight"].T
            x = rms(h, w[p + "ffn_norm.weight"], eps)
            gate = x @ w[p + "ffn_gate.weight"].T
            h = h + (torch.nn.functional.silu(gate) * (x @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
    return torch.cat([taken[il] for il in layers], dim=-1)


@dataclass(frozen=True)
class DrafterShape:
    """The drafter's hyperparameters (its width is the target's: embeddings and head are shared)."""

    n_embd: int
    n_layer: int
    n_head: int
    n_ff: int
    n_draft: int
    target_layers: tuple[int, ...]
    rope_base: float = 10000.0
    rms_eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def block_size(self) -> int:
        """`dflash.block_size`: the anchor plus the drafted positions."""
        return self.n_draft + 1


def block_logits(
    params: dict[str, torch.Tensor],
    dshape: DrafterShape,
    features: torch.Tensor,
    block_ids: torch.Tensor,
    anchors: torch.Tensor,
    embd: torch.Tensor,
    head: torch.Tensor,
) -> torch.Tensor:
    """Drafter logits for several noise blocks of one sequence: [A, block_size, n_head_rows].

    `features` [T, F] are the target features of the sequence's tokens;
    `block_ids` [A, B] the noise blocks (anchor token, then mask tokens);
    `anchors` [A] the anchor positions n (block a sees context positions < n_a);
    `embd` the (shared) token embeddings, `head` the output rows scored.
    Weights use GGUF names (`fc.weight`, `blk.0.attn_q.weight`, ...).
    """
    torch = require_torch()
    eps, hd, base = dshape.rms_eps, dshape.head_dim, dshape.rope_base
    n_ctx = features.shape[0]
    n_blocks, width = block_ids.shape
    g = rms(features @ params["fc.weight"].T, params["enc.output_norm.weight"], eps)
    ctx_pos = torch.arange(n_ctx)
    blk_pos = anchors[:, None] + torch.arange(width)[None, :]  # [A, B]
    ctx_mask = torch.where(ctx_pos[None, :] < anchors[:, None], 0.0, float("-inf"))  # [A, T]
    x = embd[block_ids]  # [A, B, d]
    for il in range(dshape.n_layer):
        p = f"blk.{il}."
        ck = f16(
            rope(
                rms((g @ params[p + "attn_k.weight"].T).view(n_ctx, -1, hd), params[p + "attn_k_norm.weight"], eps),
                ctx_pos,
                base,
            )
        )
        cv = f16((g @ params[p + "attn_v.weight"].T).view(n_ctx, -1, hd))
        xn = rms(x, params[p + "attn_norm.weight"], eps)
        q = rope(
            rms(
                (xn @ params[p + "attn_q.weight"].T).view(n_blocks, width, -1, hd),
                params[p + "attn_q_norm.weight"],
                eps,
            ),
            blk_pos,
            base,
        )
        k = f16(
            rope(
                rms(
                    (xn @ params[p + "attn_k.weight"].T).view(n_blocks, width, -1, hd),
                    params[p + "attn_k_norm.weight"],
                    eps,
                ),
                blk_pos,
                base,
            )
        )
        v = f16((xn @ params[p + "attn_v.weight"].T).view(n_blocks, width, -1, hd))
        rep = q.shape[2] // k.shape[2]
        ck, cv = ck.repeat_interleave(rep, 1), cv.repeat_interleave(rep, 1)
        k, v = k.repeat_interleave(rep, 2), v.repeat_interleave(rep, 2)
        s_ctx = torch.einsum("abhd,thd->ahbt", q, ck) / hd**0.5 + ctx_mask[:, None, None, :]
        s_blk = torch.einsum("abhd,achd->ahbc", q, k) / hd**0.5
        att = torch.cat([s_ctx, s_blk], dim=-1).softmax(-1)
        out = torch.einsum("ahbt,thd->abhd", att[..., :n_ctx], cv) + torch.einsum(
            "ahbc,achd->abhd", att[..., n_ctx:], v
        )
        x = x + out.reshape(n_blocks, width, -1) @ params[p + "attn_output.weight"].T
        xn = rms(x, params[p + "ffn_norm.weight"], eps)
        gate = xn @ params[p + "ffn_gate.weight"].T
        x = (
            x
            + (torch.nn.functional.silu(gate) * (xn @ params[p + "ffn_up.weight"].T)) @ params[p + "ffn_down.weight"].T
        )
    return rms(x, params["output_norm.weight"], eps) @ head.T


@dataclass(frozen=True)
class Acceptance:
    """What a greedy speculative loop with this drafter does on one sequence."""

    steps: int  # target verifications that carried a draft
    drafted: int
    accepted: int

    @classmethod
    def total(cls, runs: Iterable[Acceptance]) -> Acceptance:
        """The loop over several sequences: their counts added."""
        runs = list(runs)
        return cls(sum(r.steps for r in runs), sum(r.drafted for r in runs), sum(r.accepted for r in runs))

    @property
    def rate(self) -> float:
        """Share of drafted tokens accepted."""
        return self.accepted / max(self.drafted, 1)

    @property
    def tau(self) -> float:
        """Tokens per verification: the accepted drafts plus the target's own token."""
        return (self.accepted + self.steps) / max(self.steps, 1)


def simulate_acceptance(
    params: dict[str, torch.Tensor],
    dshape: DrafterShape,
    features: torch.Tensor,
    tokens: Sequence[int],
    start: int,
    mask_id: int,
    embd: torch.Tensor,
    head: torch.Tensor,
    rows: torch.Tensor | None = None,
    eog: Collection[int] = (),
    p_min: float = 0.0,
) -> Acceptance:
    """Replay llama-server's draft/verify loop over a known greedy continuation `tokens[start:]`.

    The anchor starts at the first generated token (position `start`); each
    step drafts n_draft tokens, accepts the longest prefix equal to the
    target's tokens, and moves the anchor past the accepted tokens and the
    target's own next token.  Drafting stops at the last token (end of turn).
    A block depends only on its anchor (the context is the target's own
    sequence), so every anchor's draft is computed in one batched pass.
    `rows` maps the rows of a reduced `head` to token ids; the tokens left
    out score exactly 0 (zero head rows), so a draft whose best row is
    negative is one of them (-1 here: it never matches).  `eog` are the
    end-of-generation ids (see `walk`); `p_min` is the server's
    `--spec-draft-p-min` (see `confident_prefix`).
    """
    torch = require_torch()
    ids = torch.tensor(list(tokens))
    anchors = torch.arange(start, len(tokens) - 1)
    if len(anchors) == 0:
        return Acceptance(0, 0, 0)
    block = torch.full((len(anchors), dshape.block_size), mask_id)
    block[:, 0] = ids[anchors]
    with torch.no_grad():
        logits = block_logits(params, dshape, features, block, anchors, embd, head)[:, 1:]
    top = logits.topk(min(DRAFT_TOP_K, logits.shape[-1]), dim=-1)
    best = top.indices[..., 0]
    if rows is not None:
        best = torch.where(top.values[..., 0] < 0, -1, rows[best])
    drafts = best.tolist()
    if p_min > 0:
        drafts = confident_prefix(drafts, torch.softmax(top.values, -1)[..., 0].tolist(), p_min)
    return walk(drafts, list(tokens), start, eog)


def confident_prefix(
    drafts: Sequence[Sequence[int]], confidence: Sequence[Sequence[float]], p_min: float
) -> list[list[int]]:
    """Each draft cut before its first token whose confidence is under `p_min`.

    llama.cpp's draft-dflash reads a block position's candidates through a top-10 sampler and stops
    the draft where the best one's probability among those 10 is under `--spec-draft-p-min`: fewer
    doubtful tokens for the target to verify, at the cost of the rare doubtful one it would have kept.
    """
    out = []
    for draft, conf in zip(drafts, confidence):
        n = next((i for i, p in enumerate(conf) if p < p_min), len(draft))
        out.append(list(draft[:n]))
    return out


def walk(drafts: Sequence[Sequence[int]], tokens: Sequence[int], start: int, eog: Collection[int] = ()) -> Acceptance:
    """The greedy verify loop over per-anchor drafts (`drafts[n - start]` is drafted at anchor n).

    As `common_sampler_sample_and_accept_n` does, a drafted end-of-generation
    token is not counted as accepted unless it is the block's last draft: the
    target's own sample then ends the sequence.
    """
    steps = drafted = accepted = 0
    n = start
    while n < len(tokens) - 1:
        draft = drafts[n - start]
        m = 0
        while m < len(draft) and n + 1 + m < len(tokens) and draft[m] == tokens[n + 1 + m]:
            if draft[m] in eog and m + 1 < len(draft):
                break
            m += 1
        steps, drafted, accepted = steps + 1, drafted + len(draft), accepted + m
        n += m + 1
    return Acceptance(steps, drafted, accepted)
