"""SGLang's OpenAI routes: greedy top_k and whatever token data they return."""

from __future__ import annotations

from typing import Any

from evalsuite.engines.base import Engine
from evalsuite.records import GenerationParams


class SGLangEngine(Engine):
    dialect = "sglang"

    def extra_fields(self, params: GenerationParams) -> dict[str, Any]:
        return {"top_k": params.top_k} if params.top_k is not None else {}

    async def probe(self) -> dict[str, Any]:
        info = await super().probe()
        server = await self._get_json(f"{self.server_root}/get_server_info")
        if isinstance(server, dict):
            keys = (
                "version",
                "model_path",
                "speculative_algorithm",
                "speculative_num_steps",
                "speculative_eagle_topk",
                "speculative_num_draft_tokens",
                "enable_deterministic_inference",
            )
            info["server_args"] = {k: server[k] for k in keys if k in server}
        return info
