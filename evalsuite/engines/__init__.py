"""Engine adapters: one small class per server dialect behind `Engine.generate`."""

from __future__ import annotations

from evalsuite.config import TargetConfig
from evalsuite.engines.base import Engine
from evalsuite.engines.llamacpp import LlamaCppEngine
from evalsuite.engines.sglang import SGLangEngine
from evalsuite.engines.vllm import VLLMEngine

_DIALECTS: dict[str, type[Engine]] = {
    "openai": Engine,
    "llamacpp": LlamaCppEngine,
    "vllm": VLLMEngine,
    "sglang": SGLangEngine,
}


def make_engine(target: TargetConfig, *, base_url: str | None = None) -> Engine:
    """The adapter for a target's dialect (base_url overrides the config, e.g. for rig servers)."""
    return _DIALECTS[target.engine](target, base_url=base_url)


__all__ = ["Engine", "make_engine"]
