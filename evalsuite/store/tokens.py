"""Token columns of store layout 2: what every comparison reads stays raw, what is rarely read is packed.

Read by every comparison: the token ids (the diff) and the baseline's top-k
logprobs (its logit resolution): raw little-endian arrays, a memcpy to load,
first in their row so SQLite reads nothing else to reach them.

Read at a divergence or by a report's viewer only, so packed as zlib streams
(written by ISA-L at level 1, in about half zlib's own time at nearly the
same size; any zlib reads them, and ISA-L reads what zlib wrote before):
`detail` holds the top-k ids and the chosen tokens' logprobs, `strings` the
token strings (pieces, top-k pieces, exact bytes), each stored once: a top-k
string as one name per distinct id when ids name strings consistently and
repeat enough to pay (NAMED_SHARE), exact bytes only where they are not the
piece's UTF-8.  Before packing, the top-1
id is XORed with the chosen id and the chosen logprob's bits with the top-1
logprob's (equal under greedy decoding, so mostly zeros), and the detail's
4-byte items are byte-shuffled (high bytes of ids are nearly constant):
together about a third of the size zlib alone reaches.  Every transform is
exact; `unpack_*` gives back the arrays as written.
"""

from __future__ import annotations

import copy
import json
import operator
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson
from isal import isal_zlib

from evalsuite.collector import pausing_collections
from evalsuite.records import TokenTrace

TOKEN_COLUMNS = ("ids", "top_logprobs", "detail", "strings")
"""The `tokens` table's columns after `sample_id`, in the order a reader needs them."""
LEVEL = 1
_HEADER = struct.Struct("<6I")  # named (0/1), then the lengths of pack_strings' five parts
NAMED_SHARE = 3
"""Top-k strings are stored one name per distinct id only where there are at least this many alternatives
to a distinct id.  Below that, the rows zlib packs as they are were smaller (the break-even was about
2.5: 12.0 against 12.6 bytes a token at 42 % distinct ids, 10.5 against 11.5 at 33 %; at 86 %, as in
real llama-server answers of a random model, 26 against 37), and they take about half the CPU: each
string is read once, not grouped by id and compared."""


def _shuffle(items: np.ndarray) -> bytes:
    """4-byte little-endian items as four planes: every item's byte 0, then every byte 1, ..."""
    return np.ascontiguousarray(items).view(np.uint8).reshape(-1, 4).T.tobytes()


def _unshuffle(blob: bytes, count: int) -> np.ndarray:
    return np.frombuffer(blob, np.uint8).reshape(4, count).T.copy().view("<u4").reshape(count)


def pack_detail(ids: np.ndarray, logprobs: np.ndarray, top_ids: np.ndarray, top_logprobs: np.ndarray) -> bytes:
    """The top-k ids and the chosen logprobs, packed against the ids and top-k logprobs stored raw."""
    n, k = top_ids.shape
    top = top_ids.astype("<i4").view("<u4").copy()
    chosen = logprobs.astype("<f4").view("<u4").copy()
    if k:
        top[:, 0] ^= ids.astype("<i4").view("<u4")
        chosen ^= top_logprobs[:, 0].astype("<f4").view("<u4")
    return isal_zlib.compress(_shuffle(np.concatenate([top.reshape(-1), chosen])), LEVEL)


