"""HTTP/1.1 connections for `transport.PlainTransport`: response bodies handed on a read at a time.

llama-server, vLLM and SGLang send each event of a stream, so each token, as an HTTP chunk of its own.
httpcore's connection has h11 parse those chunks one at a time, each an event through h11's state
machine, and hands each up through five generators to the stream reader, which then splits, decodes
and merges it alone: at 16k tokens a stream cost 4.7x its parse floor (bench/scale.py).  Here a
chunked response body is decoded by `ChunkedBody`, every chunk a read brought handed on as one piece.
A body of a stated Content-Length is handed on as the network's reads bring it: h11 would copy each
read into its receive buffer and out again as an event (a whole answer at 2k tokens is ~880 KB).  Any
other body (read until the server closes, or with no body by its status) is h11's.

h11 never sees a body read here.  Where the body ended cleanly and h11 had let the connection stay
open (its side of the exchange DONE: no "Connection: close", not HTTP/1.0), the connection goes on
with a fresh h11 state machine that has seen a finished exchange, and httpcore keeps it alive as after
an exchange h11 read itself.  Anything else (bytes past the body's end, a request not fully sent, a
body abandoned halfway) leaves h11's own state, and httpcore closes the connection.

A request's head goes out in one write with the first bytes of its body (see `_send_event`).

These classes override private methods of httpcore 1.0's connections, so only `transport.LinearPool`,
used with httpcore 1.0 alone, makes them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import h11
import httpcore
from httpcore import AsyncHTTP11Connection

_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;.*)?[ \t]*")
"""A chunk's size line without its CRLF: hex digits, extensions (ignored), whitespace; as h11 reads it."""
_HEX_DIGITS = b"0123456789abcdefABCDEF"
_BLANK_LINE = re.compile(rb"\n\r?\n")
_MAX_LINE = 16 * 1024
"""The longest chunk size or trailer line waited for, as h11 limits an incomplete line."""
_PAST_REQUEST = h11.Request(method="GET", target="/", headers=[("Host", "evalsuite")])
_PAST_END = h11.EndOfMessage()
"""The exchange a fresh state machine is taken through (`_finished_exchange`), made once: h11's events are
frozen, and making them was a third of that walk."""


class ChunkError(ValueError):
    """A chunked body that breaks the framing (RFC 9112, section 7.1)."""


