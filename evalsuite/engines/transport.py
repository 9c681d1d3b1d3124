"""The HTTP transport under an engine's httpx client, for local plain-http servers.

For an `http://` endpoint at an IP address or at `localhost`, reached without
a proxy (the usual local `llama-server`, vLLM or SGLang), requests go through
`PlainTransport`: a pool of HTTP/1.1 connections of our own (`connection.py`,
speaking `http11.py`) over `sockets.SocketBackend`'s asyncio sockets.  With
short answers a response's fixed cost is most of the client's: through
httpcore's pool, connections and h11's event machinery it was some 40 % of
the client's CPU on 64-token answers (docs/speed.md).  Limits and timeouts
are httpx's (`Limits`, and each request's `timeout` extension).  Every other
endpoint (TLS, a proxy, a host name, whose addresses want anyio's
happy-eyeballs connect) keeps httpx's default transport.  Either way the
caller sees httpx's exceptions.
"""

from __future__ import annotations

import asyncio
import sys
import urllib.request
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager, suppress
from typing import Any, cast

import httpcore
import httpx

from evalsuite.engines.connection import WHOLE_MAX, Connection, Framing, Origin, RequestBody, request_framing
from evalsuite.engines.http11 import Head, ProtocolError, RequestError, field_lines, request_head, request_line
from evalsuite.engines.sockets import SocketBackend, SocketStream, ip_literal


def client_transport(base_url: str, limits: httpx.Limits) -> PlainTransport | None:
    """The transport for a client that talks to `base_url` only; None where httpx's own is the right one."""
    url = httpx.URL(base_url)
    if url.scheme != "http" or _proxied() or not (ip_literal(url.host, 0) or _loopback_name(url.host)):
        return None
    return PlainTransport(limits)


def _loopback_name(host: str) -> bool:
    """`localhost`, whose addresses are tried in turn: each refuses at once, except on Windows (about 2 s)."""
    return host == "localhost" and sys.platform != "win32"


def _proxied() -> bool:
    """Whether httpx would route a plain-http request through a proxy taken from the environment."""
    return any(scheme in ("http", "all") for scheme in urllib.request.getproxies())


