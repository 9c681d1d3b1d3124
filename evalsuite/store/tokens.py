"""Token columns of store layouts 2 and 3: what every comparison reads stays raw, what is rarely read is packed.

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

Layout 3 keeps the chosen tokens' strings (`store.chosen`), which are the
tokens of an output without ids, apart from their alternatives' strings
(`store.alternatives`, named by id as here, else in streams of rows): reading
the tokens no longer unpacks the alternatives.
"""

from __future__ import annotations

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

TOKEN_COLUMNS = ("ids", "top_logprobs", "detail", "strings", "top_strings")
"""The `tokens` table's columns after `sample_id`, in the order a reader needs them (layout 2: the first four)."""


def token_columns(layout: int) -> tuple[str, ...]:
    """The `tokens` table's columns in `layout` (2 or later)."""
    return TOKEN_COLUMNS if layout >= 3 else TOKEN_COLUMNS[:4]


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


def raw_apart(raw: list[bytes | None], encoded: Callable[[], list[object]]) -> tuple[bytes, np.ndarray]:
    """The exact bytes of the tokens whose bytes are not their piece's (length -2 marks the others, -1 a token
    without bytes); `encoded()` gives each piece's bytes, asked for only where some token has bytes."""
    if raw.count(None) == len(raw):  # no token has bytes (counted in C: None is found by identity)
        return b"", np.full(len(raw), -1, "<i4")
    own = encoded()
    if len(raw) != len(own):  # bytes without pieces to compare with: all kept
        return b"".join(b for b in raw if b is not None), np.array([-1 if b is None else len(b) for b in raw], "<i4")
    if own == raw:  # the usual case, compared in C: nothing to keep
        return b"", np.full(len(raw), -2, "<i4")
    lens = np.full(len(raw), -2, "<i4")
    apart = np.flatnonzero(~np.fromiter(map(operator.eq, own, raw), bool, len(raw))).tolist()
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


def _pack_top(trace: TokenTrace) -> tuple[int, bytes, bytes]:
    """The top-k strings as stored: (1 where named by id, else 0; their JSON; the ids named, raw)."""
    flat = trace.top_names()
    named = names_of(trace, flat)
    if named is not None:
        return 1, named[0], named[1]
    return 0, dumps_strings(top_rows_of(trace, flat)).encode("utf-8"), b""


def names_of(trace: TokenTrace, flat: list[str] | None) -> tuple[bytes, bytes] | None:
    """The alternatives' strings (`flat`: `trace.top_names()`) as one name per distinct id (the names' JSON, the
    ids raw, ascending), where that holds them exactly and pays (`_names_by_id`)."""
    named = _names_by_id(trace.top_ids, flat)
    if named is None:
        return None
    return dumps_strings(named[1]).encode("utf-8"), named[0].astype("<i4").tobytes()


def top_rows_of(trace: TokenTrace, flat: list[str] | None) -> Sequence[Sequence[str]]:
    """The alternatives' strings (`flat`: `trace.top_names()`), a row a token: rows of k as tuples where every
    row is full (the same JSON, without a list per token)."""
    if flat is not None:
        return list(zip(*[iter(flat)] * trace.top_ids.shape[1]))
    return trace.top_pieces


def _top_rows(named: int, top_json: bytes, name_ids: bytes, top_ids: np.ndarray | None) -> list[list[str]]:
    """`_pack_top`'s parts read back, every row."""
    if not named:
        rows: list[list[str]] = loads_strings(top_json)
        return rows
    assert top_ids is not None, "named top-k strings are read through their ids"
    return named_rows(top_json, name_ids, top_ids)


def _top_row(named: int, top_json: bytes, name_ids: bytes, position: int, top_ids: np.ndarray) -> list[str]:
    """`_pack_top`'s parts read back, one row, without the others made."""
    if not named:
        return _row_of(top_json, position, len(top_ids))
    return named_rows(top_json, name_ids, top_ids[position])


