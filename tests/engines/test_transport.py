"""The plain-http transport: which endpoints get it, and that it keeps httpx's behaviour on real sockets.

Each test serves raw HTTP/1.1 from an asyncio server on loopback, so what the
server does to the connection (answers, stalls, closes, reads slowly) is exact.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpcore
import httpx
import pytest
from fake_server import FakeServer

from evalsuite.config import TargetConfig
from evalsuite.engines import make_engine
from evalsuite.engines.base import request_failure
from evalsuite.engines.body import ACCEPT_ENCODING, JSON_HEADERS, read_body
from evalsuite.engines.connection import READ_SIZE, WHOLE_MAX, request_framing
from evalsuite.engines.http11 import request_head
from evalsuite.engines.retry import RequestFailed
from evalsuite.engines.sockets import YIELD_EVERY, SocketBackend, SocketStream
from evalsuite.engines.transport import PlainTransport, PreparedPost, _as_httpx, client_transport
from evalsuite.records import GenerationParams, Sample

LIMITS = httpx.Limits(max_connections=2, max_keepalive_connections=2)
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1", "HTTP://localhost:8080/v1", "http://[::1]:8080/v1"])
def test_plain_http_to_an_address_without_a_proxy_gets_the_socket_transport(url: str) -> None:
    assert isinstance(client_transport(url, LIMITS), PlainTransport)


def test_a_host_name_keeps_httpx_own_transport_and_its_happy_eyeballs_connect() -> None:
    assert client_transport("http://gpu-box.lan:8080/v1", LIMITS) is None


@pytest.mark.parametrize("var", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
def test_a_proxy_for_plain_http_keeps_httpx_own_transport(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    monkeypatch.setenv(var, "http://proxy.internal:3128")
    assert client_transport("http://127.0.0.1:8080/v1", LIMITS) is None


def test_https_keeps_httpx_own_transport() -> None:
    assert client_transport("https://api.example.com/v1", LIMITS) is None


HTTPCORE_ERRORS = [
    kind
    for kind in vars(httpcore).values()
    if isinstance(kind, type) and issubclass(kind, Exception) and kind is not httpcore.ConnectionNotAvailable
]  # every error httpcore can raise to its caller (ConnectionNotAvailable stays inside its pool)


@pytest.mark.parametrize("core", HTTPCORE_ERRORS, ids=lambda c: c.__name__)
def test_each_httpcore_error_becomes_the_httpx_error_of_its_own_name(core: type[Exception]) -> None:
    with pytest.raises(httpx.HTTPError) as caught, _as_httpx():
        raise core("what happened")
    assert type(caught.value).__name__ == core.__name__
    assert str(caught.value) == "what happened"


async def _request(reader: asyncio.StreamReader) -> bytes:
    """One request's body (Content-Length framing), or b"" when the client closed the connection."""
    head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return await reader.readexactly(length) if length else b""


