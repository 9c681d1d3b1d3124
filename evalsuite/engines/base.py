"""The one async contract every engine adapter implements, over OpenAI-style routes.

`Engine.generate(sample, params) -> Completion` is all the runner needs.
Engines differ only in the extra request fields they take, what they report
about themselves (`probe`), and how they report speculative decoding: per
request (`request_speculation`) or as server counters read around a session
(`run_stats`, `counter_speculation`).  Each subclasses this and overrides
those; a new engine is one module with one subclass, registered in the
`evalsuite.engines` entry-point group (see `evalsuite.engines`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import httpx

from evalsuite.collector import collections_paused
from evalsuite.config import TargetConfig
from evalsuite.engines.agree import check_agreement
from evalsuite.engines.body import (
    ACCEPT_ENCODING,
    JSON_HEADERS,
    dumps_body,
    iter_body,
    loads,
    read_body,
    read_error_body,
)
from evalsuite.engines.identity import IdentityWatch
from evalsuite.engines.parse import completion_from_chat
from evalsuite.engines.retry import RequestFailed, parse_retry_after
from evalsuite.engines.speculation import CounterSpeculation, Speculation
from evalsuite.engines.tls import client_verify
from evalsuite.engines.transport import PlainResponse, PreparedPost, client_transport
from evalsuite.engines.typed import decode_body
from evalsuite.engines.typed_stream import read_stream
from evalsuite.engines.validate import Malformed, ResponseSchema
from evalsuite.records import Completion, GenerationParams, Sample

PROBE_CAP = 16 * 2**20  # /models, /props, /metrics: small documents
PROBE_TIMEOUT_S = 10.0


def request_failure(exc: Exception) -> RequestFailed:
    """The request failure a transport or parsing exception is, of a kind the retry policy understands."""
    if isinstance(exc, RequestFailed):
        return exc
    if isinstance(exc, (httpx.TimeoutException, TimeoutError)):
        return RequestFailed("timeout", f"request timed out ({type(exc).__name__})")
    if isinstance(exc, httpx.DecodingError):
        return RequestFailed("malformed", f"undecodable response body: {exc}")
    if isinstance(exc, (httpx.TransportError, httpx.RemoteProtocolError, ConnectionError)):
        return RequestFailed("connection", f"connection failed: {type(exc).__name__}: {exc}")
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError, ValueError, KeyError, TypeError)):
        return RequestFailed("malformed", f"unreadable response: {exc}")
    raise exc


def check_status(status: int, headers: httpx.Headers, body: str) -> None:
    """Raise the classified failure for a non-2xx answer, quoting the start of its body."""
    if status < 300:
        return
    body = body[:300]
    if status == 429:
        retry_after = parse_retry_after(headers.get("retry-after"))
        raise RequestFailed("rate_limit", f"HTTP 429: {body}", status=status, retry_after=retry_after)
    if status >= 500:
        retry_after = parse_retry_after(headers.get("retry-after"))
        raise RequestFailed("server", f"HTTP {status}: {body}", status=status, retry_after=retry_after)
    raise RequestFailed("fatal", f"HTTP {status}: {body}", status=status)


class Engine:
    """A plain OpenAI-compatible endpoint: text always, token data when it returns logprobs.

    Requests go straight through one pooled httpx client: against a fast local
    server the openai SDK's per-request machinery cost more CPU than the rest
    of the pipeline together (bench/overhead.py), and nothing here needs its
    typed models.
    """

    name: str = "openai"
    """The engine's registered name (`engine = "..."` of a target); `make_engine` sets it on each instance."""
    takes_ignore_eos: ClassVar[bool] = False
    """Whether the server honours `ignore_eos` (speed runs use it to generate a fixed number of tokens)."""
    PROBE_KEY: ClassVar[str] = "dialect"
    """The key the name is stored under in a run's probe (kept so fingerprints of stored runs stay the same)."""

    def __init__(self, target: TargetConfig, *, base_url: str | None = None):
        self.target = target
        self.base_url = (base_url or target.base_url or "").rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        key = target.api_key()
        headers = {"Accept-Encoding": ACCEPT_ENCODING}  # only codings body.py can inflate under the cap
        if key:
            headers["Authorization"] = f"Bearer {key}"
        limits = httpx.Limits(max_connections=target.concurrency, max_keepalive_connections=target.concurrency)
        self._plain = client_transport(self.base_url, limits)
        self._prepared: PreparedPost | None = None  # the generation POST on our own transport, written at first use
        self.http = httpx.AsyncClient(
            headers=headers,
            verify=client_verify(self.base_url),
            timeout=httpx.Timeout(target.timeout_s, connect=min(10.0, target.timeout_s)),
            limits=limits,
            transport=self._plain,
        )
        self.model = target.model or ""
        self.max_bytes = int(target.max_response_mb * 2**20)
        self.vocab_size: int | None = None  # set by probes that learn it; bounds every token id
        self._response_schema: ResponseSchema | None = None
        self.models_document: Any = None
        """The server's /models answer as the last `probe` read it (engines read more from it than the ids)."""
        self.identity = IdentityWatch(self.base_url)
        route = "/chat/completions" if target.api == "chat" else "/completions"
        self._generate_url = httpx.URL(self.base_url + route)  # parsed once: httpx takes ~30 us per URL string

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
        """One attempt; raises RequestFailed with a kind the retry policy can act on.

        `timeout_s` bounds the whole request (connect, status, every byte of
        the body or stream), so a stream that never ends or a body sent a byte
        a second fails like any other timeout.  The parsed body must pass the
        schema, the text must agree with its tokens, and the server must still
        be the one the run started with, before a Completion exists.
        """
        body = self.request_body(sample, params)
        start = time.perf_counter()
        raw: bytes | bytearray = b""
        try:
            async with asyncio.timeout(self.target.timeout_s):
                if self.target.stream:
                    data, generic, ttft = await self._post_stream(body, start)
                else:
                    raw = await self._post(body)
        except TimeoutError:
            raise RequestFailed(
                "timeout", f"no complete response within timeout_s = {self.target.timeout_s:g} s"
            ) from None
        except Exception as exc:  # request_failure() re-raises anything that is not a request failure
            raise request_failure(exc) from exc
        with collections_paused():  # nothing is awaited: the body's decoded entries are freed before it ends
            if not self.target.stream:
                data, generic = _generic(lambda: decoded(raw))
                ttft = _server_ttft(data)
            latency_s = time.perf_counter() - start
            data, completion = self.accept_read(data, generic, params, latency_s=latency_s, ttft_s=ttft)
            self.identity.check(data)
            del data, generic
        return completion

    def accept_read(
        self, data: Any, generic: Generic | None, params: GenerationParams, *, latency_s: float, ttft_s: float | None
    ) -> tuple[Any, Completion]:
        """`accept` of a body as read, typed or not; a typed body it refuses is read again generically, so the
        refusal (or an acceptance the typed reading was too strict for) is the one the generic reading gives.
        Returns the body accepted and its Completion."""
        try:
            return data, self.accept(data, params, latency_s=latency_s, ttft_s=ttft_s)
        except RequestFailed:
            if generic is None:
                raise
        data = _generic(generic)
        return data, self.accept(data, params, latency_s=latency_s, ttft_s=ttft_s)

    def accept(self, data: Any, params: GenerationParams, *, latency_s: float, ttft_s: float | None) -> Completion:
        """The Completion of a parsed body that passes every check (else RequestFailed, retryable)."""
        columns = self._schema().check(data)  # the checked token columns, read by parsing and the text check
        try:
            completion = completion_from_chat(data, latency_s=latency_s, ttft_s=ttft_s, columns=columns)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:  # a shape the schema let through
            raise Malformed(f"unreadable response: {type(exc).__name__}: {exc}") from None
        choice = data["choices"][0]
        logprobs = choice.get("logprobs") or {}
        entries = columns if columns is not None else logprobs.get("content")
        if entries is None and logprobs.get("tokens"):
            entries = [{"token": t} for t in logprobs["tokens"]]
        check_agreement(completion.text, entries or [], finish_reason=completion.finish_reason, stop=params.stop)
        return completion

    def _schema(self) -> ResponseSchema:
        """The response schema for this endpoint, rebuilt only when a probe has learnt its vocabulary size."""
        schema = self._response_schema
        if schema is None or schema.vocab_size != self.vocab_size:
            schema = self._response_schema = ResponseSchema(chat=self.target.api == "chat", vocab_size=self.vocab_size)
        return schema

    def _request(self, body: dict[str, Any]) -> httpx.Request:
        """The POST of one body to the generation route, the JSON written by orjson (see dumps_body)."""
        return self.http.build_request("POST", self._generate_url, content=dumps_body(body), headers=JSON_HEADERS)

    @asynccontextmanager
    async def _posted(self, body: dict[str, Any]) -> AsyncIterator[Response]:
        """The response to the POST of one body to the generation route, its body still to read; closed however
        the block ends.

        On our own transport the request goes to it directly, as the head httpx would write for it
        (`PreparedPost`): the client's layers around it (auth, redirects, cookies, event hooks) have nothing
        to do for these requests, and its request and response objects were most of the rest of a short
        answer's HTTP cost (about 55 us of 435-460 a response, 8-token answers, 16 in flight)."""
        if self._plain is not None:
            if self.http.is_closed:
                raise RuntimeError("Cannot send a request, as the client has been closed.")  # as httpx says it
            if self._prepared is None:
                self._prepared = PreparedPost(self._request({}))  # any body: only its length changes the head
            response: Response = await self._plain.post(self._prepared, dumps_body(body))
        else:
            response = await self.http.send(self._request(body), stream=True)
        try:
            yield response
        finally:
            await response.aclose()

    async def _post(self, body: dict[str, Any]) -> bytes | bytearray:
        async with self._posted(body) as resp:
            if resp.status_code >= 300:
                check_status(resp.status_code, resp.headers, await read_error_body(resp))
            return await read_body(resp, self.max_bytes)

    async def _post_stream(self, body: dict[str, Any], start: float) -> tuple[Any, Generic | None, float | None]:
        """The merged events, how to read them generically if they came typed, and the time to the first token."""
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        ttft: list[float] = []
        async with self._posted(body) as resp:
            if resp.status_code >= 300:
                check_status(resp.status_code, resp.headers, await read_error_body(resp))
            if resp.headers.get("content-type", "").startswith("application/json"):  # the server ignored stream
                return *decoded(await read_body(resp, self.max_bytes)), None
            pieces = iter_body(resp, self.max_bytes)
            data, generic = await read_stream(pieces, lambda: ttft.append(time.perf_counter() - start))
        return data, generic, (ttft[0] if ttft else None)

    async def probe(self) -> dict[str, Any]:
        """What this endpoint says about itself, for the run's provenance and fingerprint."""
        info: dict[str, Any] = {self.PROBE_KEY: self.name, "base_url": self.base_url}
        models = self.models_document = await self._get_json(f"{self.base_url}/models")
        if isinstance(models, dict):
            ids = [m.get("id") for m in models.get("data", []) if isinstance(m, dict)]
            info["models"] = ids
            if not self.model and ids and isinstance(ids[0], str):
                self.model = ids[0]
        info["model"] = self.model
        return info

    async def run_stats(self) -> dict[str, float]:
        """Engine counters (e.g. speculative acceptance) read once before and after a run."""
        return {}

    @classmethod
    def request_speculation(cls, completion: Completion) -> Speculation | None:
        """This engine's drafting statistics for one stored request; None when it reports none per request."""
        return None

    @classmethod
    def counter_speculation(cls, before: Mapping[str, Any], after: Mapping[str, Any]) -> CounterSpeculation | None:
        """Drafting between two `run_stats()` readings; None when this engine keeps no such counters."""
        return None

    async def _get_json(self, url: str) -> Any:
        text = await self._get_text(url)
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None

    async def _get_text(self, url: str) -> str | None:
        """A small document from the server, or None; bounded in time and size like every request."""
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                async with self.http.stream("GET", url, timeout=PROBE_TIMEOUT_S) as resp:
                    if resp.status_code != 200:
                        return None
                    raw = await read_body(resp, min(PROBE_CAP, self.max_bytes))
            return raw.decode("utf-8")
        except (TimeoutError, httpx.HTTPError, RequestFailed, UnicodeDecodeError):
            return None

    async def aclose(self) -> None:
        await self.http.aclose()


Response = httpx.Response | PlainResponse
"""A generation request's response, from httpx's client or straight from our own transport."""
Generic = Callable[[], Any]
"""Reads a body again without the typed decoder: the value `body.loads` (or the generic stream reader) gives."""


def decoded(raw: bytes | bytearray) -> tuple[Any, Generic | None]:
    """A body, typed where it has the usual shape (typed.py), and how to read it generically then (else None)."""
    data = decode_body(raw)
    if data is None:
        return loads(raw), None
    return data, lambda: loads(raw)


def _generic(read: Generic) -> Any:
    try:
        return read()
    except Exception as exc:  # request_failure() re-raises anything that is not a request failure
        raise request_failure(exc) from exc


def _server_ttft(data: Any) -> float | None:
    """Without streaming, llama.cpp's prompt time is the closest measure of time to first token."""
    timings = data.get("timings") if isinstance(data, dict) else None
    if isinstance(timings, dict) and isinstance(timings.get("prompt_ms"), (int, float)):
        return float(timings["prompt_ms"]) / 1000.0
    return None
