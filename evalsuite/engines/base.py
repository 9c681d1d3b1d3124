"""The one async contract every engine adapter implements, over OpenAI-style routes.

`Engine.generate(sample, params) -> Completion` is all the runner needs.
Dialects differ only in the extra request fields they take, what they report
about themselves (`probe`) and where their speculative counters live
(`run_stats`), so they subclass this and override those three things.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from evalsuite.config import TargetConfig
from evalsuite.engines.parse import completion_from_chat
from evalsuite.engines.retry import RequestFailed, parse_retry_after
from evalsuite.records import Completion, GenerationParams, Sample


def classify(exc: Exception) -> RequestFailed:
    """Map a transport or parsing exception to a failure kind the retry policy understands."""
    if isinstance(exc, RequestFailed):
        return exc
    if isinstance(exc, httpx.TimeoutException):
        return RequestFailed("timeout", f"request timed out ({type(exc).__name__})")
    if isinstance(exc, (httpx.TransportError, ConnectionError)):
        return RequestFailed("connection", f"connection failed: {type(exc).__name__}: {exc}")
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError, ValueError, KeyError, TypeError)):
        return RequestFailed("malformed", f"unreadable response: {exc}")
    raise exc


def check_status(resp: httpx.Response) -> None:
    """Raise the classified failure for a non-2xx answer (its body must already be read)."""
    status = resp.status_code
    if status < 300:
        return
    body = resp.text[:300]
    if status == 429:
        retry_after = parse_retry_after(resp.headers.get("retry-after"))
        raise RequestFailed("rate_limit", f"HTTP 429: {body}", status=status, retry_after=retry_after)
    if status >= 500:
        retry_after = parse_retry_after(resp.headers.get("retry-after"))
        raise RequestFailed("server", f"HTTP {status}: {body}", status=status, retry_after=retry_after)
    raise RequestFailed("fatal", f"HTTP {status}: {body}", status=status)


class Engine:
    """A plain OpenAI-compatible endpoint: text always, token data when it returns logprobs.

    Requests go straight through one pooled httpx client: against a fast local
    server the openai SDK's per-request machinery cost more CPU than the rest
    of the pipeline together (bench/overhead.py), and nothing here needs its
    typed models.
    """

    dialect = "openai"

    def __init__(self, target: TargetConfig, *, base_url: str | None = None):
        self.target = target
        self.base_url = (base_url or target.base_url or "").rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        key = target.api_key()
        self.http = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {key}"} if key else {},
            timeout=httpx.Timeout(target.timeout_s, connect=min(10.0, target.timeout_s)),
            limits=httpx.Limits(max_connections=target.concurrency, max_keepalive_connections=target.concurrency),
        )
        self.model = target.model or ""

    @property
    def server_root(self) -> str:
        return self.base_url[: -len("/v1")]

    def extra_fields(self, params: GenerationParams) -> dict[str, Any]:
        """Non-standard request fields this dialect needs for determinism and token data."""
        return {}

    def request_body(self, sample: Sample, params: GenerationParams) -> dict[str, Any]:
        """The JSON body for one sample, target extras last so a user can override anything."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": params.seed,
            "n": params.n,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if self.target.api == "chat":
            body["messages"] = [dict(m) for m in sample.messages]
            if params.top_logprobs:
                body["logprobs"] = True
                body["top_logprobs"] = params.top_logprobs
        else:
            body["prompt"] = sample.prompt_text
            if params.top_logprobs:
                body["logprobs"] = params.top_logprobs
        body.update(self.extra_fields(params))
        body.update(self.target.extra)
        return body

    async def generate(self, sample: Sample, params: GenerationParams) -> Completion:
        """One attempt; raises RequestFailed with a kind the retry policy can act on."""
        body = self.request_body(sample, params)
        url = self.base_url + ("/chat/completions" if self.target.api == "chat" else "/completions")
        start = time.perf_counter()
        try:
            if self.target.stream:
                return await self._generate_stream(url, body, start)
            resp = await self.http.post(url, json=body)
            check_status(resp)
            data = json.loads(resp.content)
            return completion_from_chat(data, latency_s=time.perf_counter() - start, ttft_s=_server_ttft(data))
        except Exception as exc:  # classify() re-raises anything that is not a request failure
            raise classify(exc) from exc

    async def _generate_stream(self, url: str, body: dict[str, Any], start: float) -> Completion:
        from evalsuite.engines.stream import merge_chunks

        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        chunks: list[dict[str, Any]] = []
        ttft: float | None = None
        async with self.http.stream("POST", url, json=body) as resp:
            if resp.status_code >= 300:
                await resp.aread()
                check_status(resp)
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                chunk = json.loads(payload)
                if ttft is None and chunk.get("choices"):
                    ttft = time.perf_counter() - start
                chunks.append(chunk)
        return completion_from_chat(merge_chunks(chunks), latency_s=time.perf_counter() - start, ttft_s=ttft)

    async def probe(self) -> dict[str, Any]:
        """What this endpoint says about itself, for the run's provenance and fingerprint."""
        info: dict[str, Any] = {"dialect": self.dialect, "base_url": self.base_url}
        models = await self._get_json(f"{self.base_url}/models")
        if isinstance(models, dict):
            ids = [m.get("id") for m in models.get("data", []) if isinstance(m, dict)]
            info["models"] = ids
            if not self.model and ids:
                self.model = ids[0]
        info["model"] = self.model
        return info

    async def run_stats(self) -> dict[str, float]:
        """Engine counters (e.g. speculative acceptance) read once before and after a run."""
        return {}

    async def _get_json(self, url: str) -> Any:
        try:
            resp = await self.http.get(url, timeout=10.0)
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        try:
            return resp.json()
        except ValueError:
            return None

    async def aclose(self) -> None:
        await self.http.aclose()


def _server_ttft(data: dict[str, Any]) -> float | None:
    """Without streaming, llama.cpp's prompt time is the closest measure of time to first token."""
    timings = data.get("timings")
    if isinstance(timings, dict) and isinstance(timings.get("prompt_ms"), (int, float)):
        return float(timings["prompt_ms"]) / 1000.0
    return None
