"""HTTP/1.1 read and written here (engines/http11.py, engines/connection.py) exactly as h11 does it.

h11 is the reference: for any response head, well formed or not, `parse_head` must refuse where h11
refuses, and otherwise read the same status, reason and fields, the same end of the body and the same
keep-alive; for any body, cut anywhere into reads, `ChunkedBody` must give the same data and end at the
same place, or refuse where h11 refuses.  Through the transport, a streamed answer sent one HTTP chunk
per event (as llama-server and vLLM send it), or a sized body sent in any pieces, comes back whole, and
a broken or cut body is the protocol error the retry policy knows.  A request's head goes out in one
write with its body's first bytes, and a head that would smuggle a field is never sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import h11
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_transport import _client, _request, _served

from evalsuite.engines.base import request_failure
from evalsuite.engines.connection import BODY_READ, Connection, request_framing
from evalsuite.engines.http11 import (
    CHUNKED,
    MAX_HEAD,
    UNTIL_CLOSE,
    ChunkedBody,
    ChunkError,
    ProtocolError,
    head_end,
    parse_head,
    request_head,
)

Outcome = tuple[str, bytes]


def _pieces(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(raw), *(c % (len(raw) + 1) for c in cuts)})
    return [raw[a:b] for a, b in zip(points, points[1:])]


def _ours(pieces: list[bytes]) -> Outcome:
    body, data = ChunkedBody(), bytearray()
    try:
        for piece in pieces:
            data += b"".join(body.feed(piece))
            if body.done:
                return "done", bytes(data)
    except ChunkError:
        return "refused", b""
    return "incomplete", bytes(data)


def _h11(pieces: list[bytes]) -> Outcome:
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)  # as httpcore runs it
    conn.send(h11.Request(method="POST", target="/", headers=[("Host", "x"), ("Content-Length", "0")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert isinstance(conn.next_event(), h11.Response)
    data = bytearray()
    for piece in pieces:
        conn.receive_data(piece)
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                return "refused", b""
            if event is h11.NEED_DATA:
                break
            if isinstance(event, h11.Data):
                data += event.data
            elif isinstance(event, h11.EndOfMessage):
                return "done", bytes(data)
    return "incomplete", bytes(data)


def _chunked(parts: list[bytes], exts: list[bytes], trailers: bytes) -> bytes:
    out = b"".join(b"%x%s\r\n%s\r\n" % (len(p), e, p) for p, e in zip(parts, exts))
    return out + b"0\r\n" + trailers + b"\r\n"


PARTS = st.lists(st.binary(min_size=1, max_size=40), max_size=6)
EXT = st.sampled_from([b"", b";name=value", b" ", b"\t", b";a;b=c "])
TRAILERS = st.sampled_from([b"", b"X-Checksum: 1\r\n", b"A: 1\r\nB: 2\r\n", b"X: a\r\n folded\r\n", b"X: 1\n"])
ODD_TRAILERS = st.sampled_from(
    [
        b"Bad Name: 1\r\n",
        b": no name\r\n",
        b"X: a\x00b\r\n",
        b" X: 1\r\n",
        b"Content-Length: abc\r\n",
        b"Transfer-Encoding: gzip\r\n",
        b"Content-Length: 1\r\nContent-Length: 2\r\n",
        b"no colon\r\n",
    ]
)
CUTS = st.lists(st.integers(0, 10**4), max_size=8)


@settings(max_examples=300, deadline=None)
@given(parts=PARTS, data=st.data(), trailers=TRAILERS, cuts=CUTS)
def test_a_well_formed_body_cut_anywhere_decodes_to_its_data(
    parts: list[bytes], data: st.DataObject, trailers: bytes, cuts: list[int]
) -> None:
    exts = [data.draw(EXT) for _ in parts]
    pieces = _pieces(_chunked(parts, exts, trailers), cuts)
    assert _ours(pieces) == _h11(pieces) == ("done", b"".join(parts))


@settings(max_examples=1000, deadline=None)
@given(
    parts=PARTS,
    data=st.data(),
    cuts=CUTS,
    edits=st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 3), st.binary(max_size=3)), min_size=1, max_size=3),
)
def test_a_mutated_body_is_decoded_refused_or_awaited_as_h11_does(
    parts: list[bytes], data: st.DataObject, cuts: list[int], edits: list[tuple[int, int, bytes]]
) -> None:
    raw = _chunked(parts, [data.draw(EXT) for _ in parts], data.draw(st.one_of(TRAILERS, ODD_TRAILERS)))
    for at, drop, insert in edits:  # some bytes replaced by others, anywhere, framing included
        at %= len(raw) + 1
        raw = raw[:at] + insert + raw[at + drop :]
    pieces = _pieces(raw, cuts)
    assert _ours(pieces) == _h11(pieces)


@pytest.mark.parametrize(
    "raw",
    [b"2;x=" + b"a" * 50_000 + b"\r\nok\r\n0\r\n\r\n", b"2\r\nok\r\n0\r\n" + b"T: a\r\n" * 8_000 + b"\r\n"],
    ids=["long chunk extension", "long trailer section"],
)
def test_a_long_line_sent_a_few_bytes_a_read_decodes_as_h11_decodes_it(raw: bytes) -> None:
    pieces = [raw[i : i + 8] for i in range(0, len(raw), 8)]
    assert _ours(pieces) == _h11(pieces) == ("done", b"ok")


def test_framing_errors_are_named() -> None:
    for raw, words in [
        (b"zz\r\n", "illegal chunk header"),
        (b"3\r\nabcX\r\n", "runs past its size"),
        (b"0\r\nnot a field\r\n\r\n", "in the trailer fields: illegal header line"),
        (b"1" * (MAX_HEAD + 100), "longer than"),
    ]:
        with pytest.raises(ChunkError, match=words):
            ChunkedBody().feed(raw)


async def _chunked_answer(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    events: list[bytes],
    head: bytes = b"",
    tail: bytes = b"",
) -> None:
    await _request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n%s\r\n" % head)
    for event in events:
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
    writer.write(b"0\r\n\r\n" + tail)
    await writer.drain()


EVENTS = [b'data: {"n": %d}\n\n' % i for i in range(500)] + [b"data: [DONE]\n\n"]


async def _stream_twice(head: bytes = b"", tail: bytes = b"") -> int:
    """Two streamed answers read through the transport, each whole; how many connections they took."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            await _chunked_answer(reader, writer, EVENTS, head, tail)

    async with _served(serve) as (url, connections), _client() as client:
        for _ in range(2):
            async with client.stream("POST", url, content=b"{}") as response:
                pieces = [piece async for piece in response.aiter_raw()]
            assert b"".join(pieces) == b"".join(EVENTS)
            assert len(pieces) < len(EVENTS)  # chunks already received go up together
            await asyncio.sleep(0.05)  # a close reaches the client's socket before the next request
    return len(connections)


