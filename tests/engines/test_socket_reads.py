"""Reads that wait on the loop (engines/sockets.py): the socket stays watched between them, one timer holds
their deadline, and neither a cancelled read nor a closed stream leaves the loop busy with the socket.

A server streaming slower than the client reads brings one event a read, so these are a token's cost."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpcore
import pytest

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


def _count(monkeypatch: pytest.MonkeyPatch, obj: Any, name: str, callback: str | None = None) -> list[int]:
    """Calls of `obj.name` (only those passing a function named `callback`, when given)."""
    calls = [0]
    real = getattr(obj, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        if callback is None or any(getattr(a, "__name__", None) == callback for a in args):
            calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(obj, name, counted)
    return calls


@pytest.mark.asyncio
async def test_a_paced_stream_is_read_with_the_socket_watched_once_and_one_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    watches, timers = _count(monkeypatch, loop, "add_reader"), _count(monkeypatch, loop, "call_at", "_on_timer")
    async with _pair() as (stream, theirs):

        async def send() -> None:
            for i in range(30):
                await asyncio.sleep(0.002)
                theirs.send(b"event %d\n" % i)

        sender = asyncio.create_task(send())
        got, reads = b"", 0
        while len(got) < sum(len(b"event %d\n" % i) for i in range(30)):
            got += await stream.read(65536, timeout=5)
            reads += 1
        await sender
    assert got == b"".join(b"event %d\n" % i for i in range(30))
    assert reads >= 15  # most reads waited for their event (the case this is about)
    assert watches[0] == 1  # not once a read
    assert timers[0] == 1  # the deadline moved on with each read, the timer set once


@pytest.mark.asyncio
async def test_a_silent_socket_times_out_after_its_own_reads_timeout() -> None:
    async with _pair() as (stream, theirs):
        theirs.send(b"a")
        assert await stream.read(10, timeout=30) == b"a"  # a long deadline first: its timer is set far away
        started = time.monotonic()
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(10, timeout=0.2)  # a shorter one sets it earlier
        assert 0.15 < time.monotonic() - started < 5


@pytest.mark.asyncio
async def test_a_deadline_counts_from_the_start_of_its_own_read() -> None:
    async with _pair() as (stream, theirs):
        asyncio.get_running_loop().call_later(0.25, theirs.send, b"a")
        assert await stream.read(10, timeout=0.4) == b"a"  # the timer stays set for this read's deadline
        started = time.monotonic()
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(10, timeout=0.4)  # fires at the first deadline, 0.15 s in: moved on, not failed
        assert time.monotonic() - started > 0.35


@pytest.mark.asyncio
async def test_a_read_without_a_timeout_waits_for_its_data() -> None:
    async with _pair() as (stream, theirs):
        asyncio.get_running_loop().call_later(0.1, theirs.send, b"late")
        assert await stream.read(10, timeout=None) == b"late"


@pytest.mark.asyncio
async def test_a_cancelled_read_leaves_the_loop_idle_and_the_data_for_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    async with _pair() as (stream, theirs):
        calls = _count(monkeypatch, stream, "_on_readable")
        waiting = asyncio.create_task(stream.read(10, timeout=5))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        theirs.send(b"kept")
        for _ in range(50):  # passes of the loop with data no one reads: watched, it would be called on each
            await asyncio.sleep(0)
        assert calls[0] <= 2
        assert await stream.read(10, timeout=5) == b"kept"


@pytest.mark.asyncio
async def test_the_end_and_a_reset_reach_a_waiting_read() -> None:
    async with _pair() as (stream, theirs):
        asyncio.get_running_loop().call_later(0.05, theirs.close)
        assert await stream.read(10, timeout=5) == b""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        ours = socket.create_connection(listener.getsockname())
        theirs, _ = listener.accept()
    ours.setblocking(False)
    stream = SocketStream(ours)
    try:
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
        asyncio.get_running_loop().call_later(0.05, theirs.close)
        with pytest.raises(httpcore.ReadError, match="ConnectionResetError"):
            await stream.read(10, timeout=5)
    finally:
        await stream.aclose()


@pytest.mark.asyncio
async def test_a_loop_that_cannot_watch_sockets_still_reads_and_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> None:
        raise NotImplementedError  # as Windows' proactor loop answers

    monkeypatch.setattr(asyncio.get_running_loop(), "add_reader", refuse)
    async with _pair() as (stream, theirs):
        asyncio.get_running_loop().call_later(0.05, theirs.send, b"data")
        assert await stream.read(10, timeout=5) == b"data"
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(10, timeout=0.1)


@pytest.mark.asyncio
async def test_reading_a_closed_stream_is_a_read_error() -> None:
    async with _pair() as (stream, _):
        await stream.aclose()
        with pytest.raises(httpcore.ReadError, match="Bad file descriptor"):
            await stream.read(10, timeout=1)