def unpack_detail(blob: bytes, ids: np.ndarray, top_logprobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(top_ids int64 [n, k], logprobs float32 [n]) from `pack_detail`'s bytes."""
    n, k = top_logprobs.shape
    items = _unshuffle(isal_zlib.decompress(blob), n * k + n)
    top = items[: n * k].reshape(n, k).copy()
    chosen = items[n * k :].copy()
    if k:
        top[:, 0] ^= ids.astype("<i4").view("<u4")
        chosen ^= top_logprobs[:, 0].astype("<f4").view("<u4")
    return top.view("<i4").astype(np.int64), chosen.view("<f4").astype(np.float32)


_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"))  # escapes what UTF-8 cannot hold (lone surrogates)


def dumps_strings(value: Sequence[str] | Sequence[Sequence[str]]) -> str:
    """Token strings as compact JSON, ~10x faster than json: orjson for text UTF-8 can hold.

    A lone surrogate (half of a character split across byte-level tokens) is not UTF-8: orjson refuses
    it and SQLite could not store it, so such lists are written with \\u escapes, which read back the same.
    """
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return _ASCII_ENCODER.encode(value)


def loads_strings(text: bytes) -> Any:
    """`dumps_strings` read back: orjson, about twice json's speed, or json where an escaped lone surrogate is
    in the text (orjson refuses one; json gives it back as written)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


TABLE_FROM, TABLE_SPAN, DENSE_IDS = 1024, 32, 1 << 20
"""Top-k ids are grouped through a table indexed by id where there are at least TABLE_FROM of them and the ids
stay below TABLE_SPAN times as many (and below DENSE_IDS: a table of 8 MiB at most); elsewhere sorting them
costs less.  Measured against a sort: 1.2 against 2.1 ms for 20,480 alternatives over a 32,000-token
vocabulary, 0.25 against 0.34 for 5,120 over 152,000, and 30 against 15 us for 160."""


def _names_by_id(top_ids: np.ndarray, flat: list[str] | None) -> tuple[np.ndarray, list[str]] | None:
    """(ids, their one name each) when every top-k entry's string is its id's, the same wherever it appears,
    and the ids repeat enough for one name per id to be the smaller record.

    `flat` is every top-k string, row after row (`TokenTrace.top_names`; None where rows are shorter
    than k).  Then the top-k strings need no storing beyond one name per distinct id: the top-k ids
    say which.  An engine that names alternatives without ids (-1 standing for many strings), rows
    shorter than k, or ids that seldom repeat (see NAMED_SHARE) keep the strings as they are.
    """
    if flat is None:
        return None
    ids = top_ids.reshape(-1)
    if ids.size >= TABLE_FROM:
        low, high = int(ids.min()), int(ids.max())
        if low >= 0 and high < min(DENSE_IDS, TABLE_SPAN * ids.size):
            return _named_by_table(ids, high, flat)
    return _named_by_sort(ids, flat)


def _named_by_table(ids: np.ndarray, high: int, flat: list[str]) -> tuple[np.ndarray, list[str]] | None:
    """`_names_by_id` for ids of 0 to `high` (none absent): each string compared with the one at its id's first
    place."""
    places = np.arange(ids.size)
    first = np.full(high + 1, ids.size)
    np.minimum.at(first, ids, places)  # each id's first place
    origin = first[ids]
    repeat = origin != places
    if (ids.size - int(np.count_nonzero(repeat))) * NAMED_SHARE > ids.size:  # decided before a string is read
        return None
    names = np.array(flat, dtype=object)
    if not (names[repeat] == names[origin[repeat]]).all():  # a string not its id's first
        return None
    named = np.flatnonzero(first < ids.size)  # the ids present, ascending
    return named, names[first[named]].tolist()


def _named_by_sort(ids: np.ndarray, flat: list[str]) -> tuple[np.ndarray, list[str]] | None:
    """`_names_by_id` for any ids: sorted, each id's strings side by side."""
    order = ids.argsort(kind="stable")  # np.unique's sort, without its inverse and second gather
    ids = ids[order]
    if ids.size and ids[0] < 0:  # an absent id names no one string
        return None
    repeated = ids[1:] == ids[:-1]
    if (ids.size - int(np.count_nonzero(repeated))) * NAMED_SHARE > ids.size:  # decided before a string is read
        return None
    names = np.array(flat, dtype=object)[order]
    if not (names[1:][repeated] == names[:-1][repeated]).all():  # an id's strings, side by side: all one
        return None
    first = np.concatenate([[True], ~repeated]) if ids.size else repeated
    return ids[first], names[first].tolist()


def _raw_apart(pieces: list[str], raw: list[bytes | None]) -> tuple[bytes, np.ndarray]:
    """The exact bytes of the tokens whose bytes are not their piece's UTF-8 (length -2 marks the others)."""
    if raw.count(None) == len(raw):  # no token has bytes (counted in C: None is found by identity)
        return b"", np.full(len(raw), -1, "<i4")
    if len(raw) != len(pieces):  # bytes without pieces to compare with: all kept
        return b"".join(b for b in raw if b is not None), np.array([-1 if b is None else len(b) for b in raw], "<i4")
    encoded = _utf8(pieces)
    if encoded == raw:  # the usual case, compared in C: nothing to keep
        return b"", np.full(len(raw), -2, "<i4")
    lens = np.full(len(raw), -2, "<i4")
    apart = np.flatnonzero(~np.fromiter(map(operator.eq, encoded, raw), bool, len(raw))).tolist()
    kept = []
    for i in apart:
        chunk = raw[i]
        if chunk is None:
            lens[i] = -1
        else:
            lens[i] = len(chunk)
            kept.append(chunk)
    return b"".join(kept), lens


_UNSAYABLE = object()
"""A piece with a lone surrogate in `_utf8`'s list: no UTF-8 says it, so no bytes equal it."""


def _utf8(pieces: list[str]) -> list[object]:
    """Every piece's UTF-8 (`_UNSAYABLE` for a piece with a lone surrogate), in C where none has one."""
    try:
        return list(map(str.encode, pieces))
    except UnicodeEncodeError:
        return list(map(_utf8_of, pieces))


def _utf8_of(piece: str) -> object:
    try:
        return piece.encode()
    except UnicodeEncodeError:
        return _UNSAYABLE


@pausing_collections
def pack_strings(trace: TokenTrace) -> bytes:
    """Every token string of a trace, packed: pieces as JSON, top-k strings as one name per distinct id where
    that holds them exactly (else as JSON), and only the exact bytes that differ from their piece's UTF-8.

    The row tuples and arrays of names it makes are freed before the collector could walk them."""
    flat = trace.top_names()
    named = _names_by_id(trace.top_ids, flat)
    if named is not None:
        name_ids, top = named[0].astype("<i4").tobytes(), dumps_strings(named[1])
    elif flat is not None:  # rows of k as tuples: the same JSON, without a list per token
        name_ids, top = b"", dumps_strings(list(zip(*[iter(flat)] * trace.top_ids.shape[1])))
    else:
        name_ids, top = b"", dumps_strings(trace.top_pieces)
    raw, lens = _raw_apart(trace.pieces, trace.raw)
    parts = (dumps_strings(trace.pieces).encode("utf-8"), top.encode("utf-8"), name_ids, raw, lens.tobytes())
    header = _HEADER.pack(int(named is not None), *map(len, parts))
    return isal_zlib.compress(header + b"".join(parts), LEVEL)


@pausing_collections
def unpack_strings(
    blob: bytes, top_ids: np.ndarray | None, *, raw: bool = True, top: bool = True
) -> tuple[list[str], list[bytes | None], list[list[str]]]:
    """(pieces, raw, top_pieces) from `pack_strings`' bytes; `raw=False` skips the exact bytes, `top=False` the
    top-k strings ([] for what is skipped; `top_ids`, which name them, are needed only for them).

    The lists it makes (one a token for the top-k strings) outlive it, but are built with the collector
    held off: built under it, a trace of 16k tokens set off some twenty collections, and in a process
    holding a comparison each full one walked the whole heap (a report of long outputs spent half its
    time there)."""
    named, (pieces_json, top_json, name_ids, raw_blob, lens_bytes) = _parts(blob)
    pieces: list[str] = loads_strings(pieces_json)
    exact = _raw_back(pieces, raw_blob, np.frombuffer(lens_bytes, "<i4")) if raw else []
    if not top:
        return pieces, exact, []
    if not named:
        return pieces, exact, loads_strings(top_json)
    assert top_ids is not None, "named top-k strings are read through their ids"
    names = np.empty(len(name_ids) // 4, dtype=object)
    names[:] = loads_strings(top_json)
    return pieces, exact, names[_name_places(np.frombuffer(name_ids, "<i4"), top_ids)].tolist()


@pausing_collections
def unpack_top_row(blob: bytes, position: int, top_ids: np.ndarray) -> list[str]:
    """The top-k strings of the token at `position` (`top_ids`: the trace's top-k ids) from `pack_strings`'
    bytes, as `unpack_strings` gives that row, without the other rows made: a report shows one token's
    alternatives."""
    named, (_, top_json, name_ids, _, _) = _parts(blob)
    if not named:
        return _row_of(top_json, position, len(top_ids))
    names: list[str] = loads_strings(top_json)
    return [names[i] for i in _name_places(np.frombuffer(name_ids, "<i4"), top_ids[position]).tolist()]


_OPEN, _CLOSE = ord("["), ord("]")


def _row_of(text: bytes, position: int, rows: int) -> list[str]:
    """One row of a JSON array of `rows` rows of strings: cut out by its brackets where the text has exactly the
    rows' own (rows + 1 of each: no string holds one), else found by parsing every row (4 ms for 16k), with
    the collector held off as they are freed before it could walk them."""
    codes = np.frombuffer(text, np.uint8)
    opens, closes = np.flatnonzero(codes == _OPEN), np.flatnonzero(codes == _CLOSE)
    if len(opens) == len(closes) == rows + 1 and position < rows:
        row: list[str] = loads_strings(text[opens[position + 1] : closes[position] + 1])
        return row
    every: list[list[str]] = loads_strings(text)
    return every[position] if position < len(every) else []


def _parts(blob: bytes) -> tuple[int, list[bytes]]:
    """`pack_strings`' bytes unzipped: whether the top-k strings are named by id, and its five parts."""
    data = isal_zlib.decompress(blob)
    named, *lengths = _HEADER.unpack_from(data)
    parts, offset = [], _HEADER.size
    for length in lengths:
        parts.append(data[offset : offset + length])
        offset += length
    return named, parts


def _name_places(named: np.ndarray, top_ids: np.ndarray) -> np.ndarray:
    """Where each top-k id is in `named` (the ascending ids that have a name, as `_names_by_id` wrote them):
    through a table indexed by id where the ids allow one (see TABLE_FROM), else by binary search."""
    if top_ids.size >= TABLE_FROM and len(named) and 0 <= int(named[0]) and int(named[-1]) < DENSE_IDS:
        table = np.zeros(int(named[-1]) + 1, np.intp)
        table[named] = np.arange(len(named))
        return table[top_ids]
    return np.searchsorted(named, top_ids)


def _raw_back(pieces: list[str], blob: bytes, lens: np.ndarray) -> list[bytes | None]:
    """`_raw_apart` undone: each piece's UTF-8 where marked -2, None where -1, else the next bytes kept."""
    if len(lens) == len(pieces) and (lens == -2).all():
        return list(map(str.encode, pieces))
    raw: list[bytes | None] = []
    at = 0
    for i, length in enumerate(lens.tolist()):
        if length == -2:
            raw.append(pieces[i].encode("utf-8"))
        elif length < 0:
            raw.append(None)
        else:
            raw.append(blob[at : at + length])
            at += length
    return raw


class StoredTrace(TokenTrace):
    """A token trace read with its ids only (or with its tokens' strings too, `with_strings`); its other
    columns are read from the store when first used.

    What a comparison reads of most samples is their ids (without ids, their
    tokens' strings and exact bytes); a sample's top-k logprobs are read for
    the baseline's resolution, and its packed detail (top-k ids, chosen
    logprobs) only where it diverges.  `fetch(column)` reads one `tokens`
    column of this sample.
    """

    def __init__(self, ids: np.ndarray, k: int, fetch: Callable[[str], bytes]):
        self.ids = ids
        self._k = k
        self._fetch = fetch
        self._top_logprobs: np.ndarray | None = None
        self._detail: tuple[np.ndarray, np.ndarray] | None = None
        self._pieces: list[str] = []
        self._raw: list[bytes | None] = []

    def _unpacked(self) -> tuple[np.ndarray, np.ndarray]:
        if self._detail is None:
            self._detail = unpack_detail(self._fetch("detail"), self.ids, self.top_logprobs)
        return self._detail

    @property
    def top_logprobs(self) -> np.ndarray:
        if self._top_logprobs is None:
            self._top_logprobs = (
                np.frombuffer(self._fetch("top_logprobs"), "<f4").reshape(len(self.ids), self._k).copy()
            )
        return self._top_logprobs

    @top_logprobs.setter
    def top_logprobs(self, value: np.ndarray) -> None:
        self._top_logprobs = value

    @property
    def top_ids(self) -> np.ndarray:
        return self._unpacked()[0]

    @top_ids.setter
    def top_ids(self, value: np.ndarray) -> None:
        self._detail = (value, self._unpacked()[1])

    @property
    def logprobs(self) -> np.ndarray:
        return self._unpacked()[1]

    @logprobs.setter
    def logprobs(self, value: np.ndarray) -> None:
        self._detail = (self._unpacked()[0], value)

    def with_strings(self, *, raw: bool = False) -> StoredTrace:
        """This trace with its chosen tokens' strings read too, and with `raw` their exact bytes (as `strings=
        "pieces"` and "tokens" read them); the columns read so far are shared, the others still read when first
        used."""
        read = copy.copy(self)
        read._pieces, read._raw, _ = unpack_strings(self._fetch("strings"), None, raw=raw, top=False)
        return read

    @property
    def pieces(self) -> list[str]:
        return self._pieces  # [] unless read `with_strings`: ids suffice (as `strings="none"` reads any store)

    @pieces.setter
    def pieces(self, value: list[str]) -> None:
        raise AttributeError("a StoredTrace is read without strings")

    @property
    def raw(self) -> list[bytes | None]:
        return self._raw

    @raw.setter
    def raw(self, value: list[bytes | None]) -> None:
        raise AttributeError("a StoredTrace is read without strings")

    @property
    def top_pieces(self) -> list[list[str]]:
        return []

    @top_pieces.setter
    def top_pieces(self, value: list[list[str]]) -> None:
        raise AttributeError("a StoredTrace is read without strings")