@pytest.mark.asyncio
async def test_a_stream_sent_a_chunk_per_event_comes_back_whole_on_a_kept_alive_connection() -> None:
    assert await _stream_twice() == 1


@pytest.mark.asyncio
async def test_a_chunked_answer_that_asks_to_close_or_sends_more_than_its_body_is_not_reused() -> None:
    assert await _stream_twice(head=b"Connection: close\r\n") == 2
    assert await _stream_twice(tail=b"HTTP/1.1 200 OK\r\n") == 2  # bytes past the body: not the next answer


@pytest.mark.asyncio
async def test_a_stream_left_halfway_closes_its_connection_and_the_next_request_gets_a_new_one() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            await _chunked_answer(reader, writer, EVENTS * 50)

    async with _served(serve) as (url, connections), _client() as client:
        async with client.stream("POST", url, content=b"{}") as response:
            async for _ in response.aiter_raw():
                break
        async with client.stream("POST", url, content=b"{}") as response:
            assert b"".join([piece async for piece in response.aiter_raw()]) == b"".join(EVENTS * 50)
    assert len(connections) == 2


@pytest.mark.asyncio
async def test_a_long_stream_sent_at_once_comes_back_whole_in_reads_no_larger_than_the_body_read_size() -> None:
    events = [b"data: %s\n\n" % (b"x" * 1000) for _ in range(1500)]  # about 1.5 MB, all written before it is read

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _chunked_answer(reader, writer, events)

    async with _served(serve) as (url, _), _client() as client:
        async with client.stream("POST", url, content=b"{}") as response:
            pieces = [piece async for piece in response.aiter_raw()]
    assert b"".join(pieces) == b"".join(events)
    assert max(map(len, pieces)) <= BODY_READ  # what one read holds stays bounded, however much is waiting


