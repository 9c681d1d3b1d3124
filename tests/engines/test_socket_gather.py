"""Reads of a trickle gather several events (engines/gather.py, engines/sockets.py): a server streaming faster than a
wait but slower than the client reads is read a few events at a time, never later than a share of the
request's time, and a close, a cancel or a near deadline still ends the read as ever."""

from __future__ import annotations

import asyncio
import time

import httpcore
import pytest
from test_socket_reads import _pair

from evalsuite.engines import gather
from evalsuite.engines.gather import GATHER_MAX_S, GATHER_SHARE, TRICKLE, Gathering
from evalsuite.engines.sockets import SocketStream


def _trickling(since: float, *, waited: float = 0.0, rate: float = 1000.0) -> Gathering:
    """The reads of a connection whose last read waited `waited` s for a trickle, `since` s after the request
    (at `rate` bytes a second: 1 kB by default)."""
    return Gathering(sent_at=time.monotonic() - since, trickle=True, waited=waited, rate=rate)


def _gathering(stream: SocketStream, since: float) -> None:
    """`stream` in the state where its next read that would wait for the socket gathers first."""
    stream.gathering, stream._loop_watches = _trickling(since), True


async def _gathering_read(stream: SocketStream, timeout: float) -> asyncio.Task[bytes]:
    """A read of `stream` begun where it gathers first, once its gathering wait has begun."""
    _gathering(stream, since=36_000.0)
    reading = asyncio.create_task(stream.read(100, timeout=timeout))
    await asyncio.sleep(0.01)
    assert stream._gather_timer is not None
    return reading


@pytest.mark.asyncio
async def test_a_fast_trickle_is_read_several_events_a_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gather, "GATHER_SHARE", 0.5)  # the wait grows to its most within the stream's first 60 ms
    monkeypatch.setattr(gather, "GATHER_MAX_S", 0.03)
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


def test_a_read_waits_at_most_its_share_of_the_requests_time() -> None:
    reads = _trickling(since=100.0)
    reads.sent()
    assert reads.wait(time.monotonic(), None) == 0.0  # the read after a request looks at once
    assert 0.0099 < _trickling(since=1.0).wait(time.monotonic(), None) <= GATHER_SHARE * 1.01
    assert _trickling(since=3600.0).wait(time.monotonic(), None) == GATHER_MAX_S
    assert _trickling(since=0.001).wait(time.monotonic(), None) == 0.0  # too short to pay for its timer


@pytest.mark.parametrize(
    ("why", "reads", "timeout"),
    [
        ("the last read waited longer than this wait: the server is slower", _trickling(100.0, waited=0.5), None),
        ("the last read brought a lot: the server sends faster than a trickle", Gathering(trickle=False), None),
        ("the read's deadline is near", _trickling(100.0), 0.01),
        ("a trickle's worth comes in 0.16 ms at the last read's rate (a fast link)", _trickling(100.0, rate=1e8), None),
    ],
)
def test_a_read_does_not_gather_where_it_would_not_pay_or_would_miss_its_deadline(
    why: str, reads: Gathering, timeout: float | None
) -> None:
    assert reads.wait(time.monotonic(), timeout) == 0.0, why


def test_a_read_gathers_no_more_than_a_trickle_at_the_rate_the_last_read_came() -> None:
    wait = _trickling(since=3600.0, rate=1e6).wait(time.monotonic(), None)  # 16 KiB come in 16 ms
    assert wait == pytest.approx(min(GATHER_MAX_S, TRICKLE / 1e6))


def test_a_read_that_found_its_data_after_a_gathering_wait_leaves_the_next_gathering() -> None:
    reads = _trickling(since=3600.0)
    reads.read(700, 0.02, gathered=True)
    assert reads.wait(time.monotonic(), None) > 0
    reads.read(700, 0.05, gathered=False)  # the wait found nothing: the read waited on, longer than the wait
    assert reads.wait(time.monotonic(), None) == 0.0
    reads.read(TRICKLE, 0.001, gathered=False)  # a read that brought a lot
    assert reads.wait(time.monotonic(), None) == 0.0


@pytest.mark.asyncio
async def test_a_server_slower_than_the_wait_is_read_as_it_sends() -> None:
    async with _pair() as (stream, theirs):
        _gathering(stream, since=100.0)  # a gathering wait of GATHER_MAX_S, and nothing comes within it
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, theirs.send, b"late")
        assert await stream.read(100, timeout=5) == b"late"
        assert stream.gathering.waited > GATHER_MAX_S  # so the next read watches the socket
        assert stream.gathering.wait(time.monotonic(), None) == 0.0


@pytest.mark.asyncio
async def test_a_close_ends_a_gathering_read_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gather, "GATHER_MAX_S", 30.0)
    async with _pair() as (stream, _):
        reading = await _gathering_read(stream, timeout=600)
        started = time.monotonic()
        await stream.aclose()
        with pytest.raises(httpcore.ReadError, match="closed while the operation waited"):
            await reading
        assert time.monotonic() - started < 5  # not the 16 s the gathering would have waited (a 1 kB/s trickle)


@pytest.mark.asyncio
async def test_a_cancelled_gathering_read_leaves_its_data_for_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gather, "GATHER_MAX_S", 0.05)
    async with _pair() as (stream, theirs):
        reading = await _gathering_read(stream, timeout=5)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        assert stream._gather_timer is None
        theirs.send(b"kept")
        await asyncio.sleep(0.1)  # past the cancelled read's gathering: nothing read it
        assert await stream.read(100, timeout=5) == b"kept"


@pytest.mark.asyncio
async def test_a_read_measures_the_rate_it_came_at() -> None:
    async with _pair() as (stream, theirs):
        asyncio.get_running_loop().call_later(0.1, theirs.send, b"x" * 1000)
        assert len(await stream.read(65536, timeout=5)) == 1000
        assert 500 < stream.gathering.rate < 10_000  # 1000 bytes after about 0.1 s
