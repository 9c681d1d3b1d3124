"""Token columns of store layout 2: what every comparison reads stays raw, what is rarely read is packed.

Read by every comparison: the token ids (the diff) and the baseline's top-k
logprobs (its logit resolution): raw little-endian arrays, a memcpy to load,
first in their row so SQLite reads nothing else to reach them.

Read at a divergence or by a report's viewer only, so packed with zlib (level
1, the cheapest): `detail` holds the top-k ids and the chosen tokens'
logprobs, `strings` the token strings (pieces, top-k pieces, exact bytes).
Before packing, the top-1 id is XORed with the chosen id and the chosen
logprob's bits with the top-1 logprob's (equal under greedy decoding, so
mostly zeros), and the detail's 4-byte items are byte-shuffled (high bytes of
ids are nearly constant): together about a third of the size zlib alone
reaches.  Every transform is exact; `unpack_*` gives back the arrays as
written.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from evalsuite.records import TokenTrace

TOKEN_COLUMNS = ("ids", "top_logprobs", "detail", "strings")
"""The `tokens` table's columns after `sample_id`, in the order a reader needs them."""
LEVEL = 1
_LENGTHS = struct.Struct("<4I")


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
    return zlib.compress(_shuffle(np.concatenate([top.reshape(-1), chosen])), LEVEL)


def unpack_detail(blob: bytes, ids: np.ndarray, top_logprobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(top_ids int64 [n, k], logprobs float32 [n]) from `pack_detail`'s bytes."""
    n, k = top_logprobs.shape
    items = _unshuffle(zlib.decompress(blob), n * k + n)
    top = items[: n * k].reshape(n, k).copy()
    chosen = items[n * k :].copy()
    if k:
        top[:, 0] ^= ids.astype("<i4").view("<u4")
        chosen ^= top_logprobs[:, 0].astype("<f4").view("<u4")
    return top.view("<i4").astype(np.int64), chosen.view("<f4").astype(np.float32)


def pack_strings(pieces: str, top_pieces: str, raw: bytes, raw_lens: bytes) -> bytes:
    """The token strings as the JSON and bytes layout 1 stored, in one compressed blob."""
    parts = (pieces.encode("utf-8"), top_pieces.encode("utf-8"), raw, raw_lens)
    return zlib.compress(_LENGTHS.pack(*map(len, parts)) + b"".join(parts), LEVEL)


def unpack_strings(blob: bytes) -> dict[str, Any]:
    """`pack_strings`' parts under layout 1's column names (pieces, top_pieces, raw, raw_lens)."""
    data = zlib.decompress(blob)
    lengths = _LENGTHS.unpack_from(data)
    out: dict[str, Any] = {}
    offset = _LENGTHS.size
    for name, length in zip(("pieces", "top_pieces", "raw", "raw_lens"), lengths):
        out[name] = data[offset : offset + length]
        offset += length
    out["pieces"] = out["pieces"].decode("utf-8")
    out["top_pieces"] = out["top_pieces"].decode("utf-8")
    return out


class StoredTrace(TokenTrace):
    """A token trace read with its ids only; its other columns are read from the store when first used.

    What a comparison reads of most samples is their ids; a sample's top-k
    logprobs are read for the baseline's resolution, and its packed detail
    (top-k ids, chosen logprobs) only where it diverges.  `fetch(column)`
    reads one `tokens` column of this sample.
    """

    def __init__(self, ids: np.ndarray, k: int, fetch: Callable[[str], bytes]):
        self.ids = ids
        self._k = k
        self._fetch = fetch
        self._top_logprobs: np.ndarray | None = None
        self._detail: tuple[np.ndarray, np.ndarray] | None = None

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

    @property
    def pieces(self) -> list[str]:
        return []  # read without strings: ids suffice (as `strings="none"` reads any store)

    @pieces.setter
    def pieces(self, value: list[str]) -> None:
        raise AttributeError("a StoredTrace is read without strings")

    @property
    def raw(self) -> list[bytes | None]:
        return []

    @raw.setter
    def raw(self, value: list[bytes | None]) -> None:
        raise AttributeError("a StoredTrace is read without strings")

    @property
    def top_pieces(self) -> list[list[str]]:
        return []

    @top_pieces.setter
    def top_pieces(self, value: list[list[str]]) -> None:
        raise AttributeError("a StoredTrace is read without strings")