class PlainTransport(httpx.AsyncBaseTransport):
    """httpx's transport contract over a pool of `connection.Connection`s on `SocketBackend`'s sockets.

    A request takes the idle connection to its server used last (one the server has closed meanwhile, or
    that has idled past the keep-alive expiry, is closed instead), or opens one while fewer than
    `max_connections` are open, or closes an idle one to another server to make room; else it waits its
    turn, up to the pool timeout.  Turns are first come, first served: a connection whose response ended
    cleanly goes to the first waiting request (closed, its place given instead, when that request is for
    another server or the server has closed it), and the place of a connection that closes goes to the
    first waiting request too; with no one waiting, the connection goes back to the idle ones (up to
    `max_keepalive_connections`) or closes.
    """

    def __init__(self, limits: httpx.Limits):
        self._max = limits.max_connections or sys.maxsize
        self._keep = self._max if limits.max_keepalive_connections is None else limits.max_keepalive_connections
        self._expiry = limits.keepalive_expiry
        self._backend = SocketBackend()
        self._idle: list[Connection] = []  # the one used last, last
        self._open: set[Connection] = set()
        self._slots = 0  # places taken: connections open or being opened, and places handed to a waiting request
        self._waiting: deque[tuple[Origin, asyncio.Future[Connection | None]]] = deque()
        """Requests waiting their turn, first first: each is handed a connection, or None for a place to open one."""
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.raw_scheme != b"http":  # never TLS: an https request here would go out in cleartext
            raise httpx.UnsupportedProtocol(f"this transport speaks plain http only, not {url.scheme!r}")
        with _as_httpx():
            if not request.method.isascii():
                raise RequestError(f"Illegal method {request.method!r}")
            method = request.method.encode("ascii")
            head = request_head(method, url.raw_path, request.headers.raw)
            framing = request_framing(request.headers.raw)
        origin = (url.raw_scheme, url.raw_host, url.port or 80)
        stream = cast("httpx.AsyncByteStream", request.stream)  # an async client's request streams async
        body = await self._exchange(origin, method, head, framing, stream, request.extensions.get("timeout", {}))
        return httpx.Response(
            status_code=body.head.status,
            headers=body.head.headers,
            stream=body,
            extensions={"http_version": b"HTTP/" + body.head.version, "reason_phrase": body.head.reason},
        )

    async def post(self, prepared: PreparedPost, content: bytes) -> PlainResponse:
        """A prepared POST of `content`, its response's body still to read: what `handle_async_request` does with
        the same request built by httpx, without building httpx's request and response around it."""
        return PlainResponse(
            await self._exchange(
                prepared.origin,
                b"POST",
                prepared.head(len(content)),
                prepared.framing(len(content)),
                content,
                prepared.timeouts,
            )
        )

    async def _exchange(
        self, origin: Origin, method: bytes, head: bytes, framing: Framing, body: RequestBody, timeouts: dict[str, Any]
    ) -> _Body:
        """Send a request on a connection of the pool; its response's head read, and its body as `_Body`."""
        with _as_httpx():
            connection = await self._acquire(origin, timeouts)
            try:
                answer = await connection.exchange(method, head, framing, body, timeouts)
            except BaseException:
                await self._release(connection)
                raise
        return _Body(self, connection, answer, timeouts.get("read"))

    async def _acquire(self, origin: Origin, timeouts: dict[str, Any]) -> Connection:
        """A connection to `origin` for one exchange: an idle one, a new one, or one handed on after a wait."""
        if self._closed:
            raise httpcore.ConnectError("the client's transport has been closed")
        if not self._waiting:  # nobody is before this request
            connection = await self._idle_to(origin)
            if connection is not None:
                return connection
            if self._slots >= self._max and self._idle:  # room for this server, made by one idle to another
                await self._drop(self._idle.pop(0))
            if self._slots < self._max:
                self._slots += 1
                return await self._connect(origin, timeouts)
        handed = await self._wait(origin, timeouts.get("pool"))
        if self._closed:  # closed as its turn came
            if handed is None:
                self._free_place()
            else:
                await self._drop(handed)
            raise httpcore.ConnectError("the client's transport has been closed")
        return handed if handed is not None else await self._connect(origin, timeouts)

    async def _connect(self, origin: Origin, timeouts: dict[str, Any]) -> Connection:
        """A new connection in a place already taken; the place goes on to the next request if it fails."""
        try:
            stream = await self._backend.connect_tcp(origin[1].decode("ascii"), origin[2], timeouts.get("connect"))
        except BaseException:
            self._free_place()
            raise
        assert isinstance(stream, SocketStream)
        connection = Connection(stream, origin)
        self._open.add(connection)
        if self._closed:  # closed while it connected
            await self._drop(connection)
            raise httpcore.ConnectError("the client's transport has been closed")
        return connection

    async def _idle_to(self, origin: Origin) -> Connection | None:
        """The idle connection to `origin` used last that can still serve; idle ones past their expiry are closed."""
        now = asyncio.get_running_loop().time()
        found = None
        for connection in list(reversed(self._idle)):
            expired = self._expiry is not None and now - connection.idle_since > self._expiry
            if expired or (found is None and connection.origin == origin and connection.is_readable()):
                self._idle.remove(connection)
                await self._drop(connection)
            elif found is None and connection.origin == origin:
                found = connection
        if found is not None:
            self._idle.remove(found)
        return found

    async def _wait(self, origin: Origin, timeout: float | None) -> Connection | None:
        """This request's turn: a connection handed on to it, or None for a place to open one."""
        turn: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
        entry = (origin, turn)
        self._waiting.append(entry)
        try:
            async with asyncio.timeout(timeout):
                return await turn
        except BaseException as exc:  # timed out or cancelled: what was handed to it meanwhile goes on to the next
            if turn.done() and not turn.cancelled() and turn.exception() is None:
                handed = turn.result()
                if handed is None:
                    self._free_place()
                else:
                    await self._release(handed)
            if isinstance(exc, TimeoutError):
                raise httpcore.PoolTimeout(f"no connection free within {timeout} s") from None
            raise
        finally:
            turn.cancel()  # (a turn already handed on stays handed on)
            with suppress(ValueError):  # still queued (cancelled by its timeout or its task): out of it now
                self._waiting.remove(entry)

    def _first_turn(self) -> tuple[Origin, asyncio.Future[Connection | None]] | None:
        """The first request still waiting, left in the queue."""
        while self._waiting and self._waiting[0][1].done():
            self._waiting.popleft()
        return self._waiting[0] if self._waiting else None

    def _next_turn(self) -> tuple[Origin, asyncio.Future[Connection | None]] | None:
        """The first request still waiting, taken off the queue."""
        first = self._first_turn()
        if first is not None:
            self._waiting.popleft()
        return first

    def _free_place(self) -> None:
        """A place given up: to the first waiting request, or free."""
        nxt = self._next_turn()
        if nxt is None:
            self._slots -= 1
        else:
            nxt[1].set_result(None)

    async def _release(self, connection: Connection) -> None:
        """A connection back from an exchange: to the first waiting request, idle, or closed."""
        if connection.reusable and not self._closed:
            first = self._first_turn()
            if first is None and len(self._idle) < self._keep:
                connection.idle_since = asyncio.get_running_loop().time()
                self._idle.append(connection)
                return
            if first is not None and first[0] == connection.origin and not connection.is_readable():
                self._waiting.popleft()
                first[1].set_result(connection)
                return
        await self._drop(connection)  # its place goes to the first waiting request, if any

    async def _drop(self, connection: Connection) -> None:
        """Close a connection and give up its place."""
        self._open.discard(connection)
        await connection.aclose()
        self._free_place()

    async def aclose(self) -> None:
        """Close every connection, idle or in an exchange (whose read or write then fails), and fail the waiting."""
        self._closed = True
        self._idle.clear()
        for connection in list(self._open):
            await connection.aclose()
        while (nxt := self._next_turn()) is not None:
            nxt[1].set_exception(httpcore.ConnectError("the client's transport has been closed"))


