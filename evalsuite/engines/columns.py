"""The per-token fields of `logprobs.content[]`, gathered and checked in one pass.

Every response carries one entry per generated token, each with up to k
alternatives: thousands of small dicts.  Checking them (validate.py),
turning them into a TokenTrace (parse.py) and spelling their text (agree.py)
used to walk them three times in Python.  Here each field is pulled out of
all entries at once (`map` with `dict.get`, at C speed), its types are
checked as a set, and its values in bulk: ids and logprobs as numpy arrays
(which the trace keeps), byte lists with `bytes()`, or, where the typed
reading left the alternatives' lists as raw JSON, with `byte_lists_ok`.
The three consumers then read these columns.

`gather` accepts a subset of what the schema's entry rules accept:
anything unusual (a wrong type anywhere, an id out of range, a NaN or a
positive logprob, a bad byte) returns None, and the caller walks the entries
one by one, which names the first offending path.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from operator import itemgetter
from typing import Any, NamedTuple, cast

import numpy as np

from evalsuite.records import TokenTrace

TOKEN_ID_PREFIX = "token_id:"
LOGPROB_SLACK = 1e-4  # log(p) of a float p rounded just above 1.0

_NONE = type(None)
_KEY, _VALUE = itemgetter(0), itemgetter(1)
_INTS = {int, _NONE}
_STRS = {str, _NONE}
_NUMBERS = {float, int, _NONE}
_LISTS = {list, _NONE}

Numeric = list[Any] | np.ndarray
"""A column of ids or logprobs: the values (None where absent), or an array of them where every one is present
(a stream's, packed while it was read: engines/packed.py)."""


@dataclass
class Columns:
    """Checked columns of one choice's entries (chosen tokens first, then every alternative in order)."""

    ids: Numeric  # chosen ids, None where absent
    tokens: list[Any]  # chosen token strings, None where absent
    logprobs: Numeric
    raw: list[bytes | None]  # chosen tokens' bytes
    counts: list[int]  # alternatives per chosen token
    top_ids: Numeric  # every alternative's id, flattened
    top_tokens: list[Any]
    top_logprobs: Numeric
    arrays: Numbers | None = None  # the same numbers as arrays, made while checking them (see Numbers)
    spelt: str | None = None  # the chosen tokens joined, when every one is present (else None)
    top_spelt: bool = False  # whether every alternative has its token string

    def __len__(self) -> int:
        return len(self.ids)

    def text(self) -> str | None:
        """The text the chosen tokens spell, or None when some token carries no text (ids only).

        vLLM's ids-as-tokens ("token_id:N") spell nothing: their bytes may spell the placeholder itself.
        """
        spelt = self.spelt if self.spelt is not None else "".join(filter(None, self.tokens))
        if None not in self.raw and TOKEN_ID_PREFIX not in spelt:
            return b"".join(cast("list[bytes]", self.raw)).decode("utf-8", "replace")  # every token has bytes
        if self.raw.count(None) == len(self.raw) and self.spelt is not None:  # no bytes at all: the tokens spell it
            if TOKEN_ID_PREFIX in spelt and any(token.startswith(TOKEN_ID_PREFIX) for token in self.tokens):
                return None
            return spelt.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        parts: list[bytes] = []
        for raw, token in zip(self.raw, self.tokens):
            if token is not None and token.startswith(TOKEN_ID_PREFIX):
                return None
            if raw is not None:
                parts.append(raw)
            elif token is not None:
                parts.append(token.encode("utf-8", "surrogatepass"))
            else:
                return None
        return b"".join(parts).decode("utf-8", "replace")

    def trace(self) -> TokenTrace:
        """The TokenTrace of these entries (see parse.trace_from_entries for the rules it keeps)."""
        n = len(self.ids)
        k = max(self.counts, default=0)
        arrays = self.arrays or Numbers(None, None, None, None)
        full = self.counts.count(k) == n
        counts = None if full else np.array(self.counts)
        top_ids = arrays.top_ids if arrays.top_ids is not None else id_array(self.top_ids, self.top_tokens)
        top_lp = arrays.top_logprobs if arrays.top_logprobs is not None else _float64(self.top_logprobs)
        if counts is not None:  # ragged (a speculative server's accepted drafts have no alternatives): padded to k
            present = np.arange(k) < counts[:, None]
            top_ids, top_lp = _spread(present, top_ids, -1), _spread(present, top_lp, np.nan)
        return ColumnTrace(
            ids=arrays.ids if arrays.ids is not None else id_array(self.ids, self.tokens),
            pieces=list(self.tokens) if self.spelt is not None else _strings(self.tokens),
            raw=self.raw,
            logprobs=_float32(self._chosen_logprobs(arrays.logprobs, counts)),
            top_ids=top_ids.reshape(n, k),
            top_logprobs=_float32(top_lp).reshape(n, k),
            names=list(self.top_tokens) if self.top_spelt else _strings(self.top_tokens),
            counts=None if full else self.counts,
        )

    def _chosen_logprobs(self, checked: np.ndarray | None, counts: np.ndarray | None) -> np.ndarray:
        """The chosen tokens' logprobs, NaN where absent: also where an accepted draft token without
        alternatives says 0.0, which means "not reported" (`counts`: each row's alternatives; None where every
        row has k, so that a row without any means k is 0 and every row has none)."""
        values = checked if checked is not None else _float64(self.logprobs)
        if 0 in self.counts:
            unreported = values == 0.0 if counts is None else (counts == 0) & (values == 0.0)
            values = np.where(unreported, np.nan, values)
        return values


def _spread(present: np.ndarray, values: np.ndarray, fill: float) -> np.ndarray:
    """Each row's values, in order, at its present places; `fill` elsewhere."""
    out = np.full(present.shape, fill, values.dtype)
    out[present] = values
    return out


class ColumnTrace(TokenTrace):
    """A TokenTrace whose top-k strings stay one flat list until their rows are read.

    Storing a trace reads them flat (`top_names`); only a reader of `top_pieces` (reports, divergence
    explanations) needs a list per token, n lists the collector would otherwise track from the moment
    a response is read until it is stored.
    """

    def __init__(
        self,
        ids: np.ndarray,
        pieces: list[str],
        raw: list[bytes | None],
        logprobs: np.ndarray,
        top_ids: np.ndarray,
        top_logprobs: np.ndarray,
        *,
        names: list[str],
        counts: list[int] | None,
    ):
        self.ids, self.pieces, self.raw, self.logprobs = ids, pieces, raw, logprobs
        self.top_ids, self.top_logprobs = top_ids, top_logprobs
        self._names = names  # every alternative's string, row after row
        self._counts = counts  # alternatives per row; None: k in every row
        self._rows: list[list[str]] | None = None

    @property
    def top_pieces(self) -> list[list[str]]:
        if self._rows is None:
            names, k = self._names, self.top_ids.shape[1]
            if self._counts is None and k:  # rows cut by zip (slicing each row costs ~5x more)
                self._rows = list(map(list, zip(*[iter(names)] * k)))
            else:
                self._rows = _ragged_rows(names, self._counts or [0] * len(self.ids))
        return self._rows

    @top_pieces.setter
    def top_pieces(self, value: list[list[str]]) -> None:
        self._rows = value

    def top_names(self) -> list[str] | None:
        if self._rows is not None:
            return super().top_names()
        n, k = self.top_ids.shape
        return self._names if n and k and self._counts is None else None


def _ragged_rows(names: list[str], counts: list[int]) -> list[list[str]]:
    """Rows of `counts[i]` names each, in order.  The rows without alternatives share one empty list and cost
    nothing a row: a speculative server's accepted draft tokens, nearly every token of its answers, have none."""
    rows: list[list[str]] = [[]] * len(counts)
    ends = list(accumulate(counts))
    for i in np.flatnonzero(counts).tolist():
        rows[i] = names[ends[i] - counts[i] : ends[i]]
    return rows


def _strings(tokens: list[Any]) -> list[str]:
    """Token strings with "" where a token had none (a new list: the trace owns it)."""
    return [t or "" for t in tokens] if None in tokens else list(tokens)


class Numbers(NamedTuple):
    """A choice's ids (int64) and logprobs (float64, NaN where absent), chosen tokens' and alternatives'.

    An id column is None where some id is absent or out of int64's range, a logprob column where some
    logprob is too large for a float."""

    ids: np.ndarray | None
    logprobs: np.ndarray | None
    top_ids: np.ndarray | None
    top_logprobs: np.ndarray | None


class Fields(NamedTuple):
    """One field per token of some entries (the chosen tokens, or every alternative in order); None where absent."""

    ids: Numeric
    tokens: list[Any]
    logprobs: Numeric


def gather(entries: list[Any], id_limit: int) -> Columns | None:
    """The checked columns of `logprobs.content`, or None when any entry breaks a rule (walk it to name it)."""
    if not set(map(type, entries)) <= {dict}:
        return None
    tops = _field(entries, "top_logprobs")
    if not set(map(type, tops)) <= _LISTS:
        return None
    alts = list(chain.from_iterable(filter(None, tops)))
    if not set(map(type, alts)) <= {dict}:
        return None
    every = entries + alts if alts else entries
    raws = _field(every, "bytes")
    if not set(map(type, raws)) <= _LISTS:
        return None
    counts = alternative_counts(tops)
    n = len(entries)
    ids, tokens, logprobs = _field(every, "id"), _field(every, "token"), _field(every, "logprob")
    chosen = Fields(ids[:n], tokens[:n], logprobs[:n])
    return checked(counts, chosen, raws[:n], Fields(ids[n:], tokens[n:], logprobs[n:]), id_limit, alt_raws=raws[n:])


def alternative_counts(tops: list[Any]) -> list[int]:
    """How many alternatives each token has, from its `top_logprobs` (None where it has none)."""
    try:
        return list(map(len, tops))  # `None in tops` would cost a failed comparison per token
    except TypeError:
        return [0 if t is None else len(t) for t in tops]


def checked(
    counts: list[int],
    chosen: Fields,
    raws: list[Any],
    alts: Fields,
    id_limit: int,
    *,
    alt_raws: list[Any] | bytes | None = None,
    typed: bool = False,
    alt_logprobs: np.ndarray | None = None,
) -> Columns | None:
    """Columns from per-field lists, or None when a value breaks a rule.

    `counts` is how many alternatives each chosen token has, `raws` the chosen tokens' byte sequences
    (or None), `alt_raws` the alternatives' (checked, not kept): their values, or their raw JSON joined
    by NUL (typed.py; b"": none), or None where they are known to be byte values already.
    `typed`: the values are known to be of their field's type or None (msgspec checked them while
    decoding, typed.py), so only their values are checked.  `alt_logprobs`: the alternatives' logprobs
    already as an array, when the caller made one.
    """
    if not typed and not all(map(_types_ok, (chosen, alts))):
        return None
    arrays = Numbers(
        _numbers(chosen.ids, np.int64),
        _numbers(chosen.logprobs, np.float64),
        _numbers(alts.ids, np.int64),
        _numbers(alts.logprobs, np.float64) if alt_logprobs is None else alt_logprobs,
    )
    spelt, top_spelt = _spelling(chosen.tokens), _spelling(alts.tokens)
    for fields, ids, logprobs, joined in (
        (chosen, arrays.ids, arrays.logprobs, spelt),
        (alts, arrays.top_ids, arrays.top_logprobs, top_spelt),
    ):
        if not (
            _ids_ok(fields.ids, ids, id_limit)
            and _tokens_ok(fields.tokens, id_limit, joined)
            and _logprobs_ok(fields.logprobs, logprobs)
        ):
            return None
    arrays = arrays._replace(
        ids=_unnamed(chosen.ids, spelt) if arrays.ids is None else arrays.ids,
        top_ids=_unnamed(alts.ids, top_spelt) if arrays.top_ids is None else arrays.top_ids,
    )
    try:
        chosen_raw: list[bytes | None]
        if raws.count(None) == len(raws):  # no bytes at all (counted in C: None is found by identity)
            chosen_raw = list(raws)
        elif None in raws:
            chosen_raw = [None if b is None else bytes(b) for b in raws]
        else:
            chosen_raw = list(map(bytes, raws))
        if isinstance(alt_raws, list):
            bytes(chain.from_iterable(filter(None, alt_raws)))  # the alternatives' bytes: checked, not kept
    except (TypeError, ValueError):
        return None
    if isinstance(alt_raws, bytes) and not byte_lists_ok(alt_raws):
        return None
    return Columns(
        chosen.ids,
        chosen.tokens,
        chosen.logprobs,
        chosen_raw,
        counts,
        alts.ids,
        alts.tokens,
        alts.logprobs,
        arrays,
        spelt,
        top_spelt is not None,
    )


def legacy_columns(logprobs: dict[str, Any], id_limit: int, *, typed: bool = False) -> Columns | None:
    """The checked columns of the completions route's legacy lists, or None when any value breaks a rule.

    `tokens`, `token_logprobs` (one per token, or absent) and `top_logprobs` (an object of token ->
    logprob per token, or absent) become the columns `gather` makes of `logprobs.content`: no ids,
    each token's alternatives most likely first (ties keep their order: a stable sort).  None also
    where a list is not of that shape; walking the values names the fault.  `typed`: the values are
    known to be of their types already (typed.TypedLists).
    """
    tokens = logprobs.get("tokens") or []
    n = len(tokens)
    lps = logprobs.get("token_logprobs") or [None] * n
    tops = logprobs.get("top_logprobs") or [None] * n
    if not len(lps) == len(tops) == n or not (typed or set(map(type, tops)) <= {dict, _NONE}):
        return None
    counts, keys, values = flat_alternatives(tops)
    if not (typed or _legacy_types_ok(tokens, lps, values)):
        return None
    return flat_legacy_columns(tokens, lps, counts, keys, values, id_limit)


def flat_alternatives(tops: list[dict[str, Any] | None]) -> tuple[list[int], list[Any], list[Any]]:
    """The legacy `top_logprobs` objects (None or {}: no alternatives) as how many each has, then all their
    tokens and all their logprobs in order."""
    counts = alternative_counts(tops)
    given: list[Any] = list(filter(None, tops)) if 0 in counts else tops
    return counts, list(chain.from_iterable(given)), list(chain.from_iterable(map(dict.values, given)))


def flat_legacy_columns(
    tokens: list[Any], logprobs: Numeric, counts: list[int], top_tokens: list[Any], top_logprobs: Numeric, id_limit: int
) -> Columns | None:
    """`legacy_columns` of lists of known types, each token's alternatives given flat: how many it has, and
    their tokens and logprobs (the objects' keys and values) one after another, all tokens' in order."""
    n = len(tokens)
    ranked = _ranked_already(top_logprobs, [c for c in counts if c] if 0 in counts else counts)
    if ranked is not None:  # as servers send them: no pair is made or sorted
        others = Fields([None] * len(top_tokens), top_tokens, top_logprobs)
    else:
        alts = ranked_runs(top_tokens, top_logprobs, counts)
        others = Fields([None] * len(alts), list(map(_KEY, alts)), list(map(_VALUE, alts)))
    return checked(
        counts, Fields([None] * n, tokens, logprobs), [None] * n, others, id_limit, typed=True, alt_logprobs=ranked
    )


def _legacy_types_ok(tokens: list[Any], logprobs: list[Any], values: list[Any]) -> bool:
    """Tokens strings (or absent), logprobs numbers (or absent), alternatives' logprobs numbers: an
    alternative's logprob is never absent, as only numbers rank (its token is an object key: a string)."""
    return (
        set(map(type, values)) <= {int, float}
        and set(map(type, tokens)) <= _STRS
        and set(map(type, logprobs)) <= _NUMBERS
    )


def _ranked_already(values: Numeric, sizes: list[int]) -> np.ndarray | None:
    """`values` as an array when each run of `sizes` of them is in non-increasing order (NaN never is),
    checked in one pass; None when some run is not."""
    array = _numbers(values, np.float64)
    if array is None:
        return None
    k = sizes[0] if sizes else 0
    if k and sizes.count(k) == len(sizes):  # runs of one size, as servers send them: a row each
        rows = array.reshape(-1, k)
        return array if (rows[:, 1:] <= rows[:, :-1]).all() else None
    falls = array[1:] <= array[:-1]  # compared, not subtracted: -inf after -inf is a tie, not NaN
    starts = np.cumsum(np.asarray(sizes, np.int64))[:-1] - 1  # the step from one run's last value to the next's first
    falls[starts[starts < len(falls)]] = True
    return array if falls.all() else None


def ranked_runs(tokens: list[Any], logprobs: Numeric, counts: list[int]) -> list[tuple[str, Any]]:
    """The (token, logprob) pairs of each token's alternatives (`counts[i]` of them, in order), most likely
    first within each; ties keep their order."""
    values = logprobs.tolist() if isinstance(logprobs, np.ndarray) else logprobs
    pairs = list(zip(tokens, values))
    ends = accumulate(counts)
    return list(chain.from_iterable(sorted(pairs[e - c : e], key=_VALUE, reverse=True) for c, e in zip(counts, ends)))


def ranked_alternatives(tops: list[dict[str, Any] | None]) -> list[list[tuple[str, Any]]]:
    """Each legacy `top_logprobs` object's (token, logprob) pairs, most likely first; ties keep their order."""
    return [sorted(top.items(), key=_VALUE, reverse=True) if top else [] for top in tops]


def _numbers(values: Numeric, dtype: type) -> np.ndarray | None:
    """Values of known number types (or None) as an array, in one pass in C; None where that cannot hold them."""
    if isinstance(values, np.ndarray):  # packed already (packed.py), every value present
        return values
    try:
        return np.fromiter(values, dtype, len(values))
    except (TypeError, OverflowError):
        return None


def _types_ok(fields: Fields) -> bool:
    """Ids integers (not booleans), tokens strings, logprobs numbers; each may be absent."""
    return (
        set(map(type, fields.ids)) <= _INTS
        and set(map(type, fields.tokens)) <= _STRS
        and set(map(type, fields.logprobs)) <= _NUMBERS
    )


def _field(entries: list[dict[str, Any]], key: str) -> list[Any]:
    """entry.get(key) of every entry (dict.get mapped in C: the entries are known to be plain dicts)."""
    return list(map(dict.get, entries, repeat(key)))


def _present(values: list[Any]) -> list[Any]:
    return [v for v in values if v is not None]


def _ids_ok(ids: Numeric, array: np.ndarray | None, limit: int) -> bool:
    """Token ids in [0, limit), or absent (`array`: the same ids, when none is absent)."""
    if isinstance(ids, np.ndarray):
        array = ids
    elif array is None:
        if ids.count(None) == len(ids):  # no ids at all (the legacy lists): counted in C
            return True
        values = _present(ids)
        return min(values, default=0) >= 0 and max(values, default=0) < limit
    return not len(array) or (int(array.min()) >= 0 and int(array.max()) < limit)


def _spelling(tokens: list[Any]) -> str | None:
    """The token strings joined, or None when some is absent (the strings are known to be str or None)."""
    try:
        return "".join(tokens)
    except TypeError:
        return None


def _unnamed(ids: Numeric, spelt: str | None) -> np.ndarray | None:
    """-1 for every token when no id is given and no token string renders one (`id_array`'s answer, made once)."""
    if isinstance(ids, np.ndarray) or spelt is None or ids.count(None) != len(ids) or TOKEN_ID_PREFIX in spelt:
        return None
    return np.full(len(ids), -1, np.int64)


def _tokens_ok(tokens: list[Any], limit: int, spelt: str | None) -> bool:
    """A "token_id:N" rendering must name an id below the limit (`spelt`: `_spelling(tokens)`)."""
    joined = spelt if spelt is not None else "".join(_present(tokens))
    if TOKEN_ID_PREFIX not in joined:
        return True
    for token in _present(tokens):
        if token.startswith(TOKEN_ID_PREFIX):
            suffix = token[len(TOKEN_ID_PREFIX) :]
            if not suffix.isdigit() or int(suffix) >= limit:
                return False
    return True


def _logprobs_ok(logprobs: Numeric, array: np.ndarray | None) -> bool:
    """Finite and <= LOGPROB_SLACK, or absent (`array`: the same numbers, NaN where absent; None where one is
    an integer too large for a float, which is not finite)."""
    if array is None:
        return False
    finite = np.isfinite(array)
    if finite.all():
        return not len(array) or float(array.max()) <= LOGPROB_SLACK
    absent = 0 if isinstance(logprobs, np.ndarray) else logprobs.count(None)
    if int(np.count_nonzero(~finite)) != absent:  # NaN or infinite beyond the absent ones
        return False
    return not finite.any() or float(array[finite].max()) <= LOGPROB_SLACK


def id_array(values: Numeric, tokens: list[Any]) -> np.ndarray:
    """Token ids; where an entry had none, vLLM's "token_id:N" rendering of the token, else -1."""
    if isinstance(values, np.ndarray):
        return values.astype(np.int64, copy=False)
    if values.count(None) == len(values):  # no ids at all (the legacy columns)
        if _no_rendered_ids(tokens):
            return np.full(len(values), -1, np.int64)
    else:
        try:
            return np.array(values, np.int64)
        except (TypeError, ValueError):
            pass
    return np.array([v if type(v) is int else _id_from_token(t) for v, t in zip(values, tokens)], np.int64)


def _no_rendered_ids(tokens: list[Any]) -> bool:
    """Whether no token is a "token_id:N" rendering (each a string)."""
    try:
        return TOKEN_ID_PREFIX not in "".join(tokens)
    except TypeError:  # some are not strings
        return False


def _id_from_token(token: Any) -> int:
    if isinstance(token, str) and token.startswith(TOKEN_ID_PREFIX):
        try:
            return int(token[len(TOKEN_ID_PREFIX) :])
        except ValueError:
            return -1
    return -1


def logprob_array(values: list[Any]) -> np.ndarray:
    """float32 logprobs, None as NaN, -inf (impossible tokens) clipped so arrays stay finite."""
    return _float32(_float64(values))


def _float64(values: Numeric) -> np.ndarray:
    return np.array(values, np.float64)  # None as NaN


def _float32(values: np.ndarray) -> np.ndarray:
    return np.maximum(values, -1e30).astype(np.float32)  # NaN stays NaN: maximum propagates it


_ZERO, _OPEN = ord("0"), ord("[")
_LIST_BYTES = b"0123456789,[] \t\n\r\0"
"""What lists of integers joined by NUL may be spelled with: digits, commas, brackets, whitespace."""


def byte_lists_ok(joined: bytes) -> bool:
    """Whether each NUL-separated JSON value (msgspec has checked its syntax; none: True) is null or a list of byte values.

    All are checked together, in numpy: only digits, commas, brackets and whitespace; each value
    one list with no list inside; no number of four digits or more, and none of three above 255
    (only the numbers of three digits are read).  False may also mean an unusual spelling (whitespace
    before a list): the caller then reads the body generically, which names any fault.
    """
    if b"l" in joined:  # null: fine, and left out (an empty list passes the checks below as it is)
        joined = b"\0".join(v for v in joined.split(b"\0") if v != b"null")
    if not joined:
        return True
    if joined.translate(None, _LIST_BYTES):
        return False
    codes = np.frombuffer(joined, np.uint8)  # counted in numpy: a pass of bytes.count each costs far more
    nul, opens = codes == 0, codes == _OPEN
    values = int(np.count_nonzero(nul)) + 1  # a "[" opens each value, and no other:
    if codes[0] != _OPEN or np.count_nonzero(opens) != values or np.count_nonzero(nul[:-1] & opens[1:]) != values - 1:
        return False
    value = codes - _ZERO  # a digit's value; unsigned: what lies below "0" wraps above
    digit = value < 10
    at = np.flatnonzero(digit[:-2] & digit[1:-1] & digit[2:])  # where a run of three digits starts
    if not at.size:
        return True
    if (np.diff(at) == 1).any():  # two runs of three in a row: a number of four digits or more
        return False
    number = value[at].astype(np.int16) * 100 + value[at + 1] * 10 + value[at + 2]
    return not (number > 255).any()
