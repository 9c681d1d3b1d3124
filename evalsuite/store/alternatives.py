"""The alternatives' strings in store layout 3 (the `top_strings` column): read a row at a time.

Where ids name strings consistently, one name per distinct id, as layout 2
stores them (`store.tokens`): the trace's top-k ids say which.  Otherwise
(alternatives without ids: vLLM's, or APIs that name tokens by text) the
rows are JSON arrays, ROWS of them to a zlib stream: a diff or a report that
shows one token's alternatives unpacks the one stream holding its row, not
all of a 16k-token output's (a whole read unpacks them all, in order).
"""

from __future__ import annotations

import struct

import numpy as np
from isal import isal_zlib

from evalsuite.collector import pausing_collections
from evalsuite.records import TokenTrace
from evalsuite.store.tokens import LEVEL, cut, dumps_strings, loads_strings, named_rows, names_of, top_rows_of

ROWS = 512
"""Rows a stream: one token's row costs a stream of 512 to unpack and parse (about 0.1 ms at top-5)."""
_ROWS, _NAMED = 0, 1
_HEAD = struct.Struct("<3I")  # kind; then (named) the names' and ids' lengths, or (rows) rows a stream, streams


@pausing_collections
def pack_top_strings(trace: TokenTrace) -> bytes:
    """Every token's alternatives' strings, packed (see the module)."""
    flat = trace.top_names()
    named = names_of(trace, flat)
    if named is not None:
        return _HEAD.pack(_NAMED, len(named[0]), len(named[1])) + isal_zlib.compress(b"".join(named), LEVEL)
    rows = top_rows_of(trace, flat)
    streams = [
        isal_zlib.compress(dumps_strings(rows[i : i + ROWS]).encode("utf-8"), LEVEL) for i in range(0, len(rows), ROWS)
    ]
    sizes = np.array(list(map(len, streams)), "<u4").tobytes()
    return _HEAD.pack(_ROWS, ROWS, len(streams)) + sizes + b"".join(streams)


@pausing_collections
def unpack_top_strings(blob: bytes, top_ids: np.ndarray) -> list[list[str]]:
    """Every token's alternatives' strings from `pack_top_strings`' bytes (`top_ids`: the trace's top-k ids)."""
    kind, first, second = _HEAD.unpack_from(blob)
    if kind == _NAMED:
        names, ids = _named(blob, first, second)
        rows: list[list[str]] = named_rows(names, ids, top_ids)
        return rows
    rows = []
    for stream in _streams(blob, second):
        rows.extend(loads_strings(isal_zlib.decompress(stream)))
    return rows


@pausing_collections
def unpack_top_row(blob: bytes, position: int, top_ids: np.ndarray) -> list[str]:
    """The alternatives' strings of the token at `position`, as the whole read gives that row (none past the
    last)."""
    kind, first, second = _HEAD.unpack_from(blob)
    if position >= len(top_ids):
        return []
    if kind == _NAMED:
        names, ids = _named(blob, first, second)
        row: list[str] = named_rows(names, ids, top_ids[position])
        return row
    streams = _streams(blob, second)
    if not first or position // first >= len(streams):
        return []
    rows = loads_strings(isal_zlib.decompress(streams[position // first]))
    return list(rows[position % first]) if position % first < len(rows) else []


def _named(blob: bytes, names: int, ids: int) -> tuple[bytes, bytes]:
    names_json, name_ids = cut(isal_zlib.decompress(blob[_HEAD.size :]), 0, (names, ids), "the alternatives' names")
    if ids % 4:
        raise ValueError("the alternatives' names are not one a whole id")
    return names_json, name_ids


def _streams(blob: bytes, count: int) -> list[bytes]:
    """The row streams, cut by their sizes."""
    start = _HEAD.size + 4 * count
    if len(blob) < start:
        raise ValueError("the alternatives' streams do not match their header")
    return cut(blob, start, np.frombuffer(blob, "<u4", count, _HEAD.size).tolist(), "the alternatives' streams")
