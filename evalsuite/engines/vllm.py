"""vLLM: token ids in responses, its version and model from the server, speculative counters from /metrics.

Token ids come from `return_token_ids` (a `token_ids` list beside the text
tokens).  `return_tokens_as_token_ids` is not asked for: it renders every
token, alternatives included, as "token_id:N", so reports would show ids
where a reader needs the text, and nothing that reads alternatives needs
their ids (margins are logprob gaps; ranks match the chosen token's text).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from evalsuite.engines.base import Engine
from evalsuite.engines.speculation import CounterSpeculation, number
from evalsuite.records import GenerationParams

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
_SPEC_COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED)
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+(?P<value>[-+0-9.eE]+|NaN)$")


def parse_counters(text: str, names: tuple[str, ...] = _SPEC_COUNTERS) -> dict[str, float]:
    """Sum each named counter over its label sets in a Prometheus text exposition."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if match is None:
            continue
        name = match["name"].removesuffix("_total")
        if name in names:
            totals[name] = totals.get(name, 0.0) + float(match["value"])
    return totals


class VLLMEngine(Engine):
    """vLLM's OpenAI server; acceptance comes from counter deltas around a run."""

    name = "vllm"
    takes_ignore_eos = True

    def extra_fields(self, params: GenerationParams) -> dict[str, Any]:
        fields: dict[str, Any] = {"return_token_ids": True}
        if params.top_k is not None:
            fields["top_k"] = params.top_k
        return fields

    async def probe(self) -> dict[str, Any]:
        """The base probe plus `/version` and what `/v1/models` says of the served model (root, max length)."""
        info = await super().probe()
        version = await self._get_json(f"{self.server_root}/version")
        if isinstance(version, dict) and isinstance(version.get("version"), str):
            info["version"] = version["version"]
        models = self.models_document
        if isinstance(models, dict):
            for entry in models.get("data") or []:
                if isinstance(entry, dict) and entry.get("id") == self.model:
                    meta = {k: entry.get(k) for k in ("root", "parent", "max_model_len") if entry.get(k) is not None}
                    if meta:
                        info["model_meta"] = meta
                    break
        return info

    async def run_stats(self) -> dict[str, float]:
        text = await self._get_text(f"{self.server_root}/metrics")
        return parse_counters(text) if text is not None else {}

    @classmethod
    def counter_speculation(cls, before: Mapping[str, Any], after: Mapping[str, Any]) -> CounterSpeculation | None:
        """After minus before of the spec_decode counters (a counter reset counts as zero, not negative)."""
        deltas: dict[str, float] = {}
        for counter in _SPEC_COUNTERS:
            start, end = number(before.get(counter)), number(after.get(counter))
            if start is not None and end is not None:
                deltas[counter] = max(0.0, end - start)
        if not deltas:
            return None
        return CounterSpeculation(
            "vLLM /metrics deltas",
            deltas.get(DRAFTS, 0.0),
            deltas.get(DRAFT_TOKENS, 0.0),
            deltas.get(ACCEPTED, 0.0),
        )
