"""Reads of a trickle gather several events (engines/sockets.py `_gather`): a server streaming faster than a
wait but slower than the client reads is read a few events at a time, never later than a share of the
request's time, and a close, a cancel or a near deadline still ends the read as ever."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpcore
import pytest

from evalsuite.engines import sockets
from evalsuite.engines.sockets import SocketStream


@asynccontextmanager
async def _pair() -> AsyncIterator[tuple[SocketStream, socket.socket]]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    stream = SocketStream(ours)
    try:
        yield stream, theirs
    finally:
        await stream.aclose()
        theirs.close()


def _trickling(stream: SocketStream, *, since: float, waited: float = 0.0) -> None:
    """The state after a read that waited `waited` seconds for a trickle, `since` seconds after the request."""
    stream._loop_watches, stream._trickle, stream._waited = True, True, waited
    stream._sent_at, stream._rate = time.monotonic() - since, 1000.0  # a slow trickle: 1 kB a second


@pytest.mark.asyncio
async def test_a_fast_trickle_is_read_several_events_a_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sockets, "GATHER_SHARE", 0.5)  # the wait grows to its most within the stream's first 60 ms
    monkeypatch.setattr(sockets, "GATHER_MAX_S", 0.03)
    events = [b"event %d\n" % i for i in range(150)]
    async with _pair() as (stream, theirs):
        await stream.write(b"request", timeout=5)

        async def send() -> None:
            for event in events:
                theirs.send(event)
                await asyncio.sleep(0.001)

        sender = asyncio.create_task(send())
        got, reads = b"", 0
        while len(got) < len(b"".join(events)):
            got += await stream.read(65536, timeout=5)
            reads += 1
        await sender
    assert got == b"".join(events)
    assert reads <= len(events) // 3  # one a read: 150 (a loaded machine's late sleeps gather more, not fewer)


@pytest.mark.asyncio
async def test_a_read_waits_at_most_its_share_of_the_requests_time() -> None:
    async with _pair() as (stream, _):
        await stream.write(b"request", timeout=5)
        assert stream._gather(time.monotonic(), None) == 0.0  # the read after a request looks at once
        _trickling(stream, since=1.0)
        assert 0.0099 < stream._gather(time.monotonic(), None) <= sockets.GATHER_SHARE * 1.01
        _trickling(stream, since=3600.0)
        assert stream._gather(time.monotonic(), None) == sockets.GATHER_MAX_S
        _trickling(stream, since=0.001)
        assert stream._gather(time.monotonic(), None) == 0.0  # too short to pay for its timer


@pytest.mark.parametrize(
    ("why", "waited", "trickle", "timeout"),
    [
        ("the last read waited longer than this wait: the server is slower", 0.5, True, None),
        ("the last read brought a lot: the server sends faster than a trickle", 0.0, False, None),
        ("the read's deadline is near", 0.0, True, 0.01),
    ],
)
@pytest.mark.asyncio
async def test_a_read_does_not_gather_where_it_would_not_pay_or_would_miss_its_deadline(
    why: str, waited: float, trickle: bool, timeout: float | None
) -> None:
    async with _pair() as (stream, _):
        _trickling(stream, since=100.0, waited=waited)
        stream._trickle = trickle
        assert stream._gather(time.monotonic(), timeout) == 0.0, why


@pytest.mark.asyncio
async def test_a_server_slower_than_the_wait_is_read_as_it_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    async with _pair() as (stream, theirs):
        _trickling(stream, since=100.0)  # a gathering wait of GATHER_MAX_S, and nothing comes within it
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, theirs.send, b"late")
        assert await stream.read(100, timeout=5) == b"late"
        assert stream._waited > sockets.GATHER_MAX_S  # so the next read watches the socket
        assert stream._gather(time.monotonic(), None) == 0.0


@pytest.mark.asyncio
async def test_a_close_ends_a_gathering_read_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sockets, "GATHER_MAX_S", 30.0)
    async with _pair() as (stream, _):
        _trickling(stream, since=36_000.0)
        reading = asyncio.create_task(stream.read(100, timeout=600))
        await asyncio.sleep(0.05)
        assert stream._gathering is not None
        started = time.monotonic()
        await stream.aclose()
        with pytest.raises(httpcore.ReadError, match="closed while the operation waited"):
            await reading
        assert time.monotonic() - started < 5  # not the 30 s the gathering would have waited


@pytest.mark.asyncio
async def test_a_cancelled_gathering_read_leaves_its_data_for_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sockets, "GATHER_MAX_S", 0.05)
    async with _pair() as (stream, theirs):
        _trickling(stream, since=3600.0)
        reading = asyncio.create_task(stream.read(100, timeout=5))
        await asyncio.sleep(0.01)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        assert stream._gathering is None
        theirs.send(b"kept")
        await asyncio.sleep(0.1)  # past the cancelled read's gathering: nothing read it
        assert await stream.read(100, timeout=5) == b"kept"


@pytest.mark.asyncio
async def test_a_read_gathers_no_more_than_a_trickle_at_the_rate_the_last_read_came() -> None:
    async with _pair() as (stream, _):
        _trickling(stream, since=3600.0)
        stream._rate = 100e6  # a fast link read a segment a read: a trickle's worth comes in 0.16 ms
        assert stream._gather(time.monotonic(), None) == 0.0
        stream._rate = 1e6  # its worth comes in 16 ms: the wait, where the cap allows that long
        assert stream._gather(time.monotonic(), None) == pytest.approx(min(sockets.GATHER_MAX_S, sockets.TRICKLE / 1e6))


@pytest.mark.asyncio
async def test_a_read_measures_the_rate_it_came_at() -> None:
    async with _pair() as (stream, theirs):
        asyncio.get_running_loop().call_later(0.1, theirs.send, b"x" * 1000)
        assert len(await stream.read(65536, timeout=5)) == 1000
        assert 500 < stream._rate < 10_000  # 1000 bytes after about 0.1 s
