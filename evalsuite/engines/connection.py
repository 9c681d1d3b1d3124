"""One HTTP/1.1 connection to a plain-http server: one exchange at a time over a `SocketStream`.

A request goes out in one write, its head with its body's first bytes (two writes are two segments to
a local server, about 0.2 ms of client CPU a request measured on short answers).  The response's head
is read and checked whole (`http11.parse_head`), then its body is handed on a network read at a time:
a chunked body decoded by `http11.ChunkedBody`, a sized one as the reads bring it, any other read
until the server closes.  The connection may carry the next exchange only when this one ended
cleanly: the whole request sent, the body read to its end with nothing past it, and neither side
asking to close (`reusable`).  Errors are httpcore's network errors from the socket, or this
package's `ProtocolError` and `RequestError`; `transport.py` turns them into httpx's.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, NamedTuple

import httpcore

from evalsuite.engines.http11 import (
    CHUNKED,
    MAX_HEAD,
    UNTIL_CLOSE,
    ChunkedBody,
    Head,
    ProtocolError,
    RequestError,
    asks_close,
    head_end,
    parse_head,
)
from evalsuite.engines.sockets import SocketStream

READ_SIZE = 64 * 1024
"""The most one read takes while the response head is awaited: what comes with the head of a body read whole is
copied into place once more (`read_sized`), so the first read stays small."""
BODY_READ = 256 * 1024
"""The most one read of a body read as it arrives takes.  Between two reads of one answer the client serves its
other answers, so each read starts on cold caches and pays that start once: 256 KiB reads, not 64, took a streamed
answer's client CPU a token down 7-12 % (chat) and 10-23 % (vLLM's lists), where a server writes faster than the
client reads (docs/speed.md, "Fewer, larger reads")."""
WHOLE_MAX = 16 << 20
"""The largest body `read_sized` takes (a 32k-token answer with top-5 logprobs is about 14 MB): its buffer is
made before the bytes come, so a larger one is read as it arrives, and a head alone never costs more."""
Origin = tuple[bytes, bytes, int]
"""Scheme, host and port: which server a connection reaches."""
RequestBody = bytes | AsyncIterable[bytes]
"""A request's body: whole, or the pieces of a stream."""


class Framing(NamedTuple):
    """How a request's head frames its body, and whether it asks the server to close after answering."""

    length: int | None  # the declared Content-Length (None when chunked)
    chunked: bool
    close: bool


