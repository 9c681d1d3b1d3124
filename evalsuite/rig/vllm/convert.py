"""Turn a llama-architecture GGUF into Hugging Face safetensors folders that vLLM loads.

Run by the vLLM environment's own Python (it has torch, transformers and
gguf; evalsuite is not installed there), so this file imports nothing of
evalsuite.  `transformers` dequantizes the GGUF once; each requested variant
is the same weights copied into a model built from the config without its
quantization settings, saved as float32 safetensors with the tokenizer and
chat template beside it.  A variant may keep only the first `layers` blocks
(a smaller draft model sharing the vocabulary and the head) or round every
block matrix to `bits`-bit integers per row (other weights than the
baseline's: a lossy twin).  The output is deterministic: the same GGUF gives
the same bytes.

usage: python convert.py GGUF '[{"out": DIR, "layers": 8}, {"out": DIR2, "bits": 4}, ...]'
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _round_rows(weight: Any, bits: int) -> Any:
    """Symmetric round-to-nearest per output row: what a crude weight quantizer does."""
    import torch

    levels = 2 ** (bits - 1) - 1
    scale = weight.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / levels
    return (torch.round(weight / scale).clamp(-levels, levels) * scale).to(weight.dtype)


def convert(gguf: Path, variants: list[dict[str, Any]]) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    source = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    full = source.state_dict()
    for variant in variants:
        layers, bits = variant.get("layers"), variant.get("bits")
        config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        if hasattr(config, "quantization_config"):
            delattr(config, "quantization_config")
        state = dict(full)
        if layers is not None:
            config.num_hidden_layers = layers
            state = {
                k: v for k, v in state.items() if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers
            }
        if bits is not None:
            state = {
                k: _round_rows(v, bits) if k.startswith("model.layers.") and v.ndim == 2 else v
                for k, v in state.items()
            }
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.endswith("lm_head.weight")]  # tied to the embeddings
        if missing or unexpected:
            raise SystemExit(f"weights do not fit the config: missing {missing[:5]}, unexpected {unexpected[:5]}")
        out = Path(variant["out"])
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(out), safe_serialization=True)
        tokenizer.save_pretrained(str(out))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    convert(Path(argv[0]).resolve(), json.loads(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