class ChunkedBody:
    """The chunked transfer coding decoded as bytes arrive; `done` once the last chunk and trailers came."""

    def __init__(self) -> None:
        self.done = False
        self._rest = b""  # received, not yet decoded: an incomplete size line, footer or trailer
        self._left = 0  # bytes of the current chunk's data still to come
        self._footer = False  # the CRLF after a chunk's data is next
        self._trailers = False
        self.extra = b""
        """Bytes received past the body's end (none from a server that waits for the next request)."""

    def feed(self, data: bytes) -> list[memoryview]:
        """The chunk data in `data` (views of it), in order; raises ChunkError where the framing breaks."""
        if self.done:
            return []
        buf = self._rest + data if self._rest else data
        view = memoryview(buf)
        out: list[memoryview] = []
        pos, end = 0, len(buf)
        while True:
            if self._left:
                take = min(self._left, end - pos)
                if take:
                    out.append(view[pos : pos + take])
                    pos += take
                    self._left -= take
                if self._left:
                    break
                self._footer = True
            if self._footer:
                if end - pos < 2:
                    if buf[pos:end] != b"\r\n"[: end - pos]:
                        raise ChunkError(f"a chunk's data runs past its size: {buf[pos:end]!r}")
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise ChunkError(f"a chunk's data runs past its size: {buf[pos : pos + 8]!r}")
                pos += 2
                self._footer = False
            if self._trailers:
                pos = self._trailer_end(buf, pos)
                break
            pos = self._whole_chunks(buf, view, pos, out)
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if end - pos > _MAX_LINE:
                    raise ChunkError(f"a chunk header is longer than {_MAX_LINE} bytes")
                break
            line = buf[pos:eol]
            pos = eol + 2
            size = _CHUNK_SIZE.fullmatch(line)
            if size is None:
                raise ChunkError(f"illegal chunk header: {line[:40]!r}")
            self._left = int(size[1], 16)
            self._trailers = not self._left
        self._rest = buf[pos:] if pos < end and not self.done else b""
        self.extra = buf[pos:] if self.done else b""
        return out

    @staticmethod
    def _whole_chunks(buf: bytes, view: memoryview, pos: int, out: list[memoryview]) -> int:
        """Past the chunks from `pos` on that came whole with a plain size line (a stream's every event),
        their data added to `out`; what is left (a last or partial chunk, any other line) is `feed`'s."""
        find, startswith, end = buf.find, buf.startswith, len(buf)
        while True:
            eol = find(b"\r\n", pos)
            line = buf[pos:eol]
            if eol < 0 or not 0 < len(line) <= 20 or line.strip(_HEX_DIGITS):
                return pos
            start = eol + 2
            stop = start + int(line, 16)
            if stop == start or stop + 2 > end:
                return pos
            if not startswith(b"\r\n", stop):
                raise ChunkError(f"a chunk's data runs past its size: {buf[stop : stop + 8]!r}")
            out.append(view[start:stop])
            pos = stop + 2

    def _trailer_end(self, buf: bytes, pos: int) -> int:
        """Past the trailer fields and the blank line after the last chunk, when they have all come."""
        if buf[pos : pos + 1] == b"\n" or buf[pos : pos + 2] == b"\r\n":  # no trailers (h11 allows a bare LF)
            self.done = True
            return pos + (1 if buf[pos] == 10 else 2)
        blank = _BLANK_LINE.search(buf, pos)
        if blank is None:
            if len(buf) - pos > _MAX_LINE:
                raise ChunkError(f"the trailer fields are longer than {_MAX_LINE} bytes")
            return pos
        for line in buf[pos : blank.start()].split(b"\n"):
            if b":" not in line:
                raise ChunkError(f"a trailer line is not a header field: {line[:40]!r}")
        self.done = True
        return blank.end()


