"""Read response bodies with a size cap that holds after decompression too.

httpx would inflate a gzip body in one go: a 1 MiB body that expands to 1 GiB
costs gigabytes before anyone can object.  Here the raw bytes are read as they
arrive and inflated in bounded slices (zlib's `max_length`), counting both the
bytes received and the bytes decoded; past the cap the read stops at once.
Only the encodings we ask for (gzip, deflate) are accepted.

`loads` parses a body: orjson reads it in about a third of the time of
Python's json, which is the largest cost a response has on the client, and
falls back to json wherever the two could read the same text differently.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

import httpx
import orjson

from evalsuite.engines.retry import RequestFailed

ACCEPT_ENCODING = "gzip, deflate"
SLICE = 1 << 20  # decoded bytes produced per step
_DIGITS = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))  # every digit -> "0", anything else -> " "
_LONG_NUMBER = b"0" * 19  # integers beyond 64 bits have 19+ digits; orjson would read them as floats


def loads(raw: bytes | bytearray | str) -> Any:
    """The JSON value of a body, exactly as `json.loads` reads it.

    orjson refuses what Python's json reads leniently (NaN, Infinity, lone surrogates, non-UTF-8
    encodings, 1e400) and reads integers beyond 64 bits as floats: on a refusal, or when the text
    has a run of 19 digits, json parses it, so a server's out-of-range value reaches the checks,
    and the user, as sent.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.translate(_DIGITS).find(_LONG_NUMBER) < 0:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


JSON_HEADERS = {"Content-Type": "application/json"}


def dumps_body(body: Any) -> bytes:
    """A request body as the bytes httpx's `json=` sends, written by orjson (~10x faster).

    Where the two could differ, httpx's own encoding is used, with its errors: orjson writes NaN and
    infinities as null where httpx refuses them, and refuses what httpx writes (non-string keys,
    integers beyond 64 bits) or refuses differently (lone surrogates).
    """
    try:
        sent = orjson.dumps(body)
    except TypeError:  # orjson.JSONEncodeError
        sent = None
    if sent is not None and (b"null" not in sent or not _has_nonfinite(body)):  # each NaN would have become a null
        return sent
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _has_nonfinite(value: Any) -> bool:
    if type(value) is float:
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_nonfinite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_nonfinite(v) for v in value)
    return isinstance(value, float) and not math.isfinite(value)


class RawResponse(Protocol):
    """What reading a body takes of a response: its headers and its bytes as received (httpx's response, or
    `transport.PlainResponse`, which may also give a body of known length whole: `read_whole`, looked up by
    `read_body` where it exists)."""

    @property
    def headers(self) -> httpx.Headers: ...

    def aiter_raw(self) -> AsyncIterator[bytes]: ...


class TooLarge(RequestFailed):
    """A body bigger than the configured cap (compressed or decompressed)."""

    def __init__(self, what: str, cap: int):
        super().__init__("too_large", f"the response {what} exceeds the {_mib(cap)} cap (max_response_mb)")


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB"


class _Inflater:
    """One content-coding layer, inflated at most SLICE bytes at a time."""

    def __init__(self, coding: str):
        self.coding = coding
        self._obj = self._new()
        self._first = True

    def _new(self, raw_deflate: bool = False) -> zlib._Decompress:
        if self.coding in ("gzip", "x-gzip"):
            return zlib.decompressobj(zlib.MAX_WBITS | 16)
        return zlib.decompressobj(-zlib.MAX_WBITS if raw_deflate else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        while data:
            try:
                out = self._obj.decompress(data, SLICE)
            except zlib.error as exc:
                if self.coding == "deflate" and self._first:  # some servers send raw deflate without the zlib header
                    self._first = False
                    self._obj = self._new(raw_deflate=True)
                    continue
                raise RequestFailed("malformed", f"the {self.coding} response body is corrupt: {exc}") from None
            self._first = False
            data = self._obj.unconsumed_tail
            if self._obj.eof and self._obj.unused_data:  # a further gzip member follows
                data = self._obj.unused_data + data
                self._obj = self._new()
            if out:
                yield out

    def finish(self) -> bytes:
        return self._obj.flush()


def _codings(resp: RawResponse) -> list[_Inflater]:
    header = resp.headers.get("content-encoding", "")
    codings = [c.strip().lower() for c in header.split(",") if c.strip() and c.strip().lower() != "identity"]
    for coding in codings:
        if coding not in ("gzip", "x-gzip", "deflate"):
            raise RequestFailed("malformed", f"the server sent Content-Encoding {header!r}, which was not asked for")
    return [_Inflater(c) for c in reversed(codings)]  # the last coding applied is undone first


async def iter_body(resp: RawResponse, cap: int) -> AsyncIterator[bytes]:
    """The decoded body in pieces as it arrives; raises TooLarge past `cap` bytes (received or decoded)."""
    layers = _codings(resp)
    received = decoded = 0
    async for raw in resp.aiter_raw():
        received += len(raw)
        if received > cap:
            raise TooLarge("body", cap)
        for piece in _through(layers, raw):
            decoded += len(piece)
            if decoded > cap:
                raise TooLarge("body, decompressed,", cap)
            yield piece
    tail = _drain(layers)
    if tail:
        decoded += len(tail)
        if decoded > cap:
            raise TooLarge("body, decompressed,", cap)
        yield tail


def _through(layers: list[_Inflater], data: bytes) -> Iterator[bytes]:
    if not layers:
        if data:
            yield data
        return
    for piece in layers[0].feed(data):
        yield from _through(layers[1:], piece)


def _drain(layers: list[_Inflater]) -> bytes:
    """What the layers still hold once the raw body has ended, each flush passed through the layers after it."""
    out: list[bytes] = []
    for i, layer in enumerate(layers):
        out.extend(_through(layers[i + 1 :], layer.finish()))
    return b"".join(out)


async def read_body(resp: RawResponse, cap: int) -> bytes | bytearray:
    """The whole decoded body, at most `cap` bytes; read in one buffer where the response can (its length known
    and nothing to inflate: `transport.PlainResponse.read_whole`)."""
    read_whole = getattr(resp, "read_whole", None)
    if read_whole is not None and not _codings(resp):
        whole = await read_whole(cap)
        if whole is not None:
            return whole
    parts: list[bytes] = []
    async for piece in iter_body(resp, cap):
        parts.append(piece)
    return b"".join(parts)


async def read_error_body(resp: RawResponse, limit: int = 64 * 1024) -> str:
    """The start of an error body, for the message; never more than `limit` bytes are kept."""
    parts: list[bytes] = []
    size = 0
    try:
        async for piece in iter_body(resp, 1 << 40):
            parts.append(piece)
            size += len(piece)
            if size >= limit:
                break
    except (RequestFailed, httpx.HTTPError):
        pass
    return b"".join(parts)[:limit].decode("utf-8", "replace")