def _answer(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n%s" % (len(body), body)


@asynccontextmanager
async def _served(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback server running `handler` per connection: its URL and a count of connections accepted."""
    connections: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            await handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", connections
    finally:
        server.close()


def _client(timeout: float = 5.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=PlainTransport(LIMITS), timeout=timeout)


async def _echo_lengths(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while not reader.at_eof():
        body = await _request(reader)
        writer.write(_answer(str(len(body)).encode()))
        await writer.drain()


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _request(reader)
    await asyncio.sleep(5)


@pytest.mark.asyncio
async def test_requests_share_one_kept_alive_connection() -> None:
    async with _served(_echo_lengths) as (url, connections), _client() as client:
        answers = [(await client.post(url, content=b"x" * n)).text for n in (0, 1, 1000)]
    assert answers == ["0", "1", "1000"]
    assert len(connections) == 1


@pytest.mark.asyncio
async def test_a_body_larger_than_the_socket_buffers_goes_out_whole_and_comes_back_whole() -> None:
    big = bytes(range(256)) * (12 * 4096)  # 12 MiB: the send waits for the server to read, more than once

    async def slow_reader(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = await _request(reader)
        writer.write(_answer(body))
        await writer.drain()

    async with _served(slow_reader) as (url, _), _client() as client:
        response = await client.post(url, content=big)
    assert response.content == big


def _slow_echo(delay_s: float) -> Handler:
    """A server that answers each request with its body, `delay_s` after reading it."""

    async def slow_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            body = await _request(reader)
            await asyncio.sleep(delay_s)
            writer.write(_answer(body))
            await writer.drain()

    return slow_echo


@pytest.mark.asyncio
async def test_requests_beyond_the_connection_limit_wait_and_are_woken_as_connections_free() -> None:
    async with _served(_slow_echo(0.02)) as (url, connections), _client(timeout=5) as client:
        async with asyncio.timeout(5):  # a request left waiting would hang here
            answers = await asyncio.gather(*(client.post(url, content=b"%d" % i) for i in range(7)))
    assert [a.text for a in answers] == [str(i) for i in range(7)]
    assert len(connections) == LIMITS.max_connections  # five of them waited for one of the two


@pytest.mark.asyncio
async def test_a_connection_the_server_closed_while_idle_is_replaced_not_failed() -> None:
    async def one_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(_answer(b"ok"))  # says keep-alive, then hangs up anyway
        await writer.drain()

    async with _served(one_then_close) as (url, connections), _client() as client:
        first = await client.get(url)
        await asyncio.sleep(0.05)  # the close reaches the client's socket
        second = await client.get(url)
    assert (first.text, second.text) == ("ok", "ok")
    assert len(connections) == 2


@pytest.mark.asyncio
async def test_a_silent_server_is_a_read_timeout() -> None:
    async with _served(_silent) as (url, _), _client(timeout=0.2) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(url)


@pytest.mark.asyncio
async def test_a_server_that_never_reads_is_a_write_timeout() -> None:
    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async with _served(deaf) as (url, _), _client(timeout=0.3) as client:
        with pytest.raises(httpx.WriteTimeout):
            await client.post(url, content=b"x" * (64 * 2**20))


@pytest.mark.asyncio
async def test_a_body_cut_short_is_a_protocol_error_the_retry_policy_calls_connection() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()

    async with _served(cut) as (url, _), _client() as client:
        with pytest.raises(httpx.RemoteProtocolError) as caught:
            await client.get(url)
    assert request_failure(caught.value).kind == "connection"


@pytest.mark.asyncio
async def test_localhost_reaches_a_server_on_either_loopback_address() -> None:
    async with _served(_echo_lengths) as (url, _), _client() as client:
        response = await client.post(url.replace("127.0.0.1", "localhost"), content=b"abc")
    assert response.text == "3"


@pytest.mark.asyncio
async def test_a_refused_connection_is_a_connect_error() -> None:
    async with _served(_echo_lengths) as (url, _):
        pass  # the port is free again: nothing listens there
    async with _client() as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await client.get(url)
    assert request_failure(caught.value).kind == "connection"


@pytest.mark.asyncio
async def test_closing_the_client_under_a_waiting_request_fails_it_at_once_and_breaks_nothing_after() -> None:
    async with _served(_silent) as (silent_url, _), _served(_echo_lengths) as (echo_url, _):
        client = _client(timeout=30)
        waiting = asyncio.create_task(client.get(silent_url))
        await asyncio.sleep(0.2)  # the request is sent and parked on the loop, waiting for an answer
        started = asyncio.get_running_loop().time()
        await client.aclose()
        with pytest.raises(httpx.ReadError):
            await waiting
        assert asyncio.get_running_loop().time() - started < 5  # woken by the close, not by its 30 s deadline
        async with _client() as fresh, httpx.AsyncClient() as default:  # the loop still serves new sockets
            assert (await fresh.post(echo_url, content=b"ab")).text == "2"
            assert (await default.post(echo_url, content=b"abc")).text == "3"


@pytest.mark.asyncio
async def test_a_request_cancelled_while_it_waits_leaves_the_client_usable() -> None:
    async with _served(_silent) as (silent_url, _), _served(_echo_lengths) as (echo_url, _), _client() as client:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await client.get(silent_url)
        assert (await client.post(echo_url, content=b"abcd")).text == "4"


@pytest.mark.asyncio
async def test_an_address_whose_socket_cannot_be_made_is_skipped_for_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    async with _served(_echo_lengths) as (url, connections):
        port = int(url.rsplit(":", 1)[1])
        unsupported = 250  # no such address family: socket() fails as it does for ::1 on a kernel without IPv6

        async def resolve(host: str, port: int, **_: object) -> list[tuple[object, ...]]:
            return [
                (unsupported, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
            ]

        monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", resolve)
        stream = await SocketBackend().connect_tcp("localhost", port, timeout=5)
        await stream.aclose()
        await asyncio.sleep(0.05)
    assert len(connections) == 1


class _VanishedPeer:
    """A loop whose sending fails as the kernel's does when a peer stops acknowledging (ETIMEDOUT)."""

    async def sock_sendall(self, sock: socket.socket, data: object) -> None:
        raise TimeoutError(errno.ETIMEDOUT, "Connection timed out")


class _VanishedSocket:
    """A socket whose receiving fails as the kernel's does when a peer stops acknowledging (ETIMEDOUT)."""

    def __init__(self, sock: socket.socket):
        self.real = sock

    def recv(self, n: int) -> bytes:
        raise TimeoutError(errno.ETIMEDOUT, "Connection timed out")

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


@pytest.mark.asyncio
async def test_the_kernel_timing_out_a_peer_is_a_network_error_not_our_deadline() -> None:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    stream = SocketStream(ours)
    try:
        stream.sock = _VanishedSocket(ours)  # type: ignore[assignment]
        theirs.send(b"x")  # the socket turns readable; reading it fails
        with pytest.raises(httpcore.ReadError, match="TimeoutError"):
            await stream.read(1024, timeout=5)
        stream.sock = ours
        stream._loop = _VanishedPeer()  # type: ignore[assignment]
        with pytest.raises(httpcore.WriteError, match="TimeoutError"):
            await stream.write(b"x" * 2**22, timeout=5)  # more than the socket takes at once: the rest waits
    finally:
        stream._loop = asyncio.get_running_loop()
        await stream.aclose()
        theirs.close()


@pytest.mark.parametrize("into", [False, True], ids=["read", "read_into"])
@pytest.mark.asyncio
async def test_a_long_body_already_received_still_lets_other_tasks_run(into: bool) -> None:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.sendall(b"x" * (4 * YIELD_EVERY * 64))
    stream = SocketStream(ours)
    place = memoryview(bytearray(64))
    passes = 0

    async def count() -> None:
        nonlocal passes
        while True:
            passes += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count())
    await asyncio.sleep(0)
    before = passes
    try:
        for _ in range(4 * YIELD_EVERY):  # every read finds data: none of them waits
            if into:
                assert await stream.read_into(place) == 64 and place == b"x" * 64
            else:
                assert await stream.read(64) == b"x" * 64
    finally:
        counter.cancel()
        await stream.aclose()
        theirs.close()
    assert passes - before >= 3


@pytest.mark.asyncio
async def test_an_engine_generates_through_it(fake_server: FakeServer) -> None:
    target = TargetConfig(name="t", engine="llamacpp", base_url=fake_server.base_url, model="fake-model")
    engine = make_engine(target)
    assert isinstance(engine.http._transport, PlainTransport)  # type: ignore[attr-defined]
    sample = Sample(id="s1", task="t", messages=({"role": "user", "content": "two plus two"},), reference="4")
    try:
        completions = [await engine.generate(sample, GenerationParams(max_tokens=8, top_logprobs=2)) for _ in "ab"]
    finally:
        await engine.aclose()
    assert completions[0].text == completions[1].text != ""
    assert completions[0].tokens is not None and len(completions[0].tokens.ids) == 8


def _limited(**limits: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=PlainTransport(httpx.Limits(**limits)), timeout=5)


@pytest.mark.asyncio
async def test_an_idle_connection_past_the_keep_alive_expiry_is_closed_and_a_new_one_opened() -> None:
    async with _served(_echo_lengths) as (url, connections), _limited(keepalive_expiry=0.1) as client:
        assert (await client.post(url, content=b"a")).text == "1"
        assert (await client.post(url, content=b"ab")).text == "2"  # at once: the same connection
        await asyncio.sleep(0.2)
        assert (await client.post(url, content=b"abc")).text == "3"
    assert len(connections) == 2


@pytest.mark.asyncio
async def test_no_connection_is_kept_beyond_max_keepalive_connections() -> None:
    async with _served(_echo_lengths) as (url, connections), _limited(max_keepalive_connections=0) as client:
        answers = [(await client.post(url, content=b"x" * n)).text for n in range(3)]
    assert answers == ["0", "1", "2"]
    assert len(connections) == 3


@pytest.mark.asyncio
async def test_a_request_that_waits_past_the_pool_timeout_is_a_pool_timeout_and_the_pool_goes_on() -> None:
    async with _served(_slow_echo(0.3)) as (url, _), _limited(max_connections=1) as client:
        first = asyncio.create_task(client.post(url, content=b"a"))
        await asyncio.sleep(0.05)
        with pytest.raises(httpx.PoolTimeout):
            await client.post(url, content=b"b", timeout=httpx.Timeout(5, pool=0.05))
        assert (await first).text == "a"
        assert (await client.post(url, content=b"cc")).text == "cc"


@pytest.mark.asyncio
async def test_a_waiting_request_cancelled_after_its_turn_came_passes_the_turn_on() -> None:
    release = asyncio.Event()

    async def gated_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            body = await _request(reader)
            if body == b"first":
                await release.wait()
            writer.write(_answer(body))
            await writer.drain()

    async with _served(gated_echo) as (url, _), _limited(max_connections=1) as client:
        first = asyncio.create_task(client.post(url, content=b"first"))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(client.post(url, content=b"second"))
        third = asyncio.create_task(client.post(url, content=b"third"))
        await asyncio.sleep(0.05)  # both wait for the one connection
        release.set()
        await first  # its connection goes back and wakes the second, which is cancelled before it runs
        second.cancel()
        async with asyncio.timeout(5):  # a lost turn would leave the third waiting for good
            assert (await third).text == "third"
        assert second.cancelled()


@pytest.mark.asyncio
async def test_an_idle_connection_to_another_server_is_closed_to_make_room() -> None:
    async with _served(_echo_lengths) as (one, to_one), _served(_echo_lengths) as (other, to_other):
        async with _limited(max_connections=1) as client, asyncio.timeout(5):
            assert (await client.post(one, content=b"a")).text == "1"
            assert (await client.post(other, content=b"ab")).text == "2"
            assert (await client.post(one, content=b"abc")).text == "3"
    assert (len(to_one), len(to_other)) == (2, 1)  # the first server's connection was closed for the other's


async def _answering(raw: bytes) -> Handler:
    """A server that answers each request with `raw`, its body a moment after its head (in a read of its own)."""
    split = raw.rfind(b"\r\n\r\n") + 4

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            await _request(reader)
            writer.write(raw[:split])
            await writer.drain()
            await asyncio.sleep(0.02)
            writer.write(raw[split:])
            await writer.drain()
            if raw.endswith(b"until close"):
                return

    return handler


@pytest.mark.parametrize(
    "raw,method,body,connections",
    [
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET", b"ok", 1),
        (b"HTTP/1.1 200 OK\r\n\r\nread until close", "GET", b"read until close", 2),
        (b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", "GET", b"", 1),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD", b"", 1),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET", b"ok", 2),
    ],
    ids=["informational first", "until close", "204", "HEAD", "HTTP/1.0"],
)
@pytest.mark.asyncio
async def test_each_way_a_body_ends_is_read_to_its_end_and_decides_reuse(
    raw: bytes, method: str, body: bytes, connections: int
) -> None:
    async with _served(await _answering(raw)) as (url, accepted), _client() as client:
        for _ in range(2):
            assert (await client.request(method, url)).content == body
            await asyncio.sleep(0.05)  # a close reaches the client's socket before the next request
    assert len(accepted) == connections


@pytest.mark.parametrize(
    "raw,says",
    [
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"x" * 200_000, "longer than"),
        (b"HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n", "illegal header line"),
        (b"SMTP ready\r\n\r\n", "illegal status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n", "conflicting Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", "without sending a complete response head"),
    ],
    ids=["too long", "bad field", "not HTTP", "two lengths", "cut head"],
)
@pytest.mark.asyncio
async def test_a_head_h11_would_refuse_is_a_protocol_error_that_says_why(raw: bytes, says: str) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(raw)
        await writer.drain()

    async with _served(answer) as (url, _), _client() as client:
        with pytest.raises(httpx.RemoteProtocolError, match=says) as caught:
            await client.get(url)
    assert request_failure(caught.value).kind == "connection"


