"""Typed decoding of response bodies and stream events: token entries as objects the GC never walks.

A 32k-token answer with top-5 logprobs is about 200,000 JSON objects.  Read into dicts and lists
(orjson, json), each is an object Python's cyclic garbage collector tracks, and while a body is
read and held every collection walks all of them: the client's cost per token grew with the length
of the answer and with the answers in flight.  Here msgspec decodes the entries into Structs
declared `gc=False` and tuples, which are never walked (or untracked at the first collection),
checking their types while it decodes: ids are integers, tokens strings, logprobs numbers, bytes
values 0-255.  The alternatives' bytes, which nothing keeps, stay raw JSON text, checked all
together with the other columns (`columns.byte_lists_ok`): a tuple of byte values for each was a
third of the decoding time.  The rest of a body (message, usage, timings, ...) is decoded as plain
values into the dict the schema checks as ever; its `logprobs.content` is a `TypedEntries`, which
gives the same checked columns `columns.gather` makes of dicts.

Only the usual shape is decoded: anything else (a field of another type, a byte out of range,
NaN, an unparsable body) returns None, and the caller reads the body generically (`body.loads`)
so that each rule is applied, and named, exactly as before.  Keys no consumer reads are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Annotated, Any

import msgspec
import numpy as np
from msgspec import UNSET, Raw, UnsetType

from evalsuite.engines.columns import (
    Columns,
    Fields,
    alternative_counts,
    byte_lists_ok,
    checked,
    flat_alternatives,
    flat_legacy_columns,
)
from evalsuite.engines.packed import PackedNumbers, PackedStrings

Byte = Annotated[int, msgspec.Meta(ge=0, le=255)]
NULL = Raw(b"null")


class Alternative(msgspec.Struct, gc=False):
    """One of a token's top-k alternatives (llama.cpp and OpenAI name the same four fields)."""

    id: int | None = None
    token: str | None = None
    logprob: float | None = None
    bytes: Raw = NULL  # checked with the others' (columns.byte_lists_ok), never kept


class Entry(msgspec.Struct, gc=False):
    """One generated token of `logprobs.content`, with its alternatives."""

    id: int | None = None
    token: str | None = None
    logprob: float | None = None
    bytes: tuple[Byte, ...] | None = None
    top_logprobs: tuple[Alternative, ...] | None = None


class Logprobs(msgspec.Struct, gc=False):
    content: tuple[Entry, ...] | None | UnsetType = UNSET
    # the completions route's legacy columns (vLLM's), as plain lists whose value types are checked here
    tokens: list[str] | None | UnsetType = UNSET
    token_logprobs: list[float | None] | None | UnsetType = UNSET
    top_logprobs: list[dict[str, float] | None] | None | UnsetType = UNSET


class Choice(msgspec.Struct, gc=False):
    index: Any = UNSET
    message: Any = UNSET
    text: Any = UNSET
    finish_reason: Any = UNSET
    logprobs: Logprobs | None | UnsetType = UNSET
    token_ids: Any = UNSET


class Body(msgspec.Struct, gc=False):
    """A non-streamed response: every key the schema, the parser and the identity check read."""

    choices: list[Choice]
    usage: Any = UNSET
    timings: Any = UNSET
    model: Any = UNSET
    system_fingerprint: Any = UNSET
    id: Any = UNSET
    object: Any = UNSET
    error: Any = UNSET
    meta_info: Any = UNSET
    metrics: Any = UNSET


class Delta(msgspec.Struct, gc=False):
    content: Any = UNSET
    reasoning_content: Any = UNSET
    reasoning: Any = UNSET


class ChunkChoice(msgspec.Struct, gc=False):
    index: Any = UNSET
    delta: Delta | None | UnsetType = UNSET
    text: Any = UNSET
    finish_reason: Any = UNSET
    logprobs: Logprobs | None | UnsetType = UNSET
    token_ids: Any = UNSET