class _Body(httpx.AsyncByteStream):
    """A response's body as httpx reads it, raising httpx's errors; closing it gives its connection back."""

    def __init__(self, transport: PlainTransport, connection: Connection, head: Head, timeout: float | None):
        self.head = head
        self._transport = transport
        self._connection = connection
        self._timeout = timeout
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:  # httpx reads a body once, and never after closing it
        with _as_httpx():
            async for part in self._connection.body(self.head, self._timeout):
                yield part

    async def read_whole(self, cap: int) -> bytearray | None:
        """The whole body in one buffer when the head gives its length, at most `cap` and WHOLE_MAX (else None:
        read it as a stream, which refuses a body past a cap as it grows)."""
        if not isinstance(self.head.body, int) or self.head.body > min(cap, WHOLE_MAX):
            return None
        with _as_httpx():
            return await self._connection.read_sized(self.head, self._timeout)

    async def aclose(self) -> None:
        if not self._released:
            self._released = True
            await self._transport._release(self._connection)


class PreparedPost:
    """A POST sent again and again with other bodies (an engine's generation requests): its head, but for the
    body's length, written once from the request httpx builds for it, with the client's headers and timeouts.

    Against building httpx's request and response for each, it saves about 55 us of client CPU a request
    (8-token answers, 16 in flight)."""

    def __init__(self, request: httpx.Request):
        url, headers = request.url, request.headers.raw
        if url.raw_scheme != b"http":  # never TLS: an https request here would go out in cleartext
            raise httpx.UnsupportedProtocol(f"this transport speaks plain http only, not {url.scheme!r}")
        lengths = [i for i, (name, _) in enumerate(headers) if name.lower() == b"content-length"]
        if request.method != "POST" or len(lengths) != 1:  # (header values unquoted: one may be an API key)
            raise ValueError(
                f"a prepared POST needs a POST with one Content-Length, not {request.method} with {len(lengths)}"
            )
        at = lengths[0]
        with _as_httpx():
            framing = request_framing(headers)
            self._start = request_line(b"POST", url.raw_path) + field_lines(headers[:at]) + headers[at][0] + b": "
            self._end = b"\r\n" + field_lines(headers[at + 1 :]) + b"\r\n"
        if framing.chunked:
            raise ValueError("a prepared POST has a Content-Length, not a chunked body")
        self._closes = framing.close  # the request asks the server to close the connection after answering it
        self.origin: Origin = (url.raw_scheme, url.raw_host, url.port or 80)
        self.timeouts: dict[str, Any] = request.extensions.get("timeout", {})

    def head(self, length: int) -> bytes:
        """The head for a body of `length` bytes: what `request_head` writes of the request httpx builds for it."""
        return b"%s%d%s" % (self._start, length, self._end)

    def framing(self, length: int) -> Framing:
        """How that head frames a body of `length` bytes."""
        return Framing(length, False, self._closes)


class PlainResponse:
    """A response to a prepared POST: the parts of httpx's response an engine reads (status, headers, raw body),
    raising httpx's errors; `aclose` gives its connection back."""

    def __init__(self, body: _Body):
        self.status_code = body.head.status
        self.headers = httpx.Headers(body.head.headers)
        self._body = body

    def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (once)."""
        return self._body.__aiter__()

    async def read_whole(self, cap: int) -> bytearray | None:
        """The body's bytes as sent, in one buffer, when its head gives their number and it is at most `cap`
        (once; else None)."""
        return await self._body.read_whole(cap)

    async def aclose(self) -> None:
        await self._body.aclose()


_HTTPX_ERRORS: list[tuple[type[Exception], type[httpx.HTTPError]]] = [
    (ProtocolError, httpx.RemoteProtocolError),
    (RequestError, httpx.LocalProtocolError),
] + [
    (getattr(httpcore, name), getattr(httpx, name))  # the two libraries name each error alike
    for name in (  # most specific first
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "TimeoutException",
        "ConnectError",
        "ReadError",
        "WriteError",
        "NetworkError",
        "ProxyError",
        "UnsupportedProtocol",
        "LocalProtocolError",
        "RemoteProtocolError",
        "ProtocolError",
    )
]


@contextmanager
def _as_httpx() -> Iterator[None]:
    """httpcore's exceptions (the sockets') and the protocol's as the httpx ones its default transport raises,
    so callers see one set."""
    try:
        yield
    except Exception as exc:
        for core, mapped in _HTTPX_ERRORS:
            if isinstance(exc, core):
                raise mapped(str(exc)) from exc
        raise