@pytest.mark.parametrize(
    "headers", [{"X-Key": "a\r\nX-Smuggled: 1"}, {"X-Key": "a\nb"}, {"X-Key": "a\x00b"}], ids=["CRLF", "LF", "NUL"]
)
@pytest.mark.asyncio
async def test_a_header_value_that_would_end_its_line_is_refused_before_anything_is_sent(
    headers: dict[str, str],
) -> None:
    async with _served(_echo_lengths) as (url, connections), _client() as client:
        with pytest.raises(httpx.LocalProtocolError, match="Illegal header value"):
            await client.post(url, content=b"x", headers=headers)
        assert (await client.post(url, content=b"xy")).text == "2"
    assert len(connections) == 1  # the refused request took a connection, sent nothing, and gave it back


@pytest.mark.parametrize("declared", [b"1", b"9"], ids=["more than declared", "less than declared"])
@pytest.mark.asyncio
async def test_a_body_that_is_not_its_declared_length_is_refused_and_its_connection_not_reused(declared: bytes) -> None:
    async with _served(_echo_lengths) as (url, connections), _client() as client:
        with pytest.raises(httpx.LocalProtocolError, match="data for declared Content-Length"):
            await client.post(url, content=b"abc", headers={"Content-Length": declared.decode()})
        assert (await client.post(url, content=b"xy")).text == "2"
    assert len(connections) == 2


