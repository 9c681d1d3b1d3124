"""Server-sent event streams: read them strictly, fold their chunks back into one response.

A 200 stream is not yet an answer.  An error event inside it (vLLM reports
failures that way, after the status line went out) is the server's error; a
stream that stops without `[DONE]` and without a finish reason was cut off.
Both raise a retryable failure instead of becoming a stored result, and the
merged response still passes the same schema check as a non-streamed one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from evalsuite.engines.body import loads
from evalsuite.engines.retry import RequestFailed
from evalsuite.engines.validate import Malformed, server_error

LEGACY_KEYS = ("tokens", "token_logprobs", "top_logprobs")


class Lines:
    """Splits a body into its lines (at each line feed) as it arrives."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, piece: bytes) -> list[bytes]:
        """The lines `piece` completes."""
        start = len(self._buffer)
        self._buffer += piece
        cut = self._buffer.rfind(b"\n", start)
        if cut < 0:
            return []
        block = bytes(self._buffer[:cut])
        del self._buffer[: cut + 1]
        return block.split(b"\n")

    def end(self) -> list[bytes]:
        """The last line, when the body did not end with a line break."""
        rest, self._buffer = bytes(self._buffer), bytearray()
        return [rest] if rest else []


def take(reader: EventReader, lines: list[bytes]) -> bool:
    """Give the reader each line (decoded as UTF-8, one at a time) until `[DONE]`; True once it came."""
    return any(reader.line(line.rstrip(b"\r").decode("utf-8")) for line in lines)


class EventReader:
    """Server-sent events, one line at a time, into their JSON chunks; raises on error events and at cut ends."""

    def __init__(self, on_first: Callable[[], None] | None = None):
        self.on_first = on_first
        self.chunks: list[dict[str, Any]] = []
        self.done = False
        self._data: list[str] = []
        self._event = ""

    def line(self, line: str) -> bool:
        """Take one line; True once `[DONE]` is read (nothing after it is read)."""
        if not line:
            self.done = self._dispatch()
        elif line.startswith("data:"):
            self._data.append(line[5:].removeprefix(" "))
        elif line.startswith("event:"):
            self._event = line[6:].strip()
        return self.done

    def finish(self) -> list[dict[str, Any]]:
        """Every chunk, once the body has ended; a stream without `[DONE]` and without a finish reason was cut."""
        if not self.done and self._data:
            self.done = self._dispatch()
        if not self.done and not any(_finish(c) for c in self.chunks):
            raise incomplete(len(self.chunks))
        return self.chunks

    def _dispatch(self) -> bool:
        payload = "\n".join(self._data).strip()
        name, self._event = self._event, ""
        self._data.clear()
        if not payload:
            return False
        if payload == "[DONE]":
            return True
        try:
            chunk = loads(payload)
        except ValueError:
            raise Malformed(f"a stream event is not JSON: {payload[:120]!r}") from None
        if not isinstance(chunk, dict):
            raise Malformed(f"a stream event is {payload[:80]!r}, expected a JSON object")
        error = server_error(chunk)
        if name == "error" or error is not None:
            raise RequestFailed("server", f"the server reported an error inside the stream: {error or payload[:300]}")
        if self.on_first is not None and not self.chunks and chunk.get("choices"):
            self.on_first()
        self.chunks.append(chunk)
        return False


def incomplete(events: int) -> RequestFailed:
    """The failure of a stream that ended without `[DONE]` and without a finish reason (retryable)."""
    return RequestFailed(
        "incomplete", f"the stream ended after {events} events without [DONE] and without a finish_reason"
    )


async def read_events(lines: AsyncIterator[str], on_first: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Every JSON event of a stream up to `[DONE]`; raises on error events and on cut-off streams."""
    reader = EventReader(on_first)
    async for line in lines:
        if reader.line(line):
            break
    return reader.finish()


def read_generic(pieces: Iterable[bytes]) -> dict[str, Any]:
    """The merged response of a whole stream body read with the generic reader (every rule named as ever)."""
    reader, lines = EventReader(), Lines()
    if not any(take(reader, lines.feed(piece)) for piece in pieces):
        take(reader, lines.end())
    return merge_chunks(reader.finish())


def _finish(chunk: dict[str, Any]) -> bool:
    choices = chunk.get("choices")
    return isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices)


def merge_chunks(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """One response dict from streamed chunks: text and logprob entries concatenated, last usage/timings kept."""
    text: list[str] = []
    reasoning: list[str] = []
    entries: list[dict[str, Any]] = []
    legacy: dict[str, list[Any]] = {key: [] for key in LEGACY_KEYS}
    token_ids: list[Any] = []
    completions = False
    finish: Any = None
    merged: dict[str, Any] = {}
    for n, chunk in enumerate(chunks):
        for key in ("usage", "timings", "model", "id", "system_fingerprint"):
            if chunk.get(key) is None:
                continue
            if key in ("model", "system_fingerprint") and key in merged and merged[key] != chunk[key]:
                raise Malformed(f"stream event {n} reports {key} {chunk[key]!r} after {merged[key]!r}")
            merged[key] = chunk[key]
        choices = chunk.get("choices")
        if choices is None:
            continue
        if not isinstance(choices, list):
            raise Malformed(f"stream event {n} has choices {str(choices)[:80]!r}, expected a list")
        for choice in choices:
            if not isinstance(choice, dict):
                raise Malformed(f"stream event {n} has a choice {str(choice)[:80]!r}, expected an object")
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if delta is None and "text" in choice:
                completions = True
                delta = {"content": choice["text"]}
            if not isinstance(delta, dict):
                raise Malformed(f"stream event {n} has delta {str(delta)[:80]!r}, expected an object")
            for key, out in (("content", text), ("reasoning_content", reasoning), ("reasoning", reasoning)):
                piece = delta.get(key)
                if piece is not None and not isinstance(piece, str):
                    raise Malformed(f"stream event {n} has delta.{key} {str(piece)[:80]!r}, expected a string")
                out.append(piece or "")
            logprobs = choice.get("logprobs")
            if logprobs is not None:
                if not isinstance(logprobs, dict):
                    raise Malformed(f"stream event {n} has logprobs {str(logprobs)[:80]!r}, expected an object")
                content = logprobs.get("content")
                if content is not None:
                    if not isinstance(content, list):
                        raise Malformed(f"stream event {n} has logprobs.content {str(content)[:80]!r}, expected a list")
                    entries.extend(content)
                for key in LEGACY_KEYS:
                    if isinstance(logprobs.get(key), list):
                        legacy[key].extend(logprobs[key])
            if isinstance(choice.get("token_ids"), list):
                token_ids.extend(choice["token_ids"])
            finish = choice.get("finish_reason") or finish
    choice_out: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if completions:
        choice_out["text"] = "".join(text)
    else:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if any(reasoning):
            message["reasoning_content"] = "".join(reasoning)
        choice_out["message"] = message
    if entries:
        choice_out["logprobs"] = {"content": entries}
    elif legacy["tokens"]:
        choice_out["logprobs"] = {key: values for key, values in legacy.items() if values}
    if token_ids:
        choice_out["token_ids"] = token_ids
    merged["choices"] = [choice_out]
    return merged
