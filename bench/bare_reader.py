"""The least a Python client can do to read a server's streams: the paced row's second reference.

The parse floor (bench/scale.py) times orjson over bodies already in memory.  A server that sends a
stream's events as it makes them brings them a network read or two at a time, and any client pays
for each read: the event loop's wait, the system call, a cold cache.  This reader pays only that and
the parse: asyncio streams, one connection a worker kept for its requests, each `data:` line parsed
by orjson and its ids, logprobs and top-k pairs pulled out by the floor's own `extract`.  It reads
each event as it comes (no gathering), skips the chunked framing's lines instead of decoding them,
and checks and stores nothing, so it does less than a client must.

    read_all(url, bodies, concurrency, route, scale.extract) -> tokens read  (time it with time.process_time)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import orjson

Extract = Callable[[dict[str, Any]], Sequence[list[Any]]]
"""Pulls an event's columns out of it, its ids (or tokens) first."""


def read_all(url: str, bodies: list[dict[str, Any]], concurrency: int, route: str, extract: Extract) -> int:
    """Send each body to `url` + `route` as a stream, `concurrency` at a time, reading every event and pulling
    its columns out with `extract`; the tokens whose entries were read."""
    streams = [orjson.dumps({**b, "stream": True}) for b in bodies]
    return asyncio.run(_read_all(url, streams, concurrency, route, extract))


async def _read_all(url: str, bodies: list[bytes], concurrency: int, route: str, extract: Extract) -> int:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    path = (parts.path.rstrip("/") + route).encode()
    todo = list(reversed(bodies))
    head = b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: " % (path, host.encode())

    async def worker() -> int:
        reader, writer = await asyncio.open_connection(host, port)
        tokens = 0
        try:
            while todo:
                body = todo.pop()
                writer.write(b"%s%d\r\n\r\n%s" % (head, len(body), body))
                tokens += await _read_stream(reader, extract)
        finally:
            writer.close()
        return tokens

    return sum(await asyncio.gather(*(worker() for _ in range(min(concurrency, len(bodies))))))


async def _read_stream(reader: asyncio.StreamReader, extract: Extract) -> int:
    """One response's events, read as they come, to its last chunk; the tokens its entries carried."""
    rest, tokens, last = b"", 0, False
    while True:
        data = await reader.read(65536)
        if not data:
            raise ConnectionError("the server closed the connection inside a stream")
        lines = (rest + data).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if line.startswith(b"data: {"):
                tokens += len(extract(orjson.loads(line[6:]))[0])
            elif line == b"0\r":  # the last chunk's size line (every other line is data, blank or a size)
                last = True
            elif last and line == b"\r":  # and the blank line after it: the body has ended
                return tokens