@pytest.mark.parametrize("scheme", ["https", "ftp"])
@pytest.mark.asyncio
async def test_a_url_of_another_scheme_is_refused_never_sent_in_cleartext(scheme: str) -> None:
    async with _served(_echo_lengths) as (url, connections), _client() as client:
        with pytest.raises(httpx.UnsupportedProtocol, match="plain http only"):
            await client.get(url.replace("http", scheme, 1), headers={"Authorization": "Bearer secret"})
    assert connections == []


@pytest.mark.asyncio
async def test_a_long_head_sent_a_few_bytes_at_a_time_is_read_whole() -> None:
    answer = b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 20_000 + b"\r\nContent-Length: 2\r\n\r\nok"

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        for at in range(0, len(answer), 7):
            writer.write(answer[at : at + 7])
            await writer.drain()
            if at % 700 == 0:
                await asyncio.sleep(0)  # the client reads between pieces

    async with _served(trickle) as (url, _), _client() as client:
        response = await client.get(url)
    assert (response.content, response.headers["x-long"]) == (b"ok", "a" * 20_000)


@pytest.mark.asyncio
async def test_a_waiting_request_is_served_in_its_turn_not_after_every_later_one() -> None:
    done: list[str] = []
    async with _served(_slow_echo(0.01)) as (url, _), _limited(max_connections=1) as client:

        async def one_after_another() -> None:
            for i in range(10):
                await client.post(url, content=b"a")
                done.append(f"a{i}")

        first = asyncio.create_task(one_after_another())
        await asyncio.sleep(0.005)  # the first of them holds the one connection
        await client.post(url, content=b"b")
        done.append("b")
        await first
    assert done.index("b") <= 1  # after the request in flight when it came, not after all ten


