"""HTTP/1.1 on the wire, without I/O: a request's head written, a response's head read, a chunked body decoded.

`connection.py` speaks it over a socket for `transport.PlainTransport`.  The rules are RFC 9112's as
h11 applies them (tests/engines/test_http11.py holds the two to the same decisions on any head and any
body): a head h11 would refuse is refused here with the reason, and a body ends where h11 would end it.
Where this reading is leaner is in what it does per response: one pass over a head's lines with a
compiled pattern each, no event objects, no state machine walked per event, and a chunked body decoded
a network read at a time, every chunk that read brought handed on as one piece (llama-server, vLLM and
SGLang send each token of a stream as a chunk of its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+"
_FIELD_VALUE = rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?"  # visible bytes and obs-text, spaces only between
_STATUS_LINE = re.compile(rb"HTTP/([0-9]\.[0-9]) ([0-9]{3})(?: ((?:[ \t]|[^\x00\s])*))?")
_FIELD_LINE = re.compile(rb"(" + _TOKEN + rb"):[ \t]*(" + _FIELD_VALUE + rb")[ \t]*")
_NAME = re.compile(_TOKEN)
_VALUE = re.compile(_FIELD_VALUE)
_TARGET = re.compile(rb"[\x21-\x7e]+")
_LENGTH = re.compile(rb"[0-9]{1,20}")
_LINE_END = re.compile(rb"\r?\n")
_BLANK_LINE = re.compile(rb"\n\r?\n")
MAX_HEAD = 100 * 1024
"""The longest response head, chunk size line or trailer section waited for, as httpcore limits h11."""
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;.*)?[ \t]*")
"""A chunk's size line without its CRLF: hex digits, extensions (ignored), whitespace; as h11 reads it."""
_HEX_DIGITS = b"0123456789abcdefABCDEF"

CHUNKED = "chunked"
UNTIL_CLOSE = "until close"


class ProtocolError(ValueError):
    """Bytes that break HTTP/1.1 (RFC 9112): a malformed head or a broken chunked body."""


class ChunkError(ProtocolError):
    """A chunked body that breaks the framing (RFC 9112, section 7.1)."""


class RequestError(ValueError):
    """A request that cannot be written as HTTP/1.1: a method, target or header field out of its grammar, or a
    body that is not the length its head declares."""


@dataclass(frozen=True, slots=True)
class Head:
    """A response's status line and header fields, and how its body ends: a length, CHUNKED or UNTIL_CLOSE."""

    version: bytes
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: int | str
    keep_alive: bool
    """Whether the connection may carry another exchange once the body has ended (HTTP/1.1, no close asked)."""


def head_end(data: bytes | bytearray, start: int = 0) -> int:
    """Where the head at the start of `data` ends (past its blank line); -1 while it has not all come.

    `start` is where to look from: bytes already looked through need not be again.  An empty first line
    is a head of no lines (`parse_head` refuses it, as h11 does)."""
    if data[:1] == b"\n":
        return 1
    if data[:2] == b"\r\n":
        return 2
    blank = _BLANK_LINE.search(data, max(0, start - 2))
    return -1 if blank is None else blank.end()


def parse_head(block: bytes, method: bytes) -> Head:
    """The response head in `block` (up to and with its blank line), as h11 reads it; ProtocolError says why not.

    `method` is the request's: a response to HEAD has no body whatever its head says.  The fields are as
    `_field_lines` reads them."""
    lines = _LINE_END.split(block)[:-2]  # the blank line's two empty pieces
    if not lines:
        raise ProtocolError("no response line received")
    status = _STATUS_LINE.fullmatch(lines[0])
    if status is None:
        raise ProtocolError(f"illegal status line: {lines[0][:100]!r}")
    version, code, reason = status[1], int(status[2]), status[3] or b""
    if code < 100:
        raise ProtocolError(f"status code {code} is not one HTTP has")
    if code == 101:
        raise ProtocolError("the server switched protocols though no request asked it to")
    headers, length, chunked, close = _field_lines(lines[1:])
    body: int | str
    if code in (204, 304) or code < 200 or method == b"HEAD":
        body = 0
    elif chunked:
        body = CHUNKED
    elif length is not None:
        body = int(length)
    else:
        body = UNTIL_CLOSE
    keep_alive = version >= b"1.1" and not close and body != UNTIL_CLOSE  # h11 compares versions so
    return Head(version, code, reason, headers, body, keep_alive)


