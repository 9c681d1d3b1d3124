"""llama.cpp `llama-server`: deterministic request fields, /props provenance, slot warning, draft counts."""

from __future__ import annotations

import logging
from typing import Any

from evalsuite.engines.base import Engine
from evalsuite.engines.speculation import Speculation, number
from evalsuite.records import Completion, GenerationParams

log = logging.getLogger(__name__)

_PROVENANCE_PARAMS = ("speculative", "n_ctx", "samplers")


class LlamaCppEngine(Engine):
    """llama-server's OpenAI routes; entries carry token ids, `timings` carry draft counts."""

    name = "llamacpp"
    takes_ignore_eos = True

    def extra_fields(self, params: GenerationParams) -> dict[str, Any]:
        # cache_prompt reuses KV from earlier requests, which changes batch shapes and so logits.
        fields: dict[str, Any] = {"cache_prompt": False}
        if params.top_k is not None:
            fields["top_k"] = params.top_k
        return fields

    async def probe(self) -> dict[str, Any]:
        info = await super().probe()
        props = await self._get_json(f"{self.server_root}/props")
        if isinstance(props, dict):
            info["build_info"] = props.get("build_info")
            info["model_path"] = props.get("model_path")
            info["total_slots"] = props.get("total_slots")
            info["chat_template_sha"] = _short_hash(props.get("chat_template") or "")
            params = (props.get("default_generation_settings") or {}).get("params") or {}
            info["server_params"] = {k: v for k, v in params.items() if k.startswith(_PROVENANCE_PARAMS)}
            slots = props.get("total_slots")
            if isinstance(slots, int) and slots > 1:
                info.setdefault("warnings", []).append(
                    f"llama-server at {self.server_root} has {slots} parallel slots; concurrent requests share "
                    "batches, which changes logits. Start it with --parallel 1 for comparisons."
                )
        models = self.models_document  # read once, by the base probe
        if isinstance(models, dict):
            metas = [m.get("meta") for m in models.get("data", []) if isinstance(m, dict) and m.get("meta")]
            if metas:
                info["model_meta"] = metas[0]
                n_vocab = metas[0].get("n_vocab") if isinstance(metas[0], dict) else None
                if type(n_vocab) is int and n_vocab > 0:
                    self.vocab_size = n_vocab
        return info

    @classmethod
    def request_speculation(cls, completion: Completion) -> Speculation | None:
        """`timings.draft_n` / `draft_n_accepted` over `predicted_n` tokens, as llama-server reports each request."""
        t = completion.timings
        drafted, accepted, predicted = (
            number(t.get("draft_n")),
            number(t.get("draft_n_accepted")),
            number(t.get("predicted_n")),
        )
        if drafted is None or accepted is None:
            return None
        return Speculation(
            "llama.cpp timings",
            drafted=int(drafted),
            accepted=int(accepted),
            predicted=int(predicted) if predicted is not None else None,
        )


def _short_hash(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:16]
