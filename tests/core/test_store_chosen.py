"""Layout 3's chosen tokens' strings: read back as written, and joined from the stream as the lists join.

Whatever text a server sends (lone surrogates, control characters, empty
pieces) and whatever bytes (the piece's own, a split character's, none),
`ChosenStrings` gives back the lists `pack_chosen` was given, and its joins are
the joins a comparison of those lists makes (`records.joined_*`).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from isal import isal_zlib

from evalsuite.records import joined_bytes, joined_pieces
from evalsuite.store.chosen import ChosenStrings, pack_chosen

ANY_CHAR = st.characters(codec=None, exclude_categories=())  # lone surrogates and control characters included
SPLIT = b"\xe2\x89"  # the first two bytes of a three-byte character


def _bytes_of(piece: str, form: int) -> bytes | None:
    """A token's bytes: its piece's own (a lone surrogate's as its three bytes), a split character's, none, or
    empty."""
    return [piece.encode("utf-8", "surrogatepass"), SPLIT, None, b""][form]


def _same_join(got: tuple[bytes, np.ndarray], want: tuple[bytes, np.ndarray]) -> None:
    assert got[0] == want[0]
    assert got[1].dtype == np.int64 and got[1].tolist() == want[1].tolist()


@given(
    st.lists(st.tuples(st.text(ANY_CHAR, max_size=5), st.integers(0, 3)), max_size=12),
    st.integers(0, 2),
    st.integers(-2, 14),
    st.integers(-2, 14),
)
def test_pieces_and_bytes_read_back_and_join_as_the_lists_do(
    tokens: list[tuple[str, int]], shape: int, start: int, stop: int
) -> None:
    """`shape`: every token with pieces and bytes, pieces without bytes, or bytes without pieces; a window's
    text (`start`, `stop`: a slice's bounds) is the pieces' there."""
    pieces = [piece for piece, _ in tokens]
    raw = [_bytes_of(piece, form) for piece, form in tokens]
    if shape == 1:
        raw = []
    elif shape == 2:
        pieces = []
    chosen = ChosenStrings(pack_chosen(pieces, raw))
    assert chosen.pieces() == pieces and chosen.raw() == raw and chosen.count == len(pieces)
    _same_join(chosen.joined(False), joined_pieces(pieces))
    assert chosen.text_of(start, stop) == "".join(pieces[start:stop])
    exact = len(raw) == len(tokens) and None not in raw
    assert chosen.exact(len(tokens)) == exact
    if exact:
        _same_join(chosen.joined(True), joined_bytes(raw))  # type: ignore[arg-type]


def test_only_bytes_that_are_not_the_pieces_own_are_kept() -> None:
    pieces = [f" word{i} é" for i in range(200)]
    raw: list[bytes | None] = [p.encode() for p in pieces]
    assert ChosenStrings(pack_chosen(pieces, raw))._kept == b""  # the stream says them all
    raw[7] = SPLIT
    chosen = ChosenStrings(pack_chosen(pieces, raw))
    assert chosen._kept == SPLIT and chosen.raw() == raw
    assert chosen.joined(True)[0] == b"".join(raw)  # type: ignore[arg-type]


def _packed(stream: bytes, lengths: list[int], kept: bytes, marks: list[int], header: list[int] | None = None) -> bytes:
    parts = (stream, np.array(lengths, "<i4").tobytes(), kept, np.array(marks, "<i4").tobytes())
    return isal_zlib.compress(struct.pack("<4I", *(header or map(len, parts))) + b"".join(parts))


@pytest.mark.parametrize(
    ("parts", "says"),
    [  # packed in the test: a compressor's bytes may differ between processes, and a test's id must not
        ((b"ab", [1, 1], b"", [-2, -2], [3, 8, 0, 8]), "do not match their header"),
        ((b"ab", [1, 2], b"", [-2, -2]), "do not add up to their stream"),
        ((b"ab", [3, -1], b"", [-2, -2]), "do not add up to their stream"),
        ((b"ab", [1, 1], b"x", [-2, 2]), "exact bytes do not add up"),
        ((b"ab", [1, 1], b"", [-2, -3]), "exact bytes do not add up"),
        ((b"ab", [2], b"", [-2, -2]), "name pieces that are not there"),
        ((b"a\xff", [1, 1], b"", []), "can't decode"),
    ],
)
def test_strings_that_do_not_hold_together_are_refused_when_read(parts: tuple[Any, ...], says: str) -> None:
    """An edited or torn column that still unzips: refused as a ValueError (the store's damage) on reading, not
    found wrong later by a diff."""
    with pytest.raises(ValueError, match=says):
        ChosenStrings(_packed(*parts))
