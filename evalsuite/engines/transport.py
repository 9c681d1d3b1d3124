"""The HTTP transport under an engine's httpx client: httpcore's pool, with sockets driven by asyncio itself.

httpx reaches the event loop through httpcore's anyio backend, which opens a
cancel scope for every socket read and write and asks sniffio which loop is
running each time.  Against a fast local server that machinery cost 10 to 20 %
of the client's CPU per request, more than parsing the response
(bench/overhead.py).  For a plain-http endpoint at an IP address or at
`localhost`, reached without a proxy (the usual local `llama-server`, vLLM or
SGLang), requests go through `SocketBackend`: the same pool, HTTP/1.1 parser,
limits and timeouts, with non-blocking sockets read and written by the loop's
own calls.  Every other endpoint (TLS, a proxy, a host name, whose addresses
want anyio's happy-eyeballs connect) keeps httpx's default transport.
"""

from __future__ import annotations

import asyncio
import ipaddress
import select
import socket
import urllib.request
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx


def client_transport(base_url: str, limits: httpx.Limits) -> httpx.AsyncBaseTransport | None:
    """The transport for a client that talks to `base_url` only; None where httpx's own is the right one."""
    url = httpx.URL(base_url)
    if url.scheme != "http" or _proxied() or not (url.host == "localhost" or _literal(url.host, 0)):
        return None
    return PlainTransport(limits)


def _proxied() -> bool:
    """Whether httpx would route a plain-http request through a proxy taken from the environment."""
    return any(scheme in ("http", "all") for scheme in urllib.request.getproxies())


class SocketStream(httpcore.AsyncNetworkStream):
    """One connected non-blocking TCP socket; reads and writes try the socket before waiting on the loop."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._loop = asyncio.get_running_loop()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _mapped(httpcore.ReadError):
            try:
                return self.sock.recv(max_bytes)
            except BlockingIOError:
                pass
            try:
                async with asyncio.timeout(timeout):
                    return await self._loop.sock_recv(self.sock, max_bytes)
            except TimeoutError:
                raise httpcore.ReadTimeout(f"no data within {timeout} s") from None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with _mapped(httpcore.WriteError):
            try:
                sent = self.sock.send(buffer)
            except BlockingIOError:
                sent = 0
            if sent == len(buffer):
                return
            try:
                async with asyncio.timeout(timeout):
                    await self._loop.sock_sendall(self.sock, memoryview(buffer)[sent:])
            except TimeoutError:
                raise httpcore.WriteTimeout(f"could not send within {timeout} s") from None

    async def aclose(self) -> None:
        self.sock.close()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("this transport serves plain-http endpoints only (https uses httpx's own)")

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # the pool's test for a keep-alive connection the server has closed
            return _readable(self.sock)
        if info == "socket":
            return self.sock
        if info in ("client_addr", "server_addr"):
            try:
                return self.sock.getsockname() if info == "client_addr" else self.sock.getpeername()
            except OSError:
                return None
        return None


def _readable(sock: socket.socket) -> bool:
    """Whether a read would return at once (data or end of stream); a closed socket counts as readable."""
    if sock.fileno() < 0:
        return True
    if not hasattr(select, "poll"):  # Windows
        return bool(select.select([sock], [], [], 0)[0])
    poll = select.poll()
    poll.register(sock, select.POLLIN)
    return bool(poll.poll(0))


class SocketBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend on plain asyncio: TCP connections only."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                with _mapped(httpcore.ConnectError):
                    infos = _literal(host, port) or await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                    failure: OSError = OSError(f"no address for {host}:{port}")
                    for family, kind, proto, _, address in infos:
                        sock = socket.socket(family, kind, proto)
                        try:
                            _configure(sock, local_address, socket_options or ())
                            await loop.sock_connect(sock, address)
                        except OSError as exc:
                            sock.close()
                            failure = exc
                            continue
                        except BaseException:
                            sock.close()
                            raise
                        return SocketStream(sock)
                    raise failure
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"could not connect to {host}:{port} within {timeout} s") from None

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _literal(host: str, port: int) -> list[tuple[Any, ...]] | None:
    """The one address of an IP-literal host, as getaddrinfo would give it; None for a name."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    family, address = (socket.AF_INET, (host, port)) if ip.version == 4 else (socket.AF_INET6, (host, port, 0, 0))
    return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", address)]


def _configure(sock: socket.socket, local_address: str | None, options: Iterable[Any]) -> None:
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # requests are single writes: never wait on Nagle
    for option in options:
        sock.setsockopt(*option)
    if local_address:
        sock.bind((local_address, 0))


@contextmanager
def _mapped(failure: type[httpcore.NetworkError]) -> Iterator[None]:
    """An operating-system error as httpcore's network error of this operation, so httpx maps it as usual."""
    try:
        yield
    except OSError as exc:  # resets, aborts, refusals, a socket closed under the operation
        raise failure(f"{type(exc).__name__}: {exc}") from exc


class PlainTransport(httpx.AsyncBaseTransport):
    """httpx's transport contract over an httpcore pool that uses `SocketBackend`."""

    def __init__(self, limits: httpx.Limits):
        self.pool = httpcore.AsyncConnectionPool(
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


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: Any):
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        with _as_httpx():
            await self._stream.aclose()


_HTTPX_ERRORS: list[tuple[type[Exception], type[httpx.HTTPError]]] = [  # most specific first
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
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
