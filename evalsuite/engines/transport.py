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
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from evalsuite.engines.connection import Connection, Origin
from evalsuite.engines.http11 import Head, ProtocolError, RequestError, request_head
from evalsuite.engines.sockets import SocketBackend, SocketStream, ip_literal


def client_transport(base_url: str, limits: httpx.Limits) -> httpx.AsyncBaseTransport | None:
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
    `max_connections` are open, or closes an idle one to another server to make room, or waits its turn
    up to the pool timeout.  A response whose body ended cleanly gives its connection back to the idle
    ones (up to `max_keepalive_connections`); any other closes it.  Either wakes the first waiting request.
    """

    def __init__(self, limits: httpx.Limits):
        self._max = limits.max_connections or sys.maxsize
        self._keep = self._max if limits.max_keepalive_connections is None else limits.max_keepalive_connections
        self._expiry = limits.keepalive_expiry
        self._backend = SocketBackend()
        self._idle: list[Connection] = []  # the one used last, last
        self._open: set[Connection] = set()
        self._slots = 0  # connections open or being opened
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        url = request.url
        if url.raw_scheme != b"http":  # never TLS: an https request here would go out in cleartext
            raise httpx.UnsupportedProtocol(f"this transport speaks plain http only, not {url.scheme!r}")
        with _as_httpx():
            sent = request_head(request.method.encode("ascii"), url.raw_path, request.headers.raw)
            connection = await self._acquire((url.raw_scheme, url.raw_host, url.port or 80), timeouts)
            try:
                head = await connection.exchange(request, sent, timeouts)
            except BaseException:
                await self._release(connection)
                raise
        return httpx.Response(
            status_code=head.status,
            headers=head.headers,
            stream=_Body(self, connection, head, timeouts.get("read")),
            extensions={"http_version": b"HTTP/" + head.version, "reason_phrase": head.reason},
        )

    async def _acquire(self, origin: Origin, timeouts: dict[str, Any]) -> Connection:
        """A connection to `origin` for one exchange: an idle one, a new one, or the next freed after a wait."""
        while True:
            if self._closed:
                raise httpcore.ConnectError("the client's transport has been closed")
            connection = await self._idle_to(origin)
            if connection is not None:
                return connection
            if self._slots >= self._max and self._idle:  # room for this server, made by one idle to another
                await self._drop(self._idle.pop(0))
            if self._slots < self._max:
                self._slots += 1
                try:
                    stream = await self._backend.connect_tcp(
                        origin[1].decode("ascii"), origin[2], timeouts.get("connect")
                    )
                except BaseException:
                    self._slots -= 1
                    self._wake()
                    raise
                assert isinstance(stream, SocketStream)
                connection = Connection(stream, origin)
                self._open.add(connection)
                return connection
            await self._wait(timeouts.get("pool"))

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

    async def _wait(self, timeout: float | None) -> None:
        """Until a connection is given back or closed (`_wake`), in turn with the other waiting requests."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except BaseException as exc:  # timed out or cancelled: a turn given to it meanwhile goes on to the next
            if waiter.done() and not waiter.cancelled():
                self._wake()
            if isinstance(exc, TimeoutError):
                raise httpcore.PoolTimeout(f"no connection free within {timeout} s") from None
            raise
        finally:
            if not waiter.done():
                self._waiting.remove(waiter)
                waiter.cancel()

    def _wake(self) -> None:
        """The first waiting request looks again."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _release(self, connection: Connection) -> None:
        """A connection back from an exchange: idle again when it may go on, else closed."""
        if connection.reusable and not self._closed and len(self._idle) < self._keep:
            connection.idle_since = asyncio.get_running_loop().time()
            self._idle.append(connection)
        else:
            await self._drop(connection)
        self._wake()

    async def _drop(self, connection: Connection) -> None:
        self._open.discard(connection)
        self._slots -= 1
        await connection.aclose()

    async def aclose(self) -> None:
        """Close every connection, idle or in an exchange (whose read or write then fails), and wake the waiting."""
        self._closed = True
        self._idle.clear()
        for connection in list(self._open):
            await connection.aclose()
        while self._waiting:
            self._wake()


class _Body(httpx.AsyncByteStream):
    """A response's body as httpx reads it, raising httpx's errors; closing it gives its connection back."""

    def __init__(self, transport: PlainTransport, connection: Connection, head: Head, timeout: float | None):
        self._transport = transport
        self._connection: Connection | None = connection
        self._head = head
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            raise httpx.StreamClosed()
        with _as_httpx():
            async for part in connection.body(self._head, self._timeout):
                yield part

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await self._transport._release(connection)


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
