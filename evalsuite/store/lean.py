"""A token trace read from the store column by column, each column when first used.

What a comparison reads of most samples is their ids (without ids, their
tokens' strings and exact bytes); a sample's top-k logprobs are read for the
baseline's resolution, and its packed detail (top-k ids, chosen logprobs)
only where it diverges.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Protocol, TypeVar

import numpy as np

from evalsuite.records import TokenTrace, one_row_named
from evalsuite.store.chosen import ChosenStrings
from evalsuite.store.tokens import unpack_detail, unpack_strings

T = TypeVar("T")


class Fetch(Protocol):
    """Reads one `tokens` column of one sample and decodes it with `decode`: a column that does not decode is
    the store's to report (a StoreError naming the file), wherever the trace happens to be used."""

    def __call__(self, column: str, decode: Callable[[bytes], T], /) -> T: ...


class StoredTrace(TokenTrace):
    """A token trace read with its ids only (or with its tokens' strings too, `with_strings`); its other
    columns are read from the store when first used.  `fetch` reads one `tokens` column of this sample;
    `layout` is the store's (layout 3 keeps the chosen tokens' strings apart, `store.chosen`).
    """

    def __init__(self, ids: np.ndarray, k: int, fetch: Fetch, layout: int = 2):
        self.ids = ids
        self._k = k
        self._fetch = fetch
        self._layout = layout
        self._top_logprobs: np.ndarray | None = None
        self._detail: tuple[np.ndarray, np.ndarray] | None = None
        self._chosen: ChosenStrings | None = None  # layout 3, read `with_strings`: lists made when first used
        self._with_raw = False
        self._pieces: list[str] | None = []
        self._raw: list[bytes | None] | None = []
        self._named: list[list[str]] = []  # rows with one token's alternatives' strings only (`named_at`)

    def _unpacked(self) -> tuple[np.ndarray, np.ndarray]:
        if self._detail is None:
            top_logprobs = self.top_logprobs
            self._detail = self._fetch("detail", lambda blob: unpack_detail(blob, self.ids, top_logprobs))
        return self._detail

    @property
    def top_logprobs(self) -> np.ndarray:
        if self._top_logprobs is None:
            shape = (len(self.ids), self._k)
            self._top_logprobs = self._fetch(
                "top_logprobs", lambda blob: np.frombuffer(blob, "<f4").reshape(shape).copy()
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
        if self._layout >= 3:
            read._chosen, read._with_raw = self._fetch("strings", ChosenStrings), raw
            read._pieces = read._raw = None
        else:
            read._pieces, read._raw, _ = self._fetch(
                "strings", lambda blob: unpack_strings(blob, None, raw=raw, top=False)
            )
        return read

    @property
    def pieces(self) -> list[str]:
        if self._pieces is None:
            assert self._chosen is not None
            self._pieces = self._chosen.pieces()
        return self._pieces  # [] unless read `with_strings`: ids suffice (as `strings="none"` reads any store)

    @pieces.setter
    def pieces(self, value: list[str]) -> None:
        raise AttributeError("a StoredTrace is read without strings")

    @property
    def raw(self) -> list[bytes | None]:
        if self._raw is None:
            assert self._chosen is not None
            self._raw = self._chosen.raw() if self._with_raw else []
        return self._raw

    @raw.setter
    def raw(self, value: list[bytes | None]) -> None:
        raise AttributeError("a StoredTrace is read without strings")

    @property
    def top_pieces(self) -> list[list[str]]:
        return self._named

    @top_pieces.setter
    def top_pieces(self, value: list[list[str]]) -> None:
        raise AttributeError("a StoredTrace is read without strings")

    @property
    def has_pieces(self) -> bool:
        return self._chosen.count > 0 if self._chosen is not None else bool(self.pieces)

    @property
    def exact_bytes(self) -> bool:
        if self._chosen is not None:
            return self._with_raw and self._chosen.exact(len(self.ids))
        return super().exact_bytes

    @property
    def streamed(self) -> bool:
        return self._chosen is not None

    def joined(self, exact: bool) -> tuple[bytes, np.ndarray]:
        if self._chosen is not None:  # straight from the stored stream: no list a token
            return self._chosen.joined(exact)
        return super().joined(exact)

    def text_of(self, start: int, stop: int) -> str:
        if self._chosen is not None:
            return self._chosen.text_of(start, stop)
        return super().text_of(start, stop)

    def named_at(self, position: int, names: list[str]) -> StoredTrace:
        """This trace, still lean, with one token's alternatives' strings (`TokenTrace.named_at`)."""
        named = copy.copy(self)
        named._named = one_row_named(len(self.ids), position, names)
        return named
