"""A llama.cpp DFlash drafter (GGUF, architecture `dflash`) as the checkpoint folder vLLM's DFlash loads.

vLLM 0.32 reads DFlash drafters in the z-lab layout: `config.json`, a Qwen3
config with `"architectures": ["DFlashDraftModel"]` and a `dflash_config`
(mask token, target layers), beside `model.safetensors` holding the draft
body only (`fc`, `hidden_norm`, `layers.*`, `norm`).  The token embeddings
and the output head are not written: vLLM shares the target's, as llama.cpp
does.  So the suite can serve the same drafter on both engines and compare
them on the same target.

Two conventions differ between the engines:

- Target layers.  llama.cpp's `dflash.target_layers` name the *inputs* of
  target blocks (0 is the token embeddings).  vLLM captures aux hidden state
  i as the output of block i - 1 (the input of block i) and reads a
  `target_layer_ids` entry j as aux state j + 1, so the exported ids are the
  llama.cpp layers minus one (and layer 0 has no vLLM equivalent).
- Block size.  vLLM ignores `block_size`; the number of drafted tokens is
  the server's `num_speculative_tokens` (the rig passes block_size - 1).

RoPE needs no change: llama.cpp's DFlash graph rotates NEOX-style (halves)
and so does vLLM's DFlash attention, so q and k are copied unpermuted.
Weights are written as float32 (the GGUF's f16 matrices widen exactly), in
name order, so the same GGUF always gives the same bytes.  Runs in the
suite's own Python: numpy and `gguf` only, safetensors written by hand.  The
target is the Hugging Face folder vLLM serves (its config.json), not the GGUF:
reading a GGUF means parsing its 49k-token vocabulary.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalsuite.rig.errors import RigError
from evalsuite.rig.gguf_file import Shape, model_of, require_gguf

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
EXPORT_FORMAT = 1
"""Raised whenever the files exported from the same GGUF would change: rig folders made before are redone."""
TOP_TENSORS = {
    "fc.weight": "fc.weight",
    "enc.output_norm.weight": "hidden_norm.weight",
    "output_norm.weight": "norm.weight",
}
"""llama.cpp name -> vLLM name, outside the blocks."""
BLOCK_TENSORS = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
"""llama.cpp name -> vLLM name inside block N (`blk.N.` -> `layers.N.`)."""


def vllm_tensor_name(name: str) -> str:
    """The vLLM checkpoint name of one drafter tensor of the GGUF."""
    if name in TOP_TENSORS:
        return TOP_TENSORS[name]
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in BLOCK_TENSORS:
        return f"layers.{parts[1]}.{BLOCK_TENSORS[parts[2]]}"
    raise RigError(f"The DFlash drafter has a tensor '{name}' that vLLM's DFlash model has no place for.")


@dataclass(frozen=True)
class Drafter:
    """What the GGUF holds: its shape (as `gguf_file.read_model` reads it, so the torch replay and vLLM see the
    same numbers), its DFlash keys, and its tensors as float32 arrays (torch layout: [out, in])."""

    shape: Shape
    arrays: dict[str, np.ndarray]
    block_size: int
    target_layers: tuple[int, ...]  # llama.cpp's numbering: the input of block N is layer N
    mask_id: int


def read_drafter(path: Path) -> Drafter:
    """One pass of `gguf`'s reader over a DFlash drafter."""
    reader = require_gguf().GGUFReader(path)
    arch = reader.fields["general.architecture"].contents()
    if arch != "dflash":
        raise RigError(f"{path} is a '{arch}' GGUF, not a llama.cpp DFlash drafter.")
    _, shape, arrays = model_of(reader)

    def key(name: str) -> Any:
        return reader.fields[name].contents()

    layers = tuple(int(x) for x in key("dflash.target_layers"))
    return Drafter(shape, arrays, int(key("dflash.block_size")), layers, int(key("tokenizer.ggml.mask_token_id")))


