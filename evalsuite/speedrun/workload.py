"""Workloads of the speed run: prompts at controlled input lengths cut from real task text, and the tasks' prompts.

Input lengths are counted in the served model's tokens: the task texts
(fixture problems, solutions and questions, not filler) are tokenized once
by the server (`/tokenize`, llama.cpp and vLLM), and each prompt is a window
of that token stream turned back into text (`/detokenize`), shifted per
repetition and per concurrent slot so no two requests share a prefix.  The
chat template's own tokens are measured once and subtracted, and the
longest length is capped at what one slot's context holds (llama.cpp
`/props` n_ctx, vLLM `max_model_len`) after the output.  Without a
tokenizer route, four characters per token is the estimate and the figures
report the real prompt lengths the server counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from evalsuite.errors import ConfigError

INSTRUCTION = "Continue the following collection of problems and solutions in the same style.\n\n"
CHARS_PER_TOKEN = 4
CONTEXT_MARGIN = 8
"""Tokens left free in the context besides the output (BOS and rounding of the detokenized window)."""


@dataclass(frozen=True)
class ServerInfo:
    """What the speed run needs to know about one endpoint."""

    n_ctx: int | None
    slots: int | None
    tokenizer: str | None  # "llamacpp" | "vllm" | None

    def describe(self) -> str:
        ctx = f"context {self.n_ctx} tokens per slot" if self.n_ctx else "context not reported"
        slots = f"{self.slots} slot(s)" if self.slots else "slots not reported"
        return f"{ctx}, {slots}"


async def server_info(client: httpx.AsyncClient, root: str, engine: str) -> ServerInfo:
    """Context per slot, slot count and tokenizer route, from llama.cpp `/props` or vLLM `/v1/models`."""

    async def get(path: str) -> Any:
        try:
            resp = await client.get(root + path, timeout=10.0)
            return resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    if engine == "llamacpp":
        props = await get("/props") or {}
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
        slots = props.get("total_slots")
        return ServerInfo(
            n_ctx if isinstance(n_ctx, int) else None, slots if isinstance(slots, int) else None, "llamacpp"
        )
    if engine in ("vllm", "sglang"):
        models = await get("/v1/models") or {}
        lens = [m.get("max_model_len") for m in models.get("data", []) if isinstance(m, dict)]
        n_ctx = next((v for v in lens if isinstance(v, int)), None)
        return ServerInfo(n_ctx, None, "vllm")
    return ServerInfo(None, None, None)


class Tokenizer:
    """The server's own tokenizer over HTTP; the character estimate when the server has none."""

    def __init__(self, client: httpx.AsyncClient, root: str, kind: str | None, model: str):
        self.client, self.root, self.kind, self.model = client, root, kind, model

    async def encode(self, text: str) -> list[int] | None:
        if self.kind is None:
            return None
        body = {"content": text} if self.kind == "llamacpp" else {"prompt": text, "model": self.model}
        try:
            resp = await self.client.post(self.root + "/tokenize", json=body, timeout=60.0)
            tokens = resp.json().get("tokens") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        return [int(t) for t in tokens] if isinstance(tokens, list) else None

    async def decode(self, tokens: Sequence[int]) -> str:
        body: dict[str, Any] = {"tokens": list(tokens)}
        if self.kind != "llamacpp":
            body["model"] = self.model
        resp = await self.client.post(self.root + "/detokenize", json=body, timeout=60.0)
        resp.raise_for_status()
        data = resp.json()
        return str(data.get("content", data.get("prompt", "")))


@dataclass(frozen=True)
class Prompt:
    """One request's prompt in a workload."""

    workload: str
    input_tokens: int  # the nominal length (0 for the tasks workload)
    text: str
    fixed_output: bool


def cap_lengths(lengths: Sequence[int], n_ctx: int | None, output_tokens: int) -> tuple[list[int], str | None]:
    """Lengths that fit one slot's context with the output; the cap replaces those that do not (once)."""
    if n_ctx is None:
        return sorted(set(lengths)), None
    room = n_ctx - output_tokens - CONTEXT_MARGIN
    if room < 16:
        raise ConfigError(
            f"The server's context ({n_ctx} tokens per slot) leaves no room for prompts with "
            f"--output-tokens {output_tokens}; lower --output-tokens."
        )
    fit = sorted({n for n in lengths if n <= room})
    dropped = sorted(n for n in set(lengths) if n > room)
    note = None
    if dropped:
        fit = sorted(set(fit) | {room})
        note = (
            f"input lengths {', '.join(map(str, dropped))} do not fit the server's context of {n_ctx} tokens "
            f"per slot with {output_tokens} output tokens; measured up to {room} instead"
        )
    return fit, note


class PromptMaker:
    """Cuts windows of a token stream of real text into prompts of a given length."""

    def __init__(self, tokenizer: Tokenizer, corpus: str):
        self.tokenizer, self.corpus = tokenizer, corpus
        self.tokens: list[int] | None = None
        self.overhead = 0

    async def prepare(self) -> None:
        self.tokens = await self.tokenizer.encode(self.corpus)

    def calibrate(self, content_tokens: int, prompt_tokens: int) -> None:
        """Template and instruction tokens: what the server counted beyond a window of known length."""
        if prompt_tokens > content_tokens:
            self.overhead = prompt_tokens - content_tokens

    async def window(self, length: int, offset: int) -> tuple[str, int]:
        """(text, window tokens) for a prompt of `length` tokens in all, from `offset` in the stream, wrapping."""
        body = max(length - self.overhead, 1)
        if self.tokens:
            start = offset % len(self.tokens)
            picked = [self.tokens[(start + i) % len(self.tokens)] for i in range(body)]
            return INSTRUCTION + await self.tokenizer.decode(picked), body
        chars = body * CHARS_PER_TOKEN
        start = (offset * CHARS_PER_TOKEN) % max(len(self.corpus), 1)
        repeated = self.corpus * (2 + chars // max(len(self.corpus), 1))
        return INSTRUCTION + repeated[start : start + chars], body


async def length_prompts(
    maker: PromptMaker, lengths: Sequence[int], reps: int, slots: int
) -> dict[tuple[int, int, int], Prompt]:
    """Prompts by (length, rep, slot): a different window of the text for every repetition and slot."""
    out: dict[tuple[int, int, int], Prompt] = {}
    for length in lengths:
        for rep in range(reps):
            for slot in range(slots):
                offset = 7919 * (rep * 8 + slot) + 104729 * length
                text, _ = await maker.window(length, offset)
                out[(length, rep, slot)] = Prompt(f"in-{length}", length, text, True)
    return out
