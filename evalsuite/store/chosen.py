"""The chosen tokens' strings in store layout 3: one byte stream and each token's length, apart from the
alternatives' strings.

Without ids a token is its strings, so every comparison reads them.  Layout 2
kept them as JSON in one zlib stream with the alternatives' strings (five
sixths of it): a comparison unpacked all of it and made a string and a byte
string a token.  Here the pieces are one UTF-8 stream (a lone surrogate as its
own three bytes, as `records.joined_pieces` joins them) with each piece's byte
length, and the exact bytes are kept only where they are not the piece's
bytes.  A comparison takes the join straight from the stream
(`ChosenStrings.joined`); the lists are made only where a window is shown.
"""

from __future__ import annotations

import struct

import numpy as np
from isal import isal_zlib

from evalsuite.records import piece_bytes
from evalsuite.store.tokens import LEVEL, cut, raw_apart, raw_back

_HEADER = struct.Struct("<4I")  # the lengths of the parts: stream, piece lengths, bytes kept, bytes' lengths
_CONTINUATION = 0x80  # UTF-8 bytes after a character's first are 10xxxxxx


def pack_chosen(pieces: list[str], raw: list[bytes | None]) -> bytes:
    """The chosen tokens' pieces and exact bytes, packed (-2 marks bytes that are the piece's own, -1 none)."""
    encoded = piece_bytes(pieces)
    kept, kept_lengths = raw_apart(raw, lambda: encoded)  # type: ignore[arg-type,return-value]
    lengths = np.fromiter(map(len, encoded), "<i4", len(encoded))
    parts = (b"".join(encoded), lengths.tobytes(), kept, kept_lengths.tobytes())
    return isal_zlib.compress(_HEADER.pack(*map(len, parts)) + b"".join(parts), LEVEL)


class ChosenStrings:
    """`pack_chosen`'s bytes unpacked: the joins a comparison reads, and the lists a window shows."""

    def __init__(self, blob: bytes):
        """Unpacked and checked whole: what does not hold together is a ValueError here, not later in a diff."""
        data = isal_zlib.decompress(blob)
        parts = cut(data, _HEADER.size, _HEADER.unpack_from(data), "the chosen tokens' strings")
        if len(parts[1]) % 4 or len(parts[3]) % 4:
            raise ValueError("the chosen tokens' lengths are not whole numbers")
        self.stream = parts[0]
        piece_lengths = np.frombuffer(parts[1], "<i4")
        self.ends = np.cumsum(piece_lengths, dtype=np.int64)
        self._kept = parts[2]
        self._kept_lengths = np.frombuffer(parts[3], "<i4")
        self._check(piece_lengths)

    def _check(self, piece_lengths: np.ndarray) -> None:
        marks = self._kept_lengths
        if (piece_lengths < 0).any() or (self.ends[-1] if self.count else 0) != len(self.stream):
            raise ValueError("the chosen tokens' lengths do not add up to their stream")
        if (marks < -2).any() or int(marks[marks >= 0].sum()) != len(self._kept):
            raise ValueError("the chosen tokens' exact bytes do not add up")
        if (marks == -2).any() and len(marks) != self.count:
            raise ValueError("the chosen tokens' exact bytes name pieces that are not there")
        if not self.stream.isascii():
            self.stream.decode("utf-8", "surrogatepass")  # a UnicodeDecodeError (a ValueError) where it is not

    @property
    def count(self) -> int:
        """How many pieces there are (0 where the engine gave none)."""
        return len(self.ends)

    def exact(self, tokens: int) -> bool:
        """Whether each of the `tokens` tokens has its exact bytes (`TokenTrace.exact_bytes`)."""
        return len(self._kept_lengths) == tokens and not bool((self._kept_lengths == -1).any())

    def joined(self, exact: bool) -> tuple[bytes, np.ndarray]:
        """`TokenTrace.joined`, from the stream: the pieces' join is the stream itself; the exact bytes' join is
        the stream with the bytes kept apart put in their tokens' places (call with `exact` where `exact()`)."""
        if not exact:
            return self.stream, self.ends
        marks = self._kept_lengths
        if len(marks) == self.count and not (marks >= 0).any():
            return self.stream, self.ends  # every token's bytes are its piece's
        if not self.count:  # bytes without pieces: all kept
            return self._kept, np.cumsum(marks, dtype=np.int64)
        own = np.diff(self.ends, prepend=0)
        apart = marks >= 0
        lengths = np.where(apart, marks, own)
        kept_starts = np.cumsum(np.where(apart, marks, 0)) - np.where(apart, marks, 0)
        source = np.where(apart, len(self.stream) + kept_starts, self.ends - own)
        ends = np.cumsum(lengths, dtype=np.int64)
        places = np.repeat(source - (ends - lengths), lengths) + np.arange(int(ends[-1]))
        return np.frombuffer(self.stream + self._kept, np.uint8)[places].tobytes(), ends

    def text_of(self, start: int, stop: int) -> str:
        """`TokenTrace.text_of`, decoded from the stream: no list of pieces made for a window."""
        start, stop, _ = slice(start, stop).indices(self.count)
        if stop <= start:
            return ""
        begin = int(self.ends[start - 1]) if start else 0
        return self.stream[begin : int(self.ends[stop - 1])].decode("utf-8", "surrogatepass")

    def pieces(self) -> list[str]:
        """The pieces as strings."""
        if not self.count:
            return []
        if b"\x00" not in self.stream:  # NUL (U+0000 alone: never inside a character's bytes) parts them in C
            return self._parted().decode("utf-8", "surrogatepass").split("\x00")
        text = self.stream.decode("utf-8", "surrogatepass")
        ends = self.ends
        if len(text) != len(self.stream):  # not ASCII: count characters by their first bytes
            firsts = (np.frombuffer(self.stream, np.uint8) & 0xC0) != _CONTINUATION
            ends = np.concatenate([[0], np.cumsum(firsts)])[ends]
        bounds = np.concatenate([[0], ends]).tolist()
        return list(map(text.__getitem__, map(slice, bounds[:-1], bounds[1:])))

    def _parted(self) -> bytes:
        """The stream with a NUL after each piece but the last."""
        return np.insert(np.frombuffer(self.stream, np.uint8), self.ends[:-1], 0).tobytes()

    def raw(self) -> list[bytes | None]:
        """Each token's exact bytes, None where the engine gave none."""
        marks = self._kept_lengths
        if self.count and len(marks) == self.count and not (marks != -2).any() and b"\x00" not in self.stream:
            return self._parted().split(b"\x00")  # type: ignore[return-value]  # every token's bytes its piece's
        bounds = np.concatenate([[0], self.ends]).tolist()
        return raw_back(marks, lambda i: self.stream[bounds[i] : bounds[i + 1]], self._kept)