def _field_lines(lines: list[bytes]) -> tuple[list[tuple[bytes, bytes]], bytes | None, bool, bool]:
    """A head's (or trailer section's) field lines as h11 reads them: (fields, Content-Length, chunked, close).

    The fields are as received, but for h11's two normalisations: Content-Length once (a list of equal
    lengths, or repeats, as the one length) and Transfer-Encoding's value in lower case."""
    fields: list[bytes] = []
    for line in lines:
        if line[:1] in (b" ", b"\t"):  # obs-fold: the line goes on the one before, after one space
            if not fields:
                raise ProtocolError("continuation line at start of headers")
            fields[-1] += b" " + line.lstrip(b" \t")
        else:
            fields.append(line)
    headers: list[tuple[bytes, bytes]] = []
    length: bytes | None = None
    chunked, close = False, False
    for line in fields:
        field = _FIELD_LINE.fullmatch(line)
        if field is None:
            raise ProtocolError(f"illegal header line: {line[:100]!r}")
        name, value = field[1], field[2]
        lower = name.lower()
        if lower == b"content-length":  # kept once, as its one length
            seen, length = length, _content_length(value, length)
            if seen is not None:
                continue
            value = length
        elif lower == b"transfer-encoding":
            if chunked:
                raise ProtocolError("multiple Transfer-Encoding headers")
            value = value.lower()
            if value != b"chunked":
                raise ProtocolError("Only Transfer-Encoding: chunked is supported")
            chunked = True
        elif lower == b"connection":
            close = close or asks_close(value)
        headers.append((name, value))
    return headers, length, chunked, close


def asks_close(connection: bytes) -> bool:
    """Whether a Connection field's value holds the "close" option (a comma-separated list, any case)."""
    return b"close" in [option.strip().lower() for option in connection.split(b",")]


def _content_length(value: bytes, seen: bytes | None) -> bytes:
    """A Content-Length field's length (a list of equal lengths is one), agreeing with any seen before."""
    lengths = {part.strip() for part in value.split(b",")}
    if len(lengths) != 1:
        raise ProtocolError("conflicting Content-Length headers")
    length = lengths.pop()
    if not _LENGTH.fullmatch(length):
        raise ProtocolError("bad Content-Length")
    if seen is not None and seen != length:
        raise ProtocolError("conflicting Content-Length headers")
    return length