def named_rows(names_json: bytes, name_ids: bytes, top_ids: np.ndarray) -> Any:
    """The strings of `top_ids` (any shape: rows of them as lists) from one name per distinct id: `names_json`
    the names, `name_ids` (raw int32) the ids they name, ascending."""
    names = np.empty(len(name_ids) // 4, dtype=object)
    names[:] = loads_strings(names_json)
    return names[_name_places(np.frombuffer(name_ids, "<i4"), top_ids)].tolist()


@pausing_collections
def pack_strings(trace: TokenTrace) -> bytes:
    """Layout 2's token strings, packed: pieces as JSON, top-k strings as one name per distinct id where that
    holds them exactly (else as JSON), and only the exact bytes that differ from their piece's UTF-8.

    The row tuples and arrays of names it makes are freed before the collector could walk them."""
    named, top, name_ids = _pack_top(trace)
    raw, lens = raw_apart(trace.raw, lambda: _utf8(trace.pieces))
    parts = (dumps_strings(trace.pieces).encode("utf-8"), top, name_ids, raw, lens.tobytes())
    return isal_zlib.compress(_HEADER.pack(named, *map(len, parts)) + b"".join(parts), LEVEL)


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
    named, (pieces_json, top_json, name_ids, raw_blob, lens_bytes) = _parts(blob, _HEADER)
    pieces: list[str] = loads_strings(pieces_json)
    exact = _raw_back(pieces, raw_blob, np.frombuffer(lens_bytes, "<i4")) if raw else []
    return pieces, exact, _top_rows(named, top_json, name_ids, top_ids) if top else []


@pausing_collections
def unpack_top_row(blob: bytes, position: int, top_ids: np.ndarray) -> list[str]:
    """The top-k strings of the token at `position` (`top_ids`: the trace's top-k ids) from `pack_strings`'
    bytes, as `unpack_strings` gives that row, without the other rows made: a report shows one token's
    alternatives."""
    named, (_, top_json, name_ids, _, _) = _parts(blob, _HEADER)
    return _top_row(named, top_json, name_ids, position, top_ids)


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


def _parts(blob: bytes, header: struct.Struct) -> tuple[int, list[bytes]]:
    """Packed strings unzipped: whether the top-k strings are named by id, and the parts `header` gives the
    lengths of."""
    data = isal_zlib.decompress(blob)
    named, *lengths = header.unpack_from(data)
    return named, cut(data, header.size, lengths, "the packed strings")


def cut(data: bytes, start: int, lengths: Sequence[int], what: str) -> list[bytes]:
    """`data` from `start` on, cut into parts of `lengths`, which must cover it exactly: else a ValueError naming
    `what` (a torn or edited column, which the store reports as damage)."""
    parts = []
    for length in lengths:
        parts.append(data[start : start + length])
        start += length
    if start != len(data):
        raise ValueError(f"{what} do not match their header")
    return parts


def _name_places(named: np.ndarray, top_ids: np.ndarray) -> np.ndarray:
    """Where each top-k id is in `named` (the ascending ids that have a name, as `_names_by_id` wrote them):
    through a table indexed by id where the ids allow one (see TABLE_FROM), else by binary search."""
    if top_ids.size >= TABLE_FROM and len(named) and 0 <= int(named[0]) and int(named[-1]) < DENSE_IDS:
        table = np.zeros(int(named[-1]) + 1, np.intp)
        table[named] = np.arange(len(named))
        return table[top_ids]
    return np.searchsorted(named, top_ids)


def _raw_back(pieces: list[str], blob: bytes, lens: np.ndarray) -> list[bytes | None]:
    """`raw_apart` undone for layout 2's pieces: each piece's UTF-8 where marked -2."""
    if len(lens) == len(pieces) and (lens == -2).all():
        return list(map(str.encode, pieces))
    return raw_back(lens, lambda i: pieces[i].encode("utf-8"), blob)


def raw_back(marks: np.ndarray, own: Callable[[int], bytes], kept: bytes) -> list[bytes | None]:
    """`raw_apart` undone: token i's own bytes (`own(i)`) where marked -2, None where -1, else the next bytes
    `kept`."""
    raw: list[bytes | None] = []
    at = 0
    for i, mark in enumerate(marks.tolist()):
        if mark == -2:
            raw.append(own(i))
        elif mark < 0:
            raw.append(None)
        else:
            raw.append(kept[at : at + mark])
            at += mark
    return raw