class Chunk(msgspec.Struct, gc=False):
    """One stream event: the keys `stream.merge_chunks` reads.

    Its id, model and fingerprint are strings (or null) here, so that an event that repeats the last
    one's is known to change nothing (typed_stream.py); other values are the generic reader's.
    """

    choices: list[ChunkChoice] | None | UnsetType = UNSET
    usage: Any = UNSET
    timings: Any = UNSET
    model: str | None | UnsetType = UNSET
    id: str | None | UnsetType = UNSET
    system_fingerprint: str | None | UnsetType = UNSET
    object: Any = UNSET
    error: Any = UNSET


TOP_BYTES_CHECKED_AT = 1 << 18
"""Bytes of a stream's alternatives' byte lists (raw JSON) at which they are checked and dropped: a check costs
about 17 us apart from its bytes (too much for every fold of a few hundred events), and makes arrays a few
times their size while it runs; kept to the end, a 32k-token stream's at top-20 were some 14 MB."""

_BODY = msgspec.json.Decoder(Body)
CHUNK = msgspec.json.Decoder(Chunk)
"""Decodes one stream event (typed_stream.py), raising msgspec.DecodeError where it is not the usual shape."""


def plain(struct: msgspec.Struct) -> dict[str, Any]:
    """A struct's fields as a dict, leaving out the ones the JSON did not have (as a parsed dict would)."""
    return {name: value for name in struct.__struct_fields__ if (value := getattr(struct, name)) is not UNSET}


def decode_body(raw: bytes | bytearray) -> dict[str, Any] | None:
    """The response as the dict `body.loads` reads, its token entries typed; None: read it generically."""
    try:
        body = _BODY.decode(raw)
    except msgspec.DecodeError:  # ValidationError included
        return None
    out = plain(body)
    out["choices"] = [_choice(choice) for choice in body.choices]
    return out


def _choice(choice: Choice | ChunkChoice) -> dict[str, Any]:
    out = plain(choice)
    if isinstance(choice.logprobs, Logprobs):
        logprobs = out["logprobs"] = TypedLists(plain(choice.logprobs))
        if isinstance(choice.logprobs.content, tuple):
            logprobs["content"] = EntryTuple(choice.logprobs.content)
    return out


class TypedLists(dict[str, Any]):
    """A `logprobs` object read typed: its legacy lists' values are known to be of their types (strings;
    numbers or null; objects of numbers or null), so `columns.legacy_columns` checks only their values."""


class TypedEntries:
    """`logprobs.content` decoded typed, in the dict the schema checks: its checked columns on demand."""

    def __len__(self) -> int:
        raise NotImplementedError

    def columns(self, id_limit: int) -> Columns | None:
        """The same checked columns `columns.gather` makes of the entries as dicts; None when one breaks a rule."""
        raise NotImplementedError


class EntryTuple(TypedEntries):
    """A body's entries, decoded together: their fields are pulled out a column at a time."""

    def __init__(self, entries: tuple[Entry, ...]):
        self.entries = entries

    def __len__(self) -> int:
        return len(self.entries)

    def columns(self, id_limit: int) -> Columns | None:
        entries = self.entries
        counts, alts = _alternatives(entries)
        raws = [entry.bytes for entry in entries]
        alt_raws = b"\0".join([alt.bytes for alt in alts])
        return checked(counts, _fields(entries), raws, _fields(alts), id_limit, alt_raws=alt_raws, typed=True)


def _alternatives(entries: Sequence[Entry]) -> tuple[list[int], list[Alternative]]:
    """How many alternatives each entry has, and all of them in order."""
    tops = [entry.top_logprobs for entry in entries]
    return alternative_counts(tops), list(chain.from_iterable(filter(None, tops)))


def _fields(structs: Sequence[Entry | Alternative]) -> Fields:
    """The id, token and logprob of each entry or alternative, a field at a time.

    Comprehensions, not `map(attrgetter(...))`: the interpreter reads a struct's field from its slot
    directly, where attrgetter goes through the generic attribute lookup (~2.7x the time)."""
    return Fields([s.id for s in structs], [s.token for s in structs], [s.logprob for s in structs])