@pytest.mark.parametrize(
    "tail", [b"5\r\nab", b"zz\r\n", b"2\r\nabc\r\n"], ids=["cut in a chunk", "bad size", "data past size"]
)
@pytest.mark.asyncio
async def test_a_broken_or_cut_chunked_body_is_a_protocol_error_the_retry_policy_calls_connection(
    tail: bytes,
) -> None:
    async def broken(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nfine\r\n" + tail)
        await writer.drain()

    async with _served(broken) as (url, _), _client() as client:
        with pytest.raises(httpx.RemoteProtocolError) as caught:
            await client.post(url, content=b"{}")
    assert request_failure(caught.value).kind == "connection"


FIELD_NAMES = st.sampled_from(
    [b"Content-Length", b"content-length", b"Transfer-Encoding", b"transfer-encoding", b"Connection", b"X-Other"] * 3
    + [b"Bad Name", b"", b"X\x01"]
)
FIELD_VALUES = st.one_of(
    st.sampled_from(
        [b"5", b"12, 12", b"12", b"0", b"chunked", b"Chunked ", b"close", b"keep-alive, Close", b"a \t b"] * 3
    ),
    st.sampled_from([b"5,6", b" 12 ", b"-1", b"1" * 21, b"gzip", b"gzip, chunked", b"", b"a\x00b"]),
    st.binary(max_size=6),
)
FIELD = st.tuples(FIELD_NAMES, st.sampled_from([b": ", b":", b":\t", b" : "]), FIELD_VALUES).map(b"".join)
FIELD_LINES = st.one_of(  # mostly fields, so that heads get past their first odd line
    *[FIELD] * 6,
    st.sampled_from([b" folded on", b"\tfolded on", b"no colon", b"X-Trailing: v \t"]),
    st.binary(max_size=10),
)
STATUS_LINES = st.one_of(
    st.sampled_from(
        [
            b"HTTP/1.1 200 OK",
            b"HTTP/1.0 200 OK",
            b"HTTP/1.1 204",
            b"HTTP/1.1 304 Not Modified",
            b"HTTP/1.1 404 Not Found",
            b"HTTP/1.1 100 Continue",
            b"HTTP/1.1 101 Switching Protocols",
            b"HTTP/2.0 200 OK",
            b"HTTP/0.9 200 OK",
            b"HTTP/1.1 099 Low",
            b"HTTP/1.1 200  two  spaces ",
            b"HTTP/1.1 2000 OK",
            b"http/1.1 200 OK",
            b"HTTP/1.1 200 \x01ctl",
            b"HTTP/1.1 503 \xffobs",
            b"HTTP/1.1 200 a\rb",
        ]
    ),
    st.sampled_from([b"HTTP/1.1 200 OK"] * 4),
    st.binary(max_size=16),
)
BODY = b"5\r\nhello\r\n0\r\n\r\n" + bytes(range(65, 105))


def _h11_reading(method: bytes, raw: bytes) -> tuple[object, ...] | None:
    """What h11 makes of a response head and BODY after it: None where it refuses the head.

    Its end of the body: the data up to h11's end of message, "cut" where the server's close comes first,
    and a keep-alive of None for a body that only the close ends."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target="/", headers=[("Host", "x"), ("Content-Length", "0")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(raw + BODY)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError:
        return None
    assert isinstance(event, (h11.Response, h11.InformationalResponse))
    seen = (event.http_version, event.status_code, event.reason, list(event.headers.raw_items()))
    if isinstance(event, h11.InformationalResponse):
        return (*seen, 0, None)
    data, closed = bytearray(), False
    while True:
        try:
            next_event = conn.next_event()
        except h11.RemoteProtocolError:  # a length longer than what came
            return (*seen, "cut", None)
        if isinstance(next_event, h11.Data):
            data += next_event.data
        elif next_event is h11.NEED_DATA:
            conn.receive_data(b"")
            closed = True
        else:
            assert isinstance(next_event, h11.EndOfMessage)
            return (*seen, bytes(data), None if closed else conn.their_state is h11.DONE)


def _our_reading(method: bytes, raw: bytes) -> tuple[object, ...] | None:
    try:
        head = parse_head(raw, method)
    except ProtocolError:
        return None
    seen = (head.version, head.status, head.reason, head.headers)
    if head.status < 200:
        return (*seen, 0, None)
    if head.body == CHUNKED:
        return (*seen, b"hello", head.keep_alive)
    if head.body == UNTIL_CLOSE:
        assert not head.keep_alive
        return (*seen, BODY, None)
    assert isinstance(head.body, int)
    if head.body > len(BODY):
        return (*seen, "cut", None)
    return (*seen, BODY[: head.body], head.keep_alive)


@settings(max_examples=3000, deadline=None)
@given(
    method=st.sampled_from([b"GET", b"POST", b"HEAD"]),
    status=STATUS_LINES,
    lines=st.lists(FIELD_LINES, max_size=5),
    ends=st.lists(st.sampled_from([b"\r\n", b"\n"]), min_size=7, max_size=7),
)
def test_any_response_head_is_read_or_refused_as_h11_reads_it(
    method: bytes, status: bytes, lines: list[bytes], ends: list[bytes]
) -> None:
    sent = b"".join(line + end for line, end in zip([status, *lines], ends)) + ends[-1]
    head = sent[: head_end(sent)]  # a blank line inside ends it there (for h11 too: what follows is the body)
    assert _our_reading(method, head) == _h11_reading(method, head)


def _sized_answer(body: bytes, head: bytes = b"", tail: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s%s" % (len(body), head, body, tail)


async def _sized_twice(pieces: list[bytes]) -> int:
    """Two answers sent in `pieces` (a pause between each) read through the transport; connections taken."""
    body = b"".join(pieces)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            await _request(reader)
            answer = _sized_answer(body)
            writer.write(answer[: len(answer) - len(body)])
            for piece in pieces:
                await asyncio.sleep(0)
                writer.write(piece)
                await writer.drain()

    async with _served(serve) as (url, connections), _client() as client:
        for _ in range(2):
            assert (await client.post(url, content=b"{}")).content == body
    return len(connections)


@settings(max_examples=25, deadline=None)
@given(size=st.integers(0, 300_000), cuts=CUTS)
def test_a_sized_body_sent_in_any_pieces_comes_back_whole_on_a_kept_alive_connection(
    size: int, cuts: list[int]
) -> None:
    body = bytes(i % 251 for i in range(size))
    assert asyncio.run(_sized_twice(_pieces(body, [c * 37 for c in cuts]))) == 1


@pytest.mark.parametrize(
    "head,tail", [(b"Connection: close\r\n", b""), (b"", b"HTTP/1.1 200 OK\r\n")], ids=["close", "bytes past"]
)
@pytest.mark.asyncio
async def test_a_sized_answer_that_asks_to_close_or_sends_more_than_its_body_is_not_reused(
    head: bytes, tail: bytes
) -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            await _request(reader)
            writer.write(_sized_answer(b"x" * 70_000, head, tail))
            await writer.drain()

    async with _served(serve) as (url, connections), _client() as client:
        for _ in range(2):
            assert (await client.post(url, content=b"{}")).content == b"x" * 70_000
            await asyncio.sleep(0.05)  # a close reaches the client's socket before the next request
    assert len(connections) == 2


@pytest.mark.asyncio
async def test_a_sized_body_cut_short_is_a_protocol_error_that_says_how_much_came() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(_sized_answer(b"x" * 100_000)[:-1000])
        await writer.drain()

    async with _served(cut) as (url, _), _client() as client:
        with pytest.raises(httpx.RemoteProtocolError, match="received 99000 bytes, expected 100000") as caught:
            await client.post(url, content=b"{}")
    assert request_failure(caught.value).kind == "connection"


class _Recorded:
    """A network stream that answers from a script and keeps each write the connection makes."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = answers
        self.writes: list[bytes] = []

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.answers.pop(0) if self.answers else b""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.writes.append(bytes(buffer))


def _as_server_reads(sent: bytes) -> tuple[h11.Request, bytes]:
    server = h11.Connection(h11.SERVER)
    server.receive_data(sent)
    request, body = server.next_event(), bytearray()
    assert isinstance(request, h11.Request)
    while not isinstance(event := server.next_event(), h11.EndOfMessage):
        assert isinstance(event, h11.Data)
        body += event.data
    return request, bytes(body)


async def _pieces_sent(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


@pytest.mark.parametrize(
    "content,writes,first_ends",
    [
        (b"", 1, b"Content-Length: 0\r\n\r\n"),
        (b'{"prompt": "x"}', 1, b'\r\n\r\n{"prompt": "x"}'),
        ([b"a", b"", b"bc"], 3, b"chunked\r\n\r\n1\r\na\r\n"),
    ],
    ids=["no body", "sized body", "chunked body"],
)
@pytest.mark.asyncio
async def test_a_request_goes_out_its_head_and_first_body_bytes_in_one_write(
    content: bytes | list[bytes], writes: int, first_ends: bytes
) -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    stream = _Recorded([answer, answer])
    connection = Connection(stream, (b"http", b"x", 80))  # type: ignore[arg-type]
    whole = content if isinstance(content, bytes) else b"".join(content)
    for _ in range(2):  # the second request on the kept-alive connection starts from a clean slate
        stream.writes.clear()
        body = content if isinstance(content, bytes) else _pieces_sent(content)
        request = httpx.Request("POST", "http://x/", content=body)  # httpx frames it: a length, or chunked
        framing = request_framing(request.headers.raw)
        sent_body = content if isinstance(content, bytes) else request.stream  # bytes go whole (a prepared POST)
        head = await connection.exchange(
            b"POST",
            request_head(b"POST", b"/", request.headers.raw),
            framing,
            sent_body,
            {},  # type: ignore[arg-type]
        )
        assert b"".join([piece async for piece in connection.body(head, None)]) == b"ok"
        assert connection.reusable
        assert len(stream.writes) == writes
        assert stream.writes[0].startswith(b"POST / HTTP/1.1\r\n")
        assert stream.writes[0].endswith(first_ends)
        sent, received = _as_server_reads(b"".join(stream.writes))
        assert (sent.method, sent.target, received) == (b"POST", b"/", whole)
