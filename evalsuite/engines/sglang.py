"""SGLang's OpenAI routes: greedy top_k, whatever token data they return, and the mean accepted length."""

from __future__ import annotations

from typing import Any

from evalsuite.engines.base import Engine
from evalsuite.engines.speculation import Speculation, number
from evalsuite.records import Completion, GenerationParams


class SGLangEngine(Engine):
    """SGLang's OpenAI server; speculative decoding shows only as each response's mean accepted length."""

    name = "sglang"
    takes_ignore_eos = True

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

    @classmethod
    def request_speculation(cls, completion: Completion) -> Speculation | None:
        """`meta_info.spec_accept_length` of one response (no draft counts: SGLang reports none)."""
        extra = completion.engine_extra
        meta = extra.get("meta_info") if isinstance(extra, dict) else None
        length = number(meta.get("spec_accept_length")) if isinstance(meta, dict) else None
        if length is None:
            return None
        return Speculation("SGLang meta_info.spec_accept_length", mean_accepted_length=length)