class PlainConnection(httpcore.AsyncHTTPConnection):
    """httpcore's plain-http connection, speaking HTTP/1.1 through `ReadingHTTP11`.

    Its lock, and its connection's, are asyncio's: httpcore's ask sniffio for the loop and take an anyio lock,
    whose every acquire gives the loop a turn; the two are taken three times a request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._request_lock = asyncio.Lock()  # type: ignore[assignment]

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if not self.can_handle_request(request.url.origin):
            raise RuntimeError(f"a connection to {self._origin} was asked for {request.url.origin}")
        try:
            async with self._request_lock:
                if self._connection is None:
                    stream = await self._connect(request)
                    self._connection = ReadingHTTP11(self._origin, stream, self._keepalive_expiry)
        except BaseException:
            self._connect_failed = True
            raise
        return await self._connection.handle_async_request(request)


class ReadingHTTP11(AsyncHTTP11Connection):
    """httpcore's HTTP/1.1 connection, its response bodies handed on a read at a time (see the module)."""

    _framing: int | str | None = None  # how the body in flight is read here (see `framing`)
    _finished: h11.Connection | None = None  # the state to go on with after a body read here
    _head = b""  # a request's head, not yet written: it goes out with the body's first bytes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._state_lock = asyncio.Lock()  # type: ignore[assignment]  # see PlainConnection

    async def _send_event(self, event: h11.Event, timeout: float | None = None) -> None:
        """Each event's bytes, the head held back to go out in one write with what follows it.

        httpcore writes a request's head and its body apart: two sends, and to a local server two
        segments, the second about 0.2 ms of client CPU per request (measured on 16-token answers)."""
        data = self._h11_state.send(event) or b""
        if isinstance(event, h11.Request):
            self._head = data
            return
        if self._head:
            data, self._head = self._head + data, b""
        if data:
            await self._network_stream.write(data, timeout=timeout)

    async def _receive_response_headers(
        self, request: httpcore.Request
    ) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]], bytes]:
        head = await super()._receive_response_headers(request)
        sending = self._h11_state.their_state is h11.SEND_BODY
        self._framing = framing(request.method, head[1], head[3]) if sending else None
        self._finished = None
        return head

    async def _response_closed(self) -> None:
        if self._finished is not None:
            self._h11_state, self._finished = self._finished, None
        await super()._response_closed()

    def _finished_exchange(self) -> h11.Connection:
        """A fresh h11 state machine that has seen a whole kept-alive exchange."""
        state = h11.Connection(our_role=h11.CLIENT, max_incomplete_event_size=self.MAX_INCOMPLETE_EVENT_SIZE)
        state.send(_PAST_REQUEST)
        state.send(_PAST_END)
        state.receive_data(b"HTTP/1.1 204 No Content\r\n\r\n")
        while state.their_state is not h11.DONE:
            state.next_event()
        return state

    async def _receive_response_body(self, request: httpcore.Request) -> AsyncIterator[bytes]:
        timeout = request.extensions.get("timeout", {}).get("read")
        if self._framing == "chunked":
            async for piece in self._chunks(timeout):
                yield piece
            return
        if isinstance(self._framing, int):
            async for piece in self._sized(self._framing, timeout):
                yield piece
            return
        state = self._h11_state
        while True:
            event: object = await self._receive_event(timeout=timeout)
            parts = []
            while isinstance(event, h11.Data):
                parts.append(event.data)
                try:
                    event = state.next_event()
                except h11.RemoteProtocolError as exc:  # as httpcore's own reading maps it
                    raise httpcore.RemoteProtocolError(exc) from exc
            if parts:
                yield b"".join(parts)
            if isinstance(event, h11.EndOfMessage) or event is h11.PAUSED:
                break

    async def _chunks(self, timeout: float | None) -> AsyncIterator[bytes]:
        """The chunked body's data, decoded here from what h11 holds past the head and what follows."""
        body = ChunkedBody()
        data, closed = self._h11_state.trailing_data
        while True:
            try:
                pieces = body.feed(data)
            except ChunkError as exc:
                raise httpcore.RemoteProtocolError(str(exc)) from exc
            if pieces:
                yield b"".join(pieces)
            if body.done:
                self._ended(extra=bool(body.extra))
                return
            if closed:
                raise httpcore.RemoteProtocolError(
                    "peer closed connection without sending complete message body (incomplete chunked read)"
                )
            data = await self._network_stream.read(self.READ_NUM_BYTES, timeout=timeout)
            closed = not data

    async def _sized(self, length: int, timeout: float | None) -> AsyncIterator[bytes]:
        """A body of `length` bytes, from what h11 holds past the head and what follows, a read at a time."""
        data, closed = self._h11_state.trailing_data
        left = length
        while len(data) < left:
            if data:
                yield data
                left -= len(data)
            if closed:  # h11's words for it
                raise httpcore.RemoteProtocolError(
                    "peer closed connection without sending complete message body: "
                    f"received {length - left} bytes, expected {length}"
                )
            data = await self._network_stream.read(min(self.READ_NUM_BYTES, left), timeout=timeout)
            closed = not data
        if left:
            yield data[:left]
        self._ended(extra=len(data) > left)

    def _ended(self, extra: bool) -> None:
        """A body read here has ended: the connection may go on when nothing came past it."""
        # h11 saw the request end and the response head: DONE means it may keep the connection alive (a
        # "Connection: close" or an HTTP/1.0 answer would have made it MUST_CLOSE)
        if not extra and self._h11_state.our_state is h11.DONE:
            self._finished = self._finished_exchange()


def framing(method: bytes, status: int, headers: list[tuple[bytes, bytes]]) -> int | str | None:
    """How a response body ends, as h11 decided it from the head h11 accepted: "chunked", its Content-Length
    (h11 has checked it is digits and any repeats agree), or None for a body h11 reads itself: one read
    until the server closes, or none whatever the head says (204, 304, an answer to HEAD or CONNECT)."""
    if status in (204, 304) or method in (b"HEAD", b"CONNECT"):
        return None
    length: int | None = None
    for name, value in headers:
        name = name.lower()
        if name == b"transfer-encoding":  # h11 refuses any coding but chunked, and it overrides a length
            return "chunked" if value.strip().lower() == b"chunked" else None
        if name == b"content-length":
            length = int(value)
    return length
