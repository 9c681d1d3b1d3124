"""A stream's token columns, packed a fold at a time while the rest of the stream is still to come.

A token of a stream in flight with top-5 alternatives was six ids, six logprobs and six strings as
Python objects in lists: about 900 bytes, held until the stream ends, times every stream in flight.
Packed, the numbers are arrays (8 bytes each) and a fold's strings one string (their characters and
a separator): a quarter of that.  Where a fold's values do not pack (one absent, an id beyond int64,
a NaN, a string holding the separator), that fold is kept as it came, and the column comes back as
the same list it would have been: the checks then see exactly what they saw unpacked.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np

_SEPARATOR = "\0"


class PackedNumbers:
    """One numeric column (ids or logprobs): an array where every value fits `dtype`, else the values."""

    def __init__(self, dtype: type) -> None:
        self._dtype = dtype
        self._parts: list[np.ndarray | list[Any]] = []

    def extend(self, values: list[Any] | np.ndarray) -> None:
        if not len(values):
            return
        try:
            packed: np.ndarray = np.fromiter(values, self._dtype, len(values))
        except (TypeError, OverflowError):  # an absent id (None), or one too large: kept as they came
            self._parts.append(values)
            return
        if packed.dtype.kind == "f" and np.isnan(packed).any():  # numpy makes an absent logprob NaN
            self._parts.append(values)
            return
        self._parts.append(packed)

    def values(self) -> np.ndarray | list[Any]:
        """The whole column: one array when every fold packed (as `columns.checked` would make of it), else a list."""
        parts = self._parts
        if all(type(part) is np.ndarray for part in parts):
            return np.concatenate(parts) if parts else np.empty(0, self._dtype)
        return list(chain.from_iterable(p.tolist() if type(p) is np.ndarray else p for p in parts))


class PackedStrings:
    """One column of token strings: each fold's joined by a separator none of them holds, else the values."""

    def __init__(self) -> None:
        self._parts: list[str | list[Any]] = []

    def extend(self, values: list[Any]) -> None:
        if not values:
            return
        try:
            joined = _SEPARATOR.join(values)
        except TypeError:  # an absent token (None)
            self._parts.append(values)
            return
        self._parts.append(joined if joined.count(_SEPARATOR) == len(values) - 1 else values)

    def values(self) -> list[Any]:
        return list(chain.from_iterable(p.split(_SEPARATOR) if type(p) is str else p for p in self._parts))