@pytest.mark.asyncio
async def test_closing_the_client_fails_a_request_waiting_for_a_connection_at_once() -> None:
    async with _served(_silent) as (url, _):
        client = _limited(max_connections=1)
        holding = asyncio.create_task(client.get(url))
        waiting = asyncio.create_task(client.get(url))
        await asyncio.sleep(0.1)
        await client.aclose()
        async with asyncio.timeout(2):
            with pytest.raises(httpx.ConnectError, match="closed"):
                await waiting
            with pytest.raises(httpx.ReadError):
                await holding


@pytest.mark.asyncio
async def test_a_method_that_is_not_ascii_is_a_local_protocol_error() -> None:
    async with _served(_echo_lengths) as (url, connections), _client() as client:
        with pytest.raises(httpx.LocalProtocolError, match="Illegal method"):
            await client.request("GÉT", url)
    assert connections == []


@pytest.mark.asyncio
async def test_a_request_whose_turn_comes_as_the_client_closes_is_told_the_client_closed() -> None:
    async with _served(_slow_echo(0.1)) as (url, _):
        transport = PlainTransport(httpx.Limits(max_connections=1))
        client = httpx.AsyncClient(transport=transport)
        holding = asyncio.create_task(client.post(url, content=b"a"))
        await asyncio.sleep(0.02)
        waiting = asyncio.create_task(client.post(url, content=b"b"))
        await asyncio.sleep(0.02)
        hand_on = transport._release

        async def hand_on_then_close(connection: Any) -> None:
            await hand_on(connection)  # the connection is now the waiting request's, which has not run yet
            transport._release = hand_on  # type: ignore[method-assign]
            await client.aclose()

        transport._release = hand_on_then_close  # type: ignore[method-assign]
        assert (await holding).text == "a"
        with pytest.raises(httpx.ConnectError, match="closed"):
            await waiting