class EntryColumns(TypedEntries):
    """A stream's entries, taken into columns event by event so that the decoded events need not be kept.

    Ids, logprobs and token strings are packed a fold at a time (packed.py): a stream in flight holds
    about a quarter of what its columns as lists of Python objects took."""

    def __init__(self) -> None:
        self.ids = PackedNumbers(np.int64)
        self.tokens = PackedStrings()
        self.logprobs = PackedNumbers(np.float64)
        self.raws: list[bytes | None] = []
        self.counts: list[int] = []
        self.top_ids = PackedNumbers(np.int64)
        self.top_tokens = PackedStrings()
        self.top_logprobs = PackedNumbers(np.float64)
        self.top_bytes: list[bytes] = []  # the alternatives' raw `bytes` of each fold, NUL-joined: not yet checked
        self._top_bytes_size = 0
        self._top_bytes_ok = True

    def add(self, entries: Sequence[Entry]) -> None:
        """Take entries (of one event or of many) into the columns, a field at a time."""
        counts, alts = _alternatives(entries)
        chosen, top = _fields(entries), _fields(alts)
        self.ids.extend(chosen.ids)
        self.tokens.extend(chosen.tokens)
        self.logprobs.extend(chosen.logprobs)
        raws: list[Any] = [entry.bytes for entry in entries]
        self.raws += [None if b is None else bytes(b) for b in raws] if None in raws else map(bytes, raws)
        self.counts += counts
        self.top_ids.extend(top.ids)
        self.top_tokens.extend(top.tokens)
        self.top_logprobs.extend(top.logprobs)
        if alts:
            self.top_bytes.append(b"\0".join([alt.bytes for alt in alts]))
            self._top_bytes_size += len(self.top_bytes[-1])
            if self._top_bytes_size >= TOP_BYTES_CHECKED_AT:
                self._check_top_bytes()

    def _check_top_bytes(self) -> None:
        """Check the alternatives' byte lists read so far, and drop them: nothing keeps them."""
        self._top_bytes_ok = self._top_bytes_ok and byte_lists_ok(b"\0".join(self.top_bytes))
        self.top_bytes.clear()
        self._top_bytes_size = 0

    def __len__(self) -> int:
        return len(self.counts)

    def columns(self, id_limit: int) -> Columns | None:
        self._check_top_bytes()
        if not self._top_bytes_ok:
            return None
        chosen = Fields(self.ids.values(), self.tokens.values(), self.logprobs.values())
        alts = Fields(self.top_ids.values(), self.top_tokens.values(), self.top_logprobs.values())
        return checked(self.counts, chosen, self.raws, alts, id_limit, alt_raws=None, typed=True)


class ListColumns(TypedEntries):
    """A stream's legacy lists (vLLM's completions route), taken in a fold at a time and packed.

    Each token's alternatives, an object of token -> logprob (about 400 bytes with five), become how many
    it has and its share of two flat packed columns; the lists keep how many values each was given, so
    that lists of unequal length are refused as the generic merge's would be.
    """

    def __init__(self) -> None:
        self.tokens = PackedStrings()
        self.logprobs = PackedNumbers(np.float64)
        self.counts: list[int] = []
        self.top_tokens = PackedStrings()
        self.top_logprobs = PackedNumbers(np.float64)
        self._given = [0, 0]  # values given to tokens and to token_logprobs (to top_logprobs: len(counts))

    def add(self, tokens: list[str], logprobs: list[float | None], tops: list[dict[str, float] | None]) -> None:
        """The values of the lists of some events, each list's in order."""
        self.tokens.extend(tokens)
        self.logprobs.extend(logprobs)
        counts, top_tokens, top_logprobs = flat_alternatives(tops)
        self.counts += counts
        self.top_tokens.extend(top_tokens)
        self.top_logprobs.extend(top_logprobs)
        self._given[0] += len(tokens)
        self._given[1] += len(logprobs)

    def __len__(self) -> int:
        return self._given[0]

    def columns(self, id_limit: int) -> Columns | None:
        (n, given_logprobs), given_tops = self._given, len(self.counts)
        if given_logprobs not in (0, n) or given_tops not in (0, n):
            return None
        logprobs = self.logprobs.values() if given_logprobs else [None] * n
        counts = self.counts if given_tops else [0] * n
        top_tokens, top_logprobs = self.top_tokens.values(), self.top_logprobs.values()
        return flat_legacy_columns(self.tokens.values(), logprobs, counts, top_tokens, top_logprobs, id_limit)
