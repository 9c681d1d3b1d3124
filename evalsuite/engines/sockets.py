"""httpcore's network backend on plain asyncio: non-blocking TCP sockets read and written by the loop's own calls.

httpcore's default backend reaches asyncio through anyio, which opens a cancel
scope for every read and write and asks sniffio which loop is running each
time; against a fast local server that was 10-20 % of the client's CPU per
request.  Here a read or write first tries the socket and only parks on the
loop when it would block.  A server streaming slower than the client reads
brings one event a read, so a read that waits is made once a token: the
loop keeps watching the socket between reads (no epoll registration a
read), reads it for the waiting read as its own transports do, and one
timer per connection, moved on lazily, holds the read deadline (no timer
scheduled and cancelled a read): 15-16 against 37-42 us a read with
`loop.sock_recv` under `asyncio.timeout` (docs/speed.md).  Where such a
server still sends faster than a short wait, a read after a trickle waits a
little (at most a hundredth of the request's time so far) and takes several
events at once (engines/gather.py).  Writes wait under
`asyncio.timeout`.  Errors become httpcore's network errors of the
operation, so httpx maps them as it maps its own backend's.  Addresses are
tried in turn (no happy eyeballs): `transport.py` uses this backend only for
hosts that answer or refuse at once.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import math
import select
import socket
import time
from collections.abc import Awaitable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, overload

import httpcore

from evalsuite.engines.gather import Gathering

T = TypeVar("T")
YIELD_EVERY = 16  # reads in a row that find data (up to 64 KiB each) before one pass of the event loop


class SocketStream(httpcore.AsyncNetworkStream):
    """One connected non-blocking TCP socket; reads and writes try the socket before waiting on the loop."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._loop = asyncio.get_running_loop()
        self._waiting = 0  # reads or writes parked on the loop
        self._closing = False
        self._ready_reads = 0  # reads in a row that found data without waiting
        self._more = False  # the last read filled its buffer: more is likely waiting in the socket
        self._reader: asyncio.Future[Any] | None = None  # the read waiting for the socket to be readable
        self._watched = -1  # the descriptor the loop watches for data (see `_on_readable`); -1: none
        self._wanted = 0  # the most the waiting read takes
        self._into: memoryview | None = None  # where the waiting read puts what it takes (None: a new bytes)
        self._deadline = math.inf  # when the waiting read times out
        self._timer: asyncio.TimerHandle | None = None  # fires at `_timer_at`, at or before the deadline
        self._timer_at = math.inf
        self.gathering = Gathering()  # how long a read of a trickle waits before it looks (engines/gather.py)
        self._gather_timer: asyncio.TimerHandle | None = None  # ends the waiting read's gathering (`_gathered`)
        self._missed = False  # the waiting read's gathering found nothing
        self._loop_watches = False  # the loop has watched the socket (a proactor loop cannot)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._ready_reads >= YIELD_EVERY:  # a body arriving faster than it is read still lets other tasks run
            self._ready_reads = 0
            await asyncio.sleep(0)
        try:  # as `_mapped` does, without its generator (a read a token when the server is slow)
            if self._more:  # the last read filled its buffer: the next finds data at once, without the loop
                try:
                    data = self.sock.recv(max_bytes)
                except BlockingIOError:
                    pass
                else:
                    self._ready_reads += 1
                    self._more = len(data) == max_bytes
                    return data
            self._ready_reads = 0  # (a read that came short drained the socket: trying it again first would fail)
            data = await self._receive(max_bytes, timeout)
        except OSError as exc:
            raise _network_error(httpcore.ReadError, exc) from exc
        self._more = len(data) == max_bytes
        return data

    async def read_into(self, buffer: memoryview, timeout: float | None = None) -> int:
        """`read` into `buffer`, returning how many bytes came (0: the peer closed): a body whose length is known
        goes from the socket to its place, not through a bytes object a read and a join."""
        if self._ready_reads >= YIELD_EVERY:
            self._ready_reads = 0
            await asyncio.sleep(0)
        try:
            if self._more:
                try:
                    got = self.sock.recv_into(buffer)
                except BlockingIOError:
                    pass
                else:
                    self._ready_reads += 1
                    self._more = got == len(buffer)
                    return got
            self._ready_reads = 0
            got = await self._receive(len(buffer), timeout, buffer)
        except OSError as exc:
            raise _network_error(httpcore.ReadError, exc) from exc
        self._more = got == len(buffer)
        return got

    @overload
    async def _receive(self, max_bytes: int, timeout: float | None) -> bytes: ...
    @overload
    async def _receive(self, max_bytes: int, timeout: float | None, into: memoryview) -> int: ...

    async def _receive(self, max_bytes: int, timeout: float | None, into: memoryview | None = None) -> bytes | int:
        """What the loop reads from the socket once it is readable (`_on_readable`), or how much of it went
        `into` a buffer; httpcore's ReadTimeout after `timeout` seconds.  A close meanwhile wakes it, which
        then fails as the connection's network error."""
        began = time.monotonic()
        wait = self.gathering.wait(began, timeout) if self._loop_watches else 0.0
        if wait:
            self._unwatch()  # read once the wait is over (`_gathered`), not as each event comes
        elif self._watched < 0:
            if self.sock.fileno() < 0:  # closed: the loop cannot watch it (its receive failed with this error)
                raise OSError(errno.EBADF, "Bad file descriptor")
            try:
                self._watch()
            except NotImplementedError:  # a loop that cannot watch sockets (Windows' proactor): its own receive
                receive = (
                    self._loop.sock_recv(self.sock, max_bytes)
                    if into is None
                    else self._loop.sock_recv_into(self.sock, into)
                )
                return await self._park(receive, timeout, httpcore.ReadTimeout, "no data")
        waiter = self._reader = self._loop.create_future()
        self._wanted, self._into = max_bytes, into
        self._deadline = math.inf if timeout is None else self._loop.time() + timeout
        if self._deadline < self._timer_at:  # the timer would fire too late for this read: set it earlier
            self._set_timer(self._deadline)
        self._gather_timer = self._loop.call_later(wait, self._gathered) if wait else None
        self._missed = False
        self._waiting += 1
        try:
            data = await waiter
        except _Late:
            raise httpcore.ReadTimeout(f"no data within {timeout} s") from None
        finally:
            self._waiting -= 1
            if self._gather_timer is not None:
                self._gather_timer.cancel()
                self._gather_timer = None
            if self._reader is waiter:
                self._reader = None
            self._into = None
            if self._closing and not self._waiting:
                self._release()
        if self._closing:
            raise ConnectionAbortedError("the connection was closed while the operation waited")
        got = data if isinstance(data, int) else len(data)
        self.gathering.read(got, time.monotonic() - began, gathered=bool(wait) and not self._missed)
        return data

    def _gathered(self) -> None:
        """A gathering read's wait is over: it takes what came meanwhile, or waits for the socket as usual."""
        self._gather_timer = None
        waiter = self._reader
        if waiter is None or waiter.done():
            return
        self._on_readable()
        if self._reader is waiter:  # nothing came: the server is slower than the wait
            self._missed = True
            self._watch()

    def _watch(self) -> None:
        """Have the loop watch the socket for data (`_on_readable`)."""
        self._loop.add_reader(self.sock.fileno(), self._on_readable)
        self._watched = self.sock.fileno()
        self._loop_watches = True

    def _on_readable(self) -> None:
        """The loop's call while the socket is readable: it reads for the waiting read, as the loop's own
        transports do, so that the socket is drained before the loop looks again.  With no read waiting it stops
        watching (the loop would call it on every pass until one reads); the next read that waits watches again."""
        waiter, self._reader = self._reader, None
        if waiter is None or waiter.done():  # none waits, or its task was cancelled meanwhile
            self._unwatch()
            return
        try:
            data: bytes | int = self.sock.recv(self._wanted) if self._into is None else self.sock.recv_into(self._into)
        except BlockingIOError:  # nothing after all: wait on
            self._reader = waiter
        except OSError as exc:  # a reset, or the kernel timing the peer out: the read's network error
            waiter.set_exception(exc)
        else:
            waiter.set_result(data)

    def _set_timer(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = (
            (None, math.inf) if when == math.inf else (self._loop.call_at(when, self._on_timer), when)
        )

    def _on_timer(self) -> None:
        """The read deadline's timer: a read waiting since before it fails; a later deadline sets it again."""
        self._timer, self._timer_at, fired_at = None, math.inf, self._timer_at
        waiter = self._reader
        if waiter is None or waiter.done():
            return  # no read waits: the next one sets the timer
        if self._deadline <= fired_at:
            self._reader = None
            waiter.set_exception(_Late())
        else:
            self._set_timer(self._deadline)

    def _unwatch(self) -> None:
        """Stop the loop watching the socket (by the number it was watched under: the socket may be closed)."""
        if self._watched >= 0:
            self._loop.remove_reader(self._watched)
            self._watched = -1

    def _release(self) -> None:
        """Stop watching the socket, drop its timer, and close it."""
        self._unwatch()
        self._set_timer(math.inf)
        self.sock.close()

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self.gathering.sent()
        with _mapped(httpcore.WriteError):
            try:
                sent = self.sock.send(buffer)
            except BlockingIOError:
                sent = 0
            if sent < len(buffer):
                rest = memoryview(buffer)[sent:]
                await self._park(
                    self._loop.sock_sendall(self.sock, rest), timeout, httpcore.WriteTimeout, "could not send"
                )

    async def _park(
        self, operation: Awaitable[T], timeout: float | None, late: type[httpcore.TimeoutException], what: str
    ) -> T:
        """The result of a socket operation the loop completes; a deadline past is httpcore's timeout of its kind.

        A close meanwhile (`aclose`) wakes the operation, which then fails as the connection's network error.
        """
        deadline = asyncio.timeout(timeout)
        self._waiting += 1
        try:
            async with deadline:
                result = await operation
        except TimeoutError:
            if not deadline.expired():
                raise  # the kernel's ETIMEDOUT (a vanished peer): a network error, mapped by the caller
            raise late(f"{what} within {timeout} s") from None
        finally:
            self._waiting -= 1
            if self._closing and not self._waiting:
                self._release()
        if self._closing:
            raise ConnectionAbortedError("the connection was closed while the operation waited")
        return result

    async def aclose(self) -> None:
        """Close the socket; one an operation waits on is shut down first, and closed when that operation leaves.

        Closing it under the waiting operation would leave the loop watching a dead descriptor: the
        operation would hang until its deadline, and the next socket given that number could not register.
        """
        if not self._waiting:
            self._release()
            return
        self._closing = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # the waiting read sees the end, the waiting write an error
        except OSError:  # not connected any more: the loop has already woken it
            pass
        if self._gather_timer is not None:  # a gathering read does not watch the socket: it looks now
            self._gather_timer.cancel()
            self._gathered()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        self._release()
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
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                with _mapped(httpcore.ConnectError):
                    infos = ip_literal(host, port) or await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                    failures: list[str] = []
                    for family, kind, proto, _, address in infos:  # in turn: each answers or refuses at once
                        try:
                            sock = socket.socket(family, kind, proto)
                        except OSError as exc:  # e.g. IPv6 disabled in the kernel while ::1 resolves
                            failures.append(f"{address[0]}: {exc}")
                            continue
                        try:
                            _configure(sock, local_address, socket_options or ())
                            await loop.sock_connect(sock, address)
                        except OSError as exc:
                            sock.close()
                            failures.append(f"{address[0]}: {exc}")
                            continue
                        except BaseException:
                            sock.close()
                            raise
                        return SocketStream(sock)
                    raise OSError(f"could not connect to {host}:{port} ({'; '.join(failures) or 'no address'})")
        except TimeoutError:
            if not deadline.expired():
                raise
            raise httpcore.ConnectTimeout(f"could not connect to {host}:{port} within {timeout} s") from None

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def ip_literal(host: str, port: int) -> list[tuple[Any, ...]] | None:
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


class _Late(Exception):
    """A waiting read's deadline passed (`SocketStream._on_timer`); the read raises httpcore's ReadTimeout."""


@contextmanager
def _mapped(failure: type[httpcore.NetworkError]) -> Iterator[None]:
    """An operating-system error as httpcore's network error of this operation, so httpx maps it as usual."""
    try:
        yield
    except OSError as exc:  # resets, aborts, refusals, a socket closed under the operation
        raise _network_error(failure, exc) from exc


def _network_error(failure: type[httpcore.NetworkError], exc: OSError) -> httpcore.NetworkError:
    return failure(f"{type(exc).__name__}: {exc}")
