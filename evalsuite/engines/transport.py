"""The HTTP transport under an engine's httpx client, for local plain-http servers.

For an `http://` endpoint at an IP address or at `localhost`, reached without
a proxy (the usual local `llama-server`, vLLM or SGLang), requests go through
`PlainTransport`: httpcore's own pool, HTTP/1.1 parser, limits and timeouts,
over `sockets.SocketBackend` instead of anyio (bench/overhead.py: 10-20 % of
the client's CPU per request), its response bodies read a network read at a
time, not an HTTP chunk at a time (`http11.py`).  Every other endpoint (TLS,
a proxy, a host name, whose addresses want anyio's happy-eyeballs connect)
keeps httpx's default transport.  Either way the caller sees httpx's
exceptions.
"""

from __future__ import annotations

import sys
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import httpcore
import httpx
from httpcore import AsyncConnectionInterface

from evalsuite.engines.http11 import PlainConnection
from evalsuite.engines.sockets import SocketBackend, ip_literal

if TYPE_CHECKING:
    from httpcore._async.connection_pool import AsyncPoolRequest


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
    """httpx's transport contract over an httpcore pool that uses `SocketBackend`."""

    def __init__(self, limits: httpx.Limits):
        pool = LinearPool if httpcore.__version__.startswith("1.0.") else httpcore.AsyncConnectionPool
        self.pool = pool(
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=SocketBackend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx():
            response = await self.pool.handle_async_request(core)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.pool.aclose()


class LinearPool(httpcore.AsyncConnectionPool):
    """httpcore's connection pool, its bookkeeping looking at each connection once.

    httpcore (1.0) takes stock of its pool whenever a request comes or a response ends, and for each
    idle connection there it counts the whole pool again: with 64 connections, some 1,500 calls per
    request (bench/scale.py ingest, chat 2048 at concurrency 64: 0.6 us of client CPU per token, now
    0.28).  The decisions here are its own: connections closed or expired leave, an idle one leaves
    while the pool holds more than it keeps alive, then each queued request takes the first connection
    that can serve it, or a new one while there is room, or the place of the first idle one.  A request
    is woken only when it waits (`_assign`), and connections are closed under httpcore's shielded scope
    only when there are some.  It overrides private methods of httpcore 1.0's pool, so PlainTransport
    uses it with httpcore 1.0 only.
    """

    def _assign_requests_to_connections(self) -> list[AsyncConnectionInterface]:
        closing: list[AsyncConnectionInterface] = []
        for connection in list(self._connections):
            if connection.is_closed():
                self._connections.remove(connection)
            elif connection.has_expired() or (
                connection.is_idle() and len(self._connections) > self._max_keepalive_connections
            ):
                self._connections.remove(connection)
                closing.append(connection)
        for request in [request for request in self._requests if request.is_queued()]:
            origin = request.request.url.origin
            serving = (c for c in self._connections if c.can_handle_request(origin) and c.is_available())
            chosen = next(serving, None)
            if chosen is None and len(self._connections) >= self._max_connections:
                idle = next((c for c in self._connections if c.is_idle()), None)
                if idle is None:
                    continue  # it waits for a connection
                self._connections.remove(idle)
                closing.append(idle)
            if chosen is None:
                chosen = self.create_connection(origin)
                self._connections.append(chosen)
            _assign(request, chosen)
        return closing

    async def _close_connections(self, closing: list[AsyncConnectionInterface]) -> None:
        if closing:  # httpcore opens a cancel-shielded scope (anyio, sniffio) even for none
            await super()._close_connections(closing)

    def create_connection(self, origin: httpcore.Origin) -> AsyncConnectionInterface:
        """A plain-http connection whose response bodies are read a network read at a time (http11.py)."""
        return PlainConnection(
            origin=origin,
            keepalive_expiry=self._keepalive_expiry,
            retries=self._retries,
            local_address=self._local_address,
            network_backend=self._network_backend,
            socket_options=self._socket_options,
        )


def _assign(request: AsyncPoolRequest, connection: AsyncConnectionInterface) -> None:
    """`request.assign_to_connection`, waking its task only when it waits: a request that finds a connection at
    once is never waited on, and setting httpcore's event would make it an anyio event (sniffio, anyio) per request.
    An event's backend is set by the first wait, before that task gives the loop its turn."""
    if request._connection_acquired._backend:
        request.assign_to_connection(connection)
    else:
        request.connection = connection


class _Body(httpx.AsyncByteStream):
    """The pool's response body as httpx reads it, raising httpx's errors."""

    def __init__(self, stream: Any):
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        with _as_httpx():
            await self._stream.aclose()


_HTTPX_ERRORS: list[tuple[type[Exception], type[httpx.HTTPError]]] = [
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
    """httpcore's exceptions as the httpx ones its default transport raises, so callers see one set."""
    try:
        yield
    except Exception as exc:
        for core, mapped in _HTTPX_ERRORS:
            if isinstance(exc, core):
                raise mapped(str(exc)) from exc
        raise