def dflash_config(drafter: Drafter, target: dict[str, Any]) -> dict[str, Any]:
    """The `config.json` vLLM reads for `drafter`, next to the served target's Hugging Face config `target`.

    The drafter's shape, RoPE base, norm epsilon, mask token and target
    layers come from its GGUF; the block count comes from
    the target, whose width and vocabulary must be the drafter's (it reads
    the target's hidden states and shares its embeddings and head).
    """
    shape, layers = drafter.shape, list(drafter.target_layers)
    n_embd, n_vocab = shape.n_embd, shape.n_vocab
    target_blocks = int(target["num_hidden_layers"])
    if (n_embd, n_vocab) != (int(target["hidden_size"]), int(target["vocab_size"])):
        raise RigError(
            f"The DFlash drafter is {n_embd} wide with {n_vocab} tokens; its target is "
            f"{target['hidden_size']} wide with {target['vocab_size']}: they are not a pair."
        )
    outside = [layer for layer in layers if not 1 <= layer <= target_blocks]
    if outside:
        raise RigError(
            f"The DFlash drafter reads target layer(s) {outside}; vLLM captures the outputs of blocks 0 .. "
            f"{target_blocks - 1} (llama.cpp layers 1 .. {target_blocks}), not the embeddings."
        )
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "hidden_size": n_embd,
        "intermediate_size": shape.n_ff,
        "num_hidden_layers": shape.n_layer,
        "num_attention_heads": shape.n_head,
        "num_key_value_heads": shape.n_head_kv,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": shape.rms_eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": shape.rope_base},
        "max_position_embeddings": shape.n_ctx,
        "vocab_size": n_vocab,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
        "dtype": "float32",
        "block_size": drafter.block_size,
        "num_target_layers": target_blocks,
        "dflash_config": {
            "mask_token_id": drafter.mask_id,
            "target_layer_ids": [layer - 1 for layer in layers],
        },
    }


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """Float32 tensors as a safetensors file, in name order (the format: a length, a JSON index, the bytes)."""
    index: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name in sorted(tensors):
        size = tensors[name].size * 4
        index[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + size]}
        offset += size
    header = json.dumps(index, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(header)))
        fh.write(header)
        for name in sorted(tensors):
            fh.write(np.ascontiguousarray(tensors[name], dtype="<f4").tobytes())


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The float32 tensors of a safetensors file (what `write_safetensors` writes)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    index = json.loads(data[8 : 8 + length])
    index.pop("__metadata__", None)
    body = 8 + length
    out: dict[str, np.ndarray] = {}
    for name, entry in index.items():
        if entry["dtype"] != "F32":
            raise RigError(f"{path}: tensor {name} is {entry['dtype']}; only F32 is read here.")
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[body + begin : body + end], dtype="<f4").reshape(entry["shape"])
    return out


def export_dflash(drafter_gguf: Path, target: Path, out: Path) -> None:
    """Write `out/config.json` and `out/model.safetensors` for the drafter, served beside the folder `target`.

    Then every tensor is read back from the written file and compared with
    the GGUF's, value for value: a folder that passes holds the drafter.
    """
    drafter = read_drafter(drafter_gguf)
    config = dflash_config(drafter, json.loads((target / CONFIG).read_text()))
    tensors = {vllm_tensor_name(name): array for name, array in drafter.arrays.items()}
    head_dim = config["head_dim"]
    for name, array in tensors.items():
        if name.endswith(("q_norm.weight", "k_norm.weight")) and array.shape != (head_dim,):
            raise RigError(f"{drafter_gguf}: {name} has shape {array.shape}; vLLM's per-head norm needs ({head_dim},).")
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / WEIGHTS, tensors)
    (out / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    written = read_safetensors(out / WEIGHTS)
    wrong = [n for n in tensors if n not in written or not np.array_equal(written[n], tensors[n])]
    if wrong or len(written) != len(tensors):
        raise RigError(f"{out / WEIGHTS} does not read back as {drafter_gguf}: {wrong[:3] or 'extra tensors'}.")