class Connection:
    """A kept-alive HTTP/1.1 connection; `exchange` then `body` for each request, in turn."""

    def __init__(self, stream: SocketStream, origin: Origin):
        self.stream = stream
        self.origin = origin
        self.idle_since = 0.0
        self.reusable = False
        """Whether the last exchange ended cleanly and both sides let the connection go on."""
        self._keep = False  # the exchange in flight may leave the connection open once its body has ended
        self._closing = False  # the request in flight asked the server to close after answering it
        self._rest: bytes | memoryview = b""  # read past the response head: the body's first bytes

    def is_readable(self) -> bool:
        """Whether an idle connection has something to read: the server closed it (or sent what nobody asked)."""
        return bool(self.stream.get_extra_info("is_readable"))

    async def exchange(
        self, method: bytes, head: bytes, framing: Framing, body: RequestBody, timeouts: dict[str, Any]
    ) -> Head:
        """Send a request, whose head is `head` (`http11.request_head`) framing its body as `framing` says,
        and read its final response head (informational ones are passed over)."""
        self.reusable = False
        sent = True
        try:
            await self._send(head, framing, body, timeouts.get("write"))
        except httpcore.WriteError:  # the server may have answered and closed before reading it all (e.g. a 413)
            sent = False
        answer = await self._read_head(method, timeouts.get("read"))
        self._keep = sent and answer.keep_alive and not self._closing
        return answer

    async def _send(self, pending: bytes, framing: Framing, body: RequestBody, timeout: float | None) -> None:
        length, chunked, self._closing = framing
        sent = 0
        async for piece in _whole(body) if isinstance(body, bytes) else body:
            if not piece:
                continue
            sent += len(piece)
            if not chunked and sent > (length or 0):
                raise RequestError("Too much data for declared Content-Length")
            if chunked:
                piece = b"%x\r\n%s\r\n" % (len(piece), piece)
            if pending:
                piece, pending = pending + piece, b""
            await self.stream.write(piece, timeout=timeout)
        if chunked:
            pending += b"0\r\n\r\n"
        elif sent < (length or 0):
            raise RequestError("Too little data for declared Content-Length")
        if pending:
            await self.stream.write(pending, timeout=timeout)

    async def _read_head(self, method: bytes, timeout: float | None) -> Head:
        data: bytes | bytearray = b""  # the first read as it came; grown in place once a head spans reads
        looked = 0
        while True:
            end = head_end(data, looked)
            if end >= 0:
                head = parse_head(bytes(data[:end]), method)
                if head.status < 200:  # informational: the final answer follows
                    data, looked = data[end:], 0
                    continue
                self._rest = memoryview(data)[end:]  # not copied: a body read whole copies it once, into place
                return head
            if data and data[0] < 0x21:
                raise ProtocolError(f"illegal status line: {data[:100]!r}")
            if len(data) > MAX_HEAD:
                raise ProtocolError(f"the response head is longer than {MAX_HEAD} bytes")
            looked = len(data)
            more = await self.stream.read(READ_SIZE, timeout=timeout)
            if not more:
                if data:
                    raise ProtocolError("peer closed connection without sending a complete response head")
                raise ProtocolError("Server disconnected without sending a response.")
            if not data:
                data = more
            else:  # a head a few bytes a read is not copied a read
                data = data if isinstance(data, bytearray) else bytearray(data)
                data += more

    def body(self, head: Head, timeout: float | None) -> AsyncIterator[bytes]:
        """The response body's bytes, a network read at a time; `reusable` is set once it has ended cleanly.

        The reader of its framing itself, not a generator around it: a paced stream brings a read a token."""
        rest, self._rest = bytes(self._rest), b""
        if head.body == CHUNKED:
            return self._chunks(rest, timeout)
        if head.body == UNTIL_CLOSE:
            return self._until_close(rest, timeout)
        assert isinstance(head.body, int)
        return self._sized(rest, head.body, timeout)

    async def read_sized(self, head: Head, timeout: float | None) -> bytearray:
        """The whole body of a response whose head gives its length, read into one buffer: each byte is copied
        once, where reading it a network read at a time and joining the reads copied most of it twice.
        `reusable` is set as `body` sets it."""
        length = head.body
        assert isinstance(length, int)
        rest, self._rest = self._rest, b""
        whole = bytearray(length)
        place = memoryview(whole)
        got = min(len(rest), length)
        place[:got] = rest[:got]
        while got < length:
            more = await self.stream.read_into(place[got:], timeout=timeout)
            if not more:  # h11's words for it
                raise ProtocolError(
                    "peer closed connection without sending complete message body: "
                    f"received {got} bytes, expected {length}"
                )
            got += more
        self._ended(extra=len(rest) > length)
        return whole

    async def _chunks(self, data: bytes, timeout: float | None) -> AsyncIterator[bytes]:
        body = ChunkedBody()
        closed = False
        while True:
            pieces = body.feed(data)
            if pieces:
                yield b"".join(pieces)
            if body.done:
                self._ended(extra=bool(body.extra))
                return
            if closed:
                raise ProtocolError(
                    "peer closed connection without sending complete message body (incomplete chunked read)"
                )
            data = await self.stream.read(BODY_READ, timeout=timeout)
            closed = not data

    async def _sized(self, data: bytes, length: int, timeout: float | None) -> AsyncIterator[bytes]:
        left = length
        while len(data) < left:
            if data:
                yield data
                left -= len(data)
            data = await self.stream.read(min(BODY_READ, left), timeout=timeout)
            if not data:  # h11's words for it
                raise ProtocolError(
                    "peer closed connection without sending complete message body: "
                    f"received {length - left} bytes, expected {length}"
                )
        if left:
            yield data[:left]
        self._ended(extra=len(data) > left)

    async def _until_close(self, data: bytes, timeout: float | None) -> AsyncIterator[bytes]:
        while True:
            if data:
                yield data
            data = await self.stream.read(BODY_READ, timeout=timeout)
            if not data:
                return

    def _ended(self, extra: bool) -> None:
        self.reusable = self._keep and not extra

    async def aclose(self) -> None:
        self.reusable = False
        await self.stream.aclose()


async def _whole(body: bytes) -> AsyncIterator[bytes]:
    yield body


def request_framing(headers: list[tuple[bytes, bytes]]) -> Framing:
    """A request body's framing as its head declares it: a length, or chunked (httpx sets one or the other for a
    body), and whether the request asks the server to close after answering it."""
    length: int | None = None
    chunked = close = False
    for name, value in headers:
        lower = name.lower()
        if lower == b"transfer-encoding":
            if value.strip().lower() != b"chunked":
                raise RequestError(f"a request body can go only chunked, not {value!r}")
            chunked = True
        elif lower == b"content-length":
            if not value.strip().isdigit():
                raise RequestError(f"bad Content-Length {value!r}")
            length = int(value)
        elif lower == b"connection":
            close = close or asks_close(value)
    return Framing(None if chunked else length, chunked, close)
