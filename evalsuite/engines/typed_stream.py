"""Streams read typed: each event decoded (typed.py) and merged as it arrives, the generic reader as backstop.

A streamed answer is one event per token.  The generic reader (`stream.EventReader`, `merge_chunks`)
parses each event into dicts and keeps them all until the stream ends, so a 16k-token stream held
16k chunk trees for the garbage collector to walk again and again.  `TypedEvents` applies the same
rules to the raw lines, decodes each event into untracked structs, and folds it into the merged
answer's columns with the other events read since the last fold (a few hundred at a time): only the
token entries stay.  A piece in the usual framing (each event one `data:` line and a blank one) is
split into its events without looking at each line in turn, and an event that repeats the last
one's id, model and fingerprint skips their merging.

Where it cannot vouch for an event (an error event or report, a field of an unusual type, text that
is not JSON), `read_stream` replays the body read so far
through the generic reader, which carries on with the rest of the stream: every refusal is the one
the generic reader gives, at the same event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from itertools import chain, repeat
from typing import Any

from msgspec import DecodeError

from evalsuite.collector import pausing_collections
from evalsuite.engines.kept import KeptBody
from evalsuite.engines.stream import EventReader, Lines, incomplete, merge_chunks, read_generic, take
from evalsuite.engines.typed import CHUNK, UNSET, Chunk, Entry, EntryColumns, ListColumns, Logprobs

Generic = Callable[[], dict[str, Any]]
_FOLD_AT = 256
"""Events read and not yet folded into the columns at which they are: a fold costs as much for one event as for
hundreds, and a server slower than the client sends one event a network read."""


async def read_stream(
    pieces: AsyncIterator[bytes], on_first: Callable[[], None] | None = None
) -> tuple[dict[str, Any], Generic | None]:
    """The merged response of a stream body, and how to read it generically when it came typed (else None).

    The body's pieces are kept (mostly out of memory, `kept.KeptBody`): the replay, and the generic
    reading of a typed answer the schema refuses, need them.
    """
    seen = KeptBody()
    fast: TypedEvents | None = TypedEvents(on_first)
    generic = EventReader(on_first)
    lines = Lines()
    async for piece in pieces:
        if fast is None:
            if take(generic, lines.feed(piece)):
                break
            continue
        seen.append(piece)
        try:
            if fast.feed(piece):
                break
        except _Untyped:
            fast = None
            if any(take(generic, lines.feed(p)) for p in seen):
                break
    else:
        if fast is None:
            take(generic, lines.end())
    if fast is None:
        return merge_chunks(generic.finish()), None
    try:
        merged = fast.finish()
    except _Untyped:
        return read_generic(seen), None
    return merged, lambda: read_generic(seen)


class _Untyped(Exception):
    """An event the typed reader leaves to the generic one."""


class TypedEvents:
    """`EventReader` and `merge_chunks` in one pass over raw pieces; raises _Untyped where it cannot vouch."""

    def __init__(self, on_first: Callable[[], None] | None):
        self.on_first = on_first
        self.events = 0
        self.done = False
        self.finished = False  # some event carried a finish reason
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self._event = b""
        self._text: list[str] = []  # the pieces since the last fold (earlier ones: joined, a fold each, below)
        self._reasoning: list[str] = []
        self._text_folds: list[str] = []
        self._reasoning_folds: list[str] = []
        self._entries = EntryColumns()
        self._content: list[tuple[Entry, ...]] = []  # the entries of the events read since the last fold
        self._lists: list[Logprobs] = []  # the events' legacy lists read since the last fold
        self._head: tuple[Any, ...] = ()  # id, model and system_fingerprint of the last event
        self._token_ids: list[Any] = []
        self._legacy = ListColumns()
        self._completions = False
        self._finish: Any = None
        self._merged: dict[str, Any] = {}

    @pausing_collections  # each event's containers are made and freed inside: the collector never walks them
    def feed(self, piece: bytes) -> bool:
        """Take a piece of the body; True once `[DONE]` was read (nothing after it is read)."""
        if b"\n" not in piece:
            self._buffer += piece
            return False
        lines = piece.split(b"\n")  # the piece itself: a block joined first would copy every byte again
        returns = b"\r" in piece
        if self._buffer:
            returns = returns or b"\r" in self._buffer  # the start of the first line came before
            lines[0] = bytes(self._buffer + lines[0])
        self._buffer = bytearray(lines.pop())  # after the last line feed: the start of a line to come
        return self._lines(lines, returns)

    @pausing_collections
    def finish(self) -> dict[str, Any]:
        """The merged response, once the body has ended (RequestFailed when it was cut off)."""
        if not self.done and self._buffer:
            rest, self._buffer = bytes(self._buffer), bytearray()
            self._lines([rest], b"\r" in rest)
        if not self.done and self._data:
            self._lines([b""], False)
        if not self.done and not self.finished:
            raise incomplete(self.events)
        self._fold()
        return self._result()

    def _lines(self, lines: list[bytes], returns: bool) -> bool:
        """Complete lines (`returns`: some may end in a carriage return)."""
        done = self._framed(lines)
        if done is None:
            done = self._each(lines, returns)
        if len(self._content) + len(self._lists) >= _FOLD_AT:
            self._fold()
        return done

    def _framed(self, lines: list[bytes]) -> bool | None:
        """Lines in the usual framing (each event one `data:` line and a blank one): taken without looking at
        each line in turn.  None where they are framed otherwise; `_each` reads them then."""
        at = 1 if self._data else 0  # a data line read before, its blank line first here
        if self._event or (at and lines[0]):
            return None
        data, blanks = lines[at::2], lines[at + 1 :: 2]
        if any(blanks) or not all(map(bytes.startswith, data, repeat(b"data:"))):
            return None
        if at and self._take(self._payload()):
            return True
        take = self._take
        for line in data[: len(blanks)]:
            if take(line[5:]):  # the one space the generic reader drops is JSON whitespace
                return True
        if len(data) > len(blanks):  # the last event's blank line is still to come
            self._data.append(data[-1][5:])
        return False

    def _each(self, lines: list[bytes], returns: bool) -> bool:
        """The lines one at a time, as the generic reader takes them (`returns`: some end in a carriage return)."""
        data = self._data
        for line in lines:
            if returns:
                line = line.rstrip(b"\r")  # carriage returns before line feeds: dropped, as the generic reader does
            if line.startswith(b"data:"):
                data.append(line[5:])  # the one space the generic reader drops is JSON whitespace
            elif not line:
                name = self._event
                if name:
                    self._event = b""
                if data and self._take(self._payload(), name):
                    return True
            else:
                try:
                    text = line.decode("utf-8")  # as the generic reader decodes every line
                except UnicodeDecodeError:
                    raise _Untyped from None
                if text.startswith("event:"):
                    self._event = text[6:].strip().encode()
        return False

    def _fold(self) -> None:
        """Take the entries and lists of the events read so far into the columns, all at once (the events are
        then not kept).  The lists are extended as the generic merge does: by the list values (typed: a list
        or nothing)."""
        if self._content:
            self._entries.add(list(chain.from_iterable(self._content)))
            self._content.clear()
        _fold_pieces(self._text, self._text_folds)
        _fold_pieces(self._reasoning, self._reasoning_folds)
        if self._lists:
            lists = self._lists
            self._legacy.add(
                list(_joined([lp.tokens for lp in lists])),
                list(_joined([lp.token_logprobs for lp in lists])),
                list(_joined([lp.top_logprobs for lp in lists])),
            )
            lists.clear()

    def _payload(self) -> bytes:
        """The data of the event whose blank line was read (its data lines joined), taken out of the buffer."""
        data = self._data
        payload = data[0] if len(data) == 1 else b"\n".join(data)
        data.clear()
        return payload

    def _take(self, payload: bytes, name: bytes = b"") -> bool:
        """One event's data; True when it is `[DONE]`."""
        try:
            chunk = CHUNK.decode(payload)  # JSON's own whitespace around the value is what strip() would drop
        except DecodeError:
            stripped = payload.strip()
            if stripped == b"[DONE]":
                self.done = True
                return True
            if stripped:
                raise _Untyped from None
            return False
        if name == b"error" or (chunk.error is not UNSET or chunk.object == "error") and _error(chunk):
            raise _Untyped
        if self.on_first is not None and not self.events and chunk.choices:
            self.on_first()
        self.events += 1
        self._merge(chunk)
        return False

    def _merge(self, chunk: Chunk) -> None:
        """merge_chunks' step for one event (it runs once per token: plain attribute tests, no loops over keys)."""
        merged = self._merged
        if chunk.usage is not UNSET and chunk.usage is not None:
            merged["usage"] = chunk.usage
        if chunk.timings is not UNSET and chunk.timings is not None:
            merged["timings"] = chunk.timings
        head = (chunk.id, chunk.model, chunk.system_fingerprint)
        if head != self._head:  # as every event of a stream usually repeats them: merged already
            self._merge_head(*head)
            self._head = head
        for choice in chunk.choices or ():
            finish = choice.finish_reason
            if finish:
                self.finished = True
            if choice.index is not UNSET and choice.index != 0:
                continue
            delta = choice.delta
            if delta is UNSET or delta is None:
                if choice.text is UNSET:
                    raise _Untyped
                self._completions = True
                _piece(self._text, choice.text)
            else:
                content = delta.content
                if type(content) is str:
                    if content:
                        self._text.append(content)
                elif content is not UNSET and content is not None:
                    raise _Untyped
                if delta.reasoning_content is not UNSET or delta.reasoning is not UNSET:
                    _piece(self._reasoning, delta.reasoning_content)
                    _piece(self._reasoning, delta.reasoning)
            logprobs = choice.logprobs
            if type(logprobs) is Logprobs:
                if logprobs.content:
                    self._content.append(logprobs.content)
                if logprobs.tokens or logprobs.token_logprobs or logprobs.top_logprobs:  # UNSET is false too
                    self._lists.append(logprobs)
            if type(choice.token_ids) is list:
                self._token_ids.extend(choice.token_ids)
            if finish is not UNSET and finish:
                self._finish = finish

    def _merge_head(self, id_: Any, model: Any, fingerprint: Any) -> None:
        """The event's id (the last one wins), model and system fingerprint (another one mid-stream: untyped)."""
        merged = self._merged
        if id_ is not UNSET and id_ is not None:
            merged["id"] = id_
        for key, value in (("model", model), ("system_fingerprint", fingerprint)):
            if value is not UNSET and value is not None:
                if value != merged.get(key, value):
                    raise _Untyped  # another server mid-stream: the generic merge says so
                merged[key] = value

    def _result(self) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "finish_reason": self._finish}
        text, reasoning = "".join(self._text_folds), "".join(self._reasoning_folds)  # `finish` folded every piece
        if self._completions:
            choice["text"] = text
        else:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if reasoning:
                message["reasoning_content"] = reasoning
            choice["message"] = message
        if len(self._entries):
            choice["logprobs"] = {"content": self._entries}
        elif len(self._legacy):
            choice["logprobs"] = self._legacy
        if self._token_ids:
            choice["token_ids"] = self._token_ids
        return {**self._merged, "choices": [choice]}


def _fold_pieces(pieces: list[str], folds: list[str]) -> None:
    """The pieces of text read since the last fold, joined into one (each piece is an object of ~55 bytes)."""
    if pieces:
        folds.append("".join(pieces))
        pieces.clear()


def _joined(lists: list[Any]) -> Iterator[Any]:
    """The items of the lists among `lists` (the others are None or UNSET), in order."""
    return chain.from_iterable(filter(None, lists))


def _piece(out: list[str], value: Any) -> None:
    """A delta's text: a string, or nothing (absent or null); anything else is the generic reader's to refuse."""
    if isinstance(value, str):
        if value:
            out.append(value)
    elif value is not UNSET and value is not None:
        raise _Untyped


def _error(chunk: Chunk) -> bool:
    """Whether `validate.server_error` would find an error report in this event."""
    error = chunk.error
    if error is UNSET or error is None:
        return chunk.object == "error"
    return error is not False