_CLIENT_HEADERS = {"Authorization": "Bearer k-1", "Accept-Encoding": ACCEPT_ENCODING, "X-Trace": "a b"}


@pytest.mark.parametrize("content", [b"{}", '{"prompt": "héllo"}'.encode(), b"x" * 9, b"y" * 1_000_000])
def test_a_prepared_post_writes_the_head_httpx_would_for_each_body(content: bytes) -> None:
    client = httpx.AsyncClient(headers=_CLIENT_HEADERS)
    url = httpx.URL("http://127.0.0.1:8080/v1/chat/completions?x=1")
    prepared = PreparedPost(client.build_request("POST", url, content=b"{}", headers=JSON_HEADERS))
    request = client.build_request("POST", url, content=content, headers=JSON_HEADERS)
    assert prepared.head(len(content)) == request_head(b"POST", url.raw_path, request.headers.raw)
    assert prepared.framing(len(content)) == request_framing(request.headers.raw)
    assert prepared.timeouts == request.extensions["timeout"]


@pytest.mark.parametrize(
    "method,url,headers,refusal",
    [
        ("POST", "https://127.0.0.1/v1", {}, httpx.UnsupportedProtocol),
        ("GET", "http://127.0.0.1/v1", {}, ValueError),
        ("POST", "http://127.0.0.1/v1", {"Transfer-Encoding": "chunked"}, ValueError),
    ],
    ids=["https", "not a POST", "chunked"],
)
def test_a_request_a_prepared_post_cannot_write_is_refused(
    method: str, url: str, headers: dict[str, str], refusal: type[Exception]
) -> None:
    request = httpx.Request(method, url, content=b"{}", headers={**headers, "Authorization": "Bearer secret-key"})
    with pytest.raises(refusal) as refused:
        PreparedPost(request)
    assert "secret-key" not in str(refused.value)  # the refusal names the request, not its header values


@pytest.mark.asyncio
async def test_an_engine_request_reaches_the_server_as_httpx_would_have_sent_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRANSPORT_TEST_KEY", "k-1")
    received: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            received.append(head + await reader.readexactly(length))
            writer.write(_answer(b'{"choices": []}'))
            await writer.drain()

    async with _served(record) as (url, connections):
        target = TargetConfig(
            name="t", base_url=url, model="m", api_key_env="TRANSPORT_TEST_KEY", extra={"note": "é"}, timeout_s=5
        )
        engine = make_engine(target)
        sample = Sample(id="s1", task="t", messages=({"role": "user", "content": "two plus two"},), reference="4")
        params = GenerationParams(max_tokens=8, top_logprobs=2)
        try:
            for _ in "ab":  # the first request writes the prepared head, the second reuses it
                with pytest.raises(RequestFailed):  # no choices: refused, after the request was read
                    await engine.generate(sample, params)
            request = engine._request(engine.request_body(sample, params))
        finally:
            await engine.aclose()
    expected = request_head(b"POST", request.url.raw_path, request.headers.raw) + request.content
    assert received == [expected, expected]
    assert b"Bearer k-1" in expected  # the client's headers are in it
    assert len(connections) == 1