def request_head(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    """A request's head; RequestError for a method, target or field that cannot be sent (a line break in a header
    value would end the field and start another)."""
    return request_line(method, target) + field_lines(headers) + b"\r\n"


def request_line(method: bytes, target: bytes) -> bytes:
    """A request head's first line; RequestError for a method or target out of its grammar."""
    if not _NAME.fullmatch(method):
        raise RequestError(f"Illegal method {method!r}")
    if not _TARGET.fullmatch(target):
        raise RequestError(f"Illegal target characters: {target[:100]!r}")
    return b"%s %s HTTP/1.1\r\n" % (method, target)


def field_lines(headers: list[tuple[bytes, bytes]]) -> bytes:
    """Header fields as a head's lines; RequestError for a name or value out of its grammar."""
    lines = []
    for name, value in headers:
        if not _NAME.fullmatch(name):
            raise RequestError(f"Illegal header name {name!r}")
        if not _VALUE.fullmatch(value):
            raise RequestError(f"Illegal header value {value!r}")
        lines.append(b"%s: %s\r\n" % (name, value))
    return b"".join(lines)


class ChunkedBody:
    """The chunked transfer coding decoded as bytes arrive; `done` once the last chunk and trailers came."""

    def __init__(self) -> None:
        self.done = False
        self._rest = bytearray()  # received, not yet decoded: an incomplete size line, footer or trailer section
        self._looked = 0  # how far into `_rest` its line's end has been looked for
        self._left = 0  # bytes of the current chunk's data still to come
        self._footer = False  # the CRLF after a chunk's data is next
        self._trailers = False
        self.extra = b""
        """Bytes received past the body's end (none from a server that waits for the next request)."""

    def feed(self, data: bytes) -> list[memoryview]:
        """The chunk data in `data` (views of it), in order; raises ChunkError where the framing breaks."""
        if self.done:
            return []
        if self._rest:  # grown in place: a long line sent a few bytes a read is not copied and searched a read
            self._rest += data
            if self._incomplete():
                return []
            buf, self._rest = bytes(self._rest), bytearray()
        else:
            buf = data
        view = memoryview(buf)
        out: list[memoryview] = []
        pos, end = 0, len(buf)
        while True:
            if self._left:
                take = min(self._left, end - pos)
                if take:
                    out.append(view[pos : pos + take])
                    pos += take
                    self._left -= take
                if self._left:
                    break
                self._footer = True
            if self._footer:
                if end - pos < 2:
                    if buf[pos:end] != b"\r\n"[: end - pos]:
                        raise ChunkError(f"a chunk's data runs past its size: {buf[pos:end]!r}")
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise ChunkError(f"a chunk's data runs past its size: {buf[pos : pos + 8]!r}")
                pos += 2
                self._footer = False
            if self._trailers:
                pos = self._trailer_end(buf, pos)
                break
            pos = self._whole_chunks(buf, view, pos, out)
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if end - pos > MAX_HEAD:
                    raise ChunkError(f"a chunk header is longer than {MAX_HEAD} bytes")
                break
            line = buf[pos:eol]
            pos = eol + 2
            size = _CHUNK_SIZE.fullmatch(line)
            if size is None:
                raise ChunkError(f"illegal chunk header: {line[:40]!r}")
            self._left = int(size[1], 16)
            self._trailers = not self._left
        if pos < end and not self.done:
            self._rest = bytearray(buf[pos:])
            self._looked = max(0, len(self._rest) - 3)  # looked through already, but for a line end cut in two
        self.extra = buf[pos:] if self.done else b""
        return out

    def _incomplete(self) -> bool:
        """Whether what is in hand is still the start of a size line or trailer section, its end not yet come."""
        if self._left or self._footer:
            return False
        rest = self._rest
        if self._trailers:
            if rest[:1] == b"\n" or rest[:2] == b"\r\n" or _BLANK_LINE.search(rest, self._looked):
                return False
        elif rest.find(b"\r\n", self._looked) >= 0:
            return False
        if len(rest) > MAX_HEAD:
            what = "the trailer fields are" if self._trailers else "a chunk header is"
            raise ChunkError(f"{what} longer than {MAX_HEAD} bytes")
        self._looked = max(0, len(rest) - 3)
        return True

    @staticmethod
    def _whole_chunks(buf: bytes, view: memoryview, pos: int, out: list[memoryview]) -> int:
        """Past the chunks from `pos` on that came whole with a plain size line (a stream's every event),
        their data added to `out`; what is left (a last or partial chunk, any other line) is `feed`'s."""
        find, startswith, end = buf.find, buf.startswith, len(buf)
        while True:
            eol = find(b"\r\n", pos)
            line = buf[pos:eol]
            if eol < 0 or not 0 < len(line) <= 20 or line.strip(_HEX_DIGITS):
                return pos
            start = eol + 2
            stop = start + int(line, 16)
            if stop == start or stop + 2 > end:
                return pos
            if not startswith(b"\r\n", stop):
                raise ChunkError(f"a chunk's data runs past its size: {buf[stop : stop + 8]!r}")
            out.append(view[start:stop])
            pos = stop + 2

    def _trailer_end(self, buf: bytes, pos: int) -> int:
        """Past the trailer fields and the blank line after the last chunk, when they have all come."""
        if buf[pos : pos + 1] == b"\n" or buf[pos : pos + 2] == b"\r\n":  # no trailers (h11 allows a bare LF)
            self.done = True
            return pos + (1 if buf[pos] == 10 else 2)
        blank = _BLANK_LINE.search(buf, pos)
        if blank is None:
            if len(buf) - pos > MAX_HEAD:
                raise ChunkError(f"the trailer fields are longer than {MAX_HEAD} bytes")
            return pos
        try:
            _field_lines(_LINE_END.split(buf[pos : blank.end()])[:-2])  # checked as a head's fields, then dropped
        except ProtocolError as exc:
            raise ChunkError(f"in the trailer fields: {exc}") from None
        self.done = True
        return blank.end()