async def _posted_body(url: str, cap: int, timeout: float = 5.0) -> tuple[bytes | bytearray, bool]:
    """A prepared POST's answer as an engine reads it (`read_body`), and whether its connection may be reused."""
    transport = PlainTransport(LIMITS)
    client = httpx.AsyncClient(transport=transport, timeout=timeout)
    try:
        prepared = PreparedPost(client.build_request("POST", url, content=b"{}", headers=JSON_HEADERS))
        response = await transport.post(prepared, b"{}")
        try:
            body = await read_body(response, cap)
        finally:
            reusable = response._body._connection.reusable
            await response.aclose()
        return body, reusable
    finally:
        await client.aclose()


def _sending(raw: bytes, cuts: list[int]) -> Handler:
    """A server answering one request with `raw`, sent in pieces cut at `cuts` with a pause between them."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        for a, b in zip([0, *cuts], [*cuts, len(raw)]):
            writer.write(raw[a:b])
            await writer.drain()
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)

    return handler


@pytest.mark.parametrize(
    "size,cuts",
    [
        (0, []),
        (9, [40]),  # the head in one piece, the body in another
        (READ_SIZE - 100, []),  # head and body in the first read
        (READ_SIZE, [READ_SIZE // 2]),
        (3 * READ_SIZE + 7, [1000, READ_SIZE + 3, 2 * READ_SIZE + 50]),
    ],
)
@pytest.mark.asyncio
async def test_a_body_of_known_length_is_read_whole_into_one_buffer_byte_for_byte(size: int, cuts: list[int]) -> None:
    body = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    async with _served(_sending(_answer(body), cuts)) as (url, _):
        got, reusable = await _posted_body(url, cap=1 << 30)
    assert isinstance(got, bytearray) and got == body
    assert reusable  # read to its end: the connection goes on


@pytest.mark.asyncio
async def test_bytes_past_the_declared_length_are_not_the_body_and_end_the_connection() -> None:
    async with _served(_sending(_answer(b"0123456789") + b"extra", [])) as (url, _):  # read with the head
        got, reusable = await _posted_body(url, cap=1 << 30)
    assert got == b"0123456789" and not reusable


@pytest.mark.asyncio
async def test_a_known_length_body_cut_short_says_how_much_came() -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n" + b"x" * 70_000
    async with _served(_sending(raw, [100])) as (url, _):
        with pytest.raises(httpx.RemoteProtocolError, match="received 70000 bytes, expected 200000"):
            await _posted_body(url, cap=1 << 30)


@pytest.mark.asyncio
async def test_a_known_length_body_that_stalls_is_a_read_timeout() -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n" + b"x" * 70_000

    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(raw)
        await writer.drain()
        await asyncio.sleep(5)

    async with _served(stall) as (url, _):
        async with asyncio.timeout(3):  # a read that ignored its deadline would hang here
            with pytest.raises(httpx.ReadTimeout):
                await _posted_body(url, cap=1 << 30, timeout=0.3)


@pytest.mark.asyncio
async def test_a_declared_length_over_the_cap_is_refused_as_too_large_without_a_buffer_that_size() -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n" + b"x" * 70_000
    async with _served(_sending(raw, [])) as (url, _):
        with pytest.raises(RequestFailed) as refused:
            await _posted_body(url, cap=1 << 16)
    assert refused.value.kind == "too_large"


@pytest.mark.asyncio
async def test_a_body_larger_than_a_whole_read_takes_is_read_as_it_arrives() -> None:
    """Its buffer would be made before its bytes come: past WHOLE_MAX a head alone must not cost that much."""
    body = b"y" * (WHOLE_MAX + 1)
    async with _served(_sending(_answer(body), [])) as (url, _):
        got, reusable = await _posted_body(url, cap=1 << 30)
    assert type(got) is bytes and got == body and reusable  # joined from the reads, not a buffer made first
