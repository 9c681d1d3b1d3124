"""Token strings are stored as the JSON the store has always read, whatever text a server sends."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from isal import isal_zlib

from evalsuite.engines.parse import trace_from_entries
from evalsuite.records import Completion, SampleResult, TokenTrace
from evalsuite.store import RunStore, alternatives, open_run, tokens
from evalsuite.store.chosen import ChosenStrings, pack_chosen
from evalsuite.store.codec import _dumps, _dumps_strings
from evalsuite.store.tokens import (
    _HEADER,
    DENSE_IDS,
    NAMED_SHARE,
    TABLE_FROM,
    TABLE_SPAN,
    _named_by_sort,
    _named_by_table,
    _names_by_id,
    _utf8,
    pack_detail,
    pack_strings,
    raw_apart,
    unpack_detail,
    unpack_strings,
    unpack_top_row,
)

ANY_CHAR = st.characters(codec=None, exclude_categories=())  # lone surrogates and control characters included
pieces_lists = st.lists(st.text(ANY_CHAR, max_size=6), max_size=8)


@given(pieces_lists)
def test_pieces_read_back_as_written(pieces: list[str]) -> None:
    text = _dumps_strings(pieces)
    assert json.loads(text) == pieces == json.loads(_dumps(pieces))


@given(st.lists(pieces_lists, max_size=5))
def test_top_pieces_read_back_as_written(top: list[list[str]]) -> None:
    assert json.loads(_dumps_strings(top)) == top


def test_plain_text_is_byte_for_byte_the_older_encoding() -> None:
    pieces = ["a", ' "q"', "\\", "é", "\n\t\x00\x1f\x7f", "\u2028", "🙂", ""]
    assert _dumps_strings(pieces) == _dumps(pieces)
    assert _dumps_strings([pieces, []]) == _dumps([pieces, []])


def test_a_split_character_survives_the_store(tmp_path: Path) -> None:
    lone = "\ud83d"  # half of an emoji, as a byte-level token decoded on its own can arrive
    entries = [
        {"token": lone, "logprob": -0.5, "id": 3, "top_logprobs": [{"token": lone, "logprob": -0.5, "id": 3}]},
        {"token": "ok", "logprob": -0.1, "id": 4, "top_logprobs": [{"token": "ok", "logprob": -0.1, "id": 4}]},
    ]
    store = RunStore.create(tmp_path / "run", {"fingerprint": "f" * 64, "task": "t", "target": "x"})
    writer = store.writer()
    completion = Completion("\ufffdok", "stop", trace_from_entries(entries))
    writer.put(SampleResult("a", "t", {}, completion, attempts=1, finished_at=1.0))
    writer.close()
    tokens = open_run(tmp_path / "run").results()["a"].completion.tokens
    assert tokens is not None
    assert tokens.pieces == [lone, "ok"] and tokens.top_pieces == [[lone], ["ok"]]


def _named(blob: bytes) -> bool:
    """Whether pack_strings stored the top-k strings one name per id (its header's first field)."""
    return bool(_HEADER.unpack_from(zlib.decompress(blob))[0])


def _repeating(top: list[list[tuple[int, str]]]) -> list[dict[str, object]]:
    """Entries whose alternatives are the given (id, string) rows, each token its row's first."""
    return [
        {"token": row[0][1], "logprob": -0.1, "id": row[0][0], "top_logprobs": [
            {"token": name, "logprob": -0.1 - j, "id": i} for j, (i, name) in enumerate(row)
        ]}
        for row in top
    ]  # fmt: skip


def test_top_strings_that_do_not_follow_their_ids_are_stored_as_written() -> None:
    lone = "\ud83d"
    rows = [[(3, "a"), (5, lone), (6, "c")]] * 4
    follows = trace_from_entries(_repeating(rows))
    assert _named(pack_strings(follows))  # 3 ids for 12 alternatives, each id one string: one name an id
    rows = [*rows[:3], [(3, "b"), (5, lone), (6, "c")]]  # id 3 named "a" and "b": kept as rows
    trace = trace_from_entries(_repeating(rows))
    assert trace.top_names() is not None  # full rows, read flat
    blob = pack_strings(trace)
    assert not _named(blob)
    pieces, raw, top = unpack_strings(blob, trace.top_ids)
    assert (
        (pieces, raw, top)
        == (trace.pieces, trace.raw, trace.top_pieces)
        == (["a"] * 3 + ["b"], [None] * 4, [["a", lone, "c"]] * 3 + [["b", lone, "c"]])
    )


def test_top_strings_are_named_by_id_only_where_their_ids_repeat_enough() -> None:
    """One name per distinct id where each stands for NAMED_SHARE alternatives or more; else the rows as they
    are, which were the smaller record there (and cost less to write): both read back as written."""
    vocab = [(i, f" word{i}") for i in range(64)]
    for distinct, named in ((4, True), (24, True), (25, False), (64, False)):
        rows = [[vocab[(3 * t + j) % distinct] for j in range(3)] for t in range(24)]  # 72 alternatives
        trace = trace_from_entries(_repeating(rows))
        assert len(np.unique(trace.top_ids)) == distinct
        blob = pack_strings(trace)
        assert _named(blob) is named == (distinct * NAMED_SHARE <= trace.top_ids.size)
        _reads_back(trace)


_names = st.sampled_from(["a", "b", " the", "\ud83d", "", "],[", "[x"])  # brackets: as JSON rows have them


def _names_reference(ids: list[int], flat: list[str]) -> tuple[list[int], list[str]] | None:
    """What `_names_by_id` answers, spelled out: each id's one string, in id order, where that holds and pays."""
    if any(i < 0 for i in ids):
        return None
    if len(set(ids)) * NAMED_SHARE > len(ids):
        return None
    named: dict[int, str] = {}
    if any(named.setdefault(i, name) != name for i, name in zip(ids, flat, strict=True)):
        return None
    return sorted(named), [named[i] for i in sorted(named)]


_ids = st.sampled_from([0, 1, 7, 300, DENSE_IDS - 1, DENSE_IDS, 2**31 - 1, -1])


@given(st.data())
def test_names_by_id_are_each_ids_one_string_whatever_the_ids(data: st.DataObject) -> None:
    """Both ways of grouping the ids (a table of first places, a sort), and the choice between them, give
    the answer of the rule spelled out: one name per distinct id, in id order, or None."""
    n, k = data.draw(st.integers(1, 8)), data.draw(st.integers(1, 3))
    pool = data.draw(st.lists(_ids, min_size=1, max_size=4, unique=True))  # few ids: they repeat enough to name
    pairs = data.draw(st.lists(st.tuples(st.sampled_from(pool), _names), min_size=n * k, max_size=n * k))
    if data.draw(st.booleans()):  # strings that follow their ids: the usual case, named
        pairs = [(i, f"t{i}") for i, _ in pairs]
    ids, flat = [i for i, _ in pairs], [name for _, name in pairs]
    expected = _names_reference(ids, flat)
    array = np.array(ids, np.int64)
    answers = [_names_by_id(array.reshape(n, k), flat)]
    if min(ids) >= 0:
        answers.append(_named_by_sort(array, flat))
        if max(ids) < DENSE_IDS:
            answers.append(_named_by_table(array, max(ids), flat))
    for got in answers:
        assert (None if got is None else (got[0].tolist(), got[1])) == expected


def test_ids_past_dense_ids_are_sorted_never_tabled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table indexed by ids up to 2^31 would take gigabytes: such ids are sorted however many there are."""

    def no_table(*args: object) -> None:
        raise AssertionError("a table was made")

    monkeypatch.setattr(tokens, "_named_by_table", no_table)
    many = DENSE_IDS // TABLE_SPAN // 2 + 1  # rows of 2: TABLE_SPAN times the alternatives passes DENSE_IDS
    for value, rows in ((DENSE_IDS, many), (2**31 - 1, TABLE_FROM)):
        ids = np.full((rows, 2), value, np.int64)
        got = tokens._names_by_id(ids, ["w"] * ids.size)
        assert got is not None and got[0].tolist() == [value] and got[1] == ["w"]


def test_a_long_answer_with_absent_ids_keeps_its_strings_as_written() -> None:
    """An alternative without an id (-1) names no one string, in an answer long enough for a table too."""
    for absent in (TABLE_FROM, 1):  # all absent, or one among ids that would be named
        ids = np.array([-1] * absent + [t % 4 for t in range(TABLE_FROM - absent)], np.int64).reshape(-1, 1)
        assert _names_by_id(ids, [f"w{i}" for i in ids.reshape(-1).tolist()]) is None  # else named: they follow


def test_large_ids_are_named_as_small_ones_are() -> None:
    """Long answers (grouped by a table) and short ones (sorted), ids past DENSE_IDS (no vocabulary has them, a
    server may send them) among them: named, and read back as written."""
    for base, length in ((0, 8), (0, 400), (DENSE_IDS, 400), (2**31 - 64, 8)):
        rows = [[(base + (t + j) % 4, f" w{(t + j) % 4}") for j in range(3)] for t in range(length)]
        trace = trace_from_entries(_repeating(rows))
        assert _named(pack_strings(trace))
        _reads_back(trace)


@given(st.data())
def test_any_trace_reads_back_as_packed(data: st.DataObject) -> None:
    """Ids absent or present, strings that follow their ids or not, bytes or none: all read back as written."""
    n, k = data.draw(st.integers(0, 5)), data.draw(st.integers(0, 3))
    with_ids, with_bytes = data.draw(st.booleans()), data.draw(st.booleans())

    def entry() -> dict[str, object]:
        e: dict[str, object] = {"token": data.draw(_names), "logprob": -0.5}
        if with_ids:
            e["id"] = data.draw(st.integers(0, 3))
        if with_bytes:
            e["bytes"] = data.draw(st.one_of(st.none(), st.lists(st.integers(0, 255), max_size=3)))
        return e

    entries = [dict(entry(), top_logprobs=[entry() for _ in range(k)]) for _ in range(n)]
    _reads_back(trace_from_entries(entries))


def _reads_back(trace: TokenTrace) -> None:
    """Every string of the trace read back as packed, all at once and one token's alternatives at a time: in
    layout 2's one column, and in layout 3's two (the alternatives' rows one stream, or several of 2 rows)."""
    blob = pack_strings(trace)
    assert unpack_strings(blob, trace.top_ids) == (trace.pieces, trace.raw, trace.top_pieces)
    assert [unpack_top_row(blob, i, trace.top_ids) for i in range(len(trace))] == trace.top_pieces
    chosen = ChosenStrings(pack_chosen(trace.pieces, trace.raw))
    assert (chosen.pieces(), chosen.raw()) == (trace.pieces, trace.raw)
    for rows in (alternatives.ROWS, 2):
        with mock.patch.object(alternatives, "ROWS", rows):
            top = alternatives.pack_top_strings(trace)
        assert alternatives.unpack_top_strings(top, trace.top_ids) == trace.top_pieces
        read_alone = [alternatives.unpack_top_row(top, i, trace.top_ids) for i in range(len(trace) + 1)]
        assert read_alone == [*trace.top_pieces, []]  # past the last row: none


def test_packed_columns_are_zlib_streams_and_stores_zlib_wrote_read_the_same() -> None:
    """The packed columns are written by ISA-L: any zlib reads them, and the blobs stdlib zlib wrote before read
    back as ever."""
    entries = [
        {"token": t, "logprob": -0.5, "id": i, "top_logprobs": [{"token": t, "logprob": -0.5, "id": i}]}
        for i, t in enumerate(["the", " answer", " is", " 42", "\ud83d"] * 40)
    ]
    trace = trace_from_entries(entries)
    strings = pack_strings(trace)
    detail = pack_detail(trace.ids, trace.logprobs, trace.top_ids, trace.top_logprobs)
    for blob in (strings, detail):
        assert zlib.compress(zlib.decompress(blob), 1) != blob  # written by another deflater, read by zlib
    old_strings = zlib.compress(zlib.decompress(strings), 1)
    old_detail = zlib.compress(zlib.decompress(detail), 1)
    expected = (trace.pieces, trace.raw, trace.top_pieces)
    assert unpack_strings(old_strings, trace.top_ids) == unpack_strings(strings, trace.top_ids) == expected
    for got in (
        unpack_detail(old_detail, trace.ids, trace.top_logprobs),
        unpack_detail(detail, trace.ids, trace.top_logprobs),
    ):
        np.testing.assert_array_equal(got[0], trace.top_ids)
        np.testing.assert_array_equal(got[1], trace.logprobs)


def _kept_one_by_one(pieces: list[str], raw: list[bytes | None]) -> tuple[bytes, list[int]]:
    """The kept bytes and their lengths as each token alone says them: -1 no bytes, -2 its piece's UTF-8."""
    kept, lens = [], []
    for piece, chunk in zip(pieces, raw):
        try:
            same = piece.encode("utf-8") == chunk
        except UnicodeEncodeError:
            same = False
        if chunk is None or same:
            lens.append(-1 if chunk is None else -2)
        else:
            kept.append(chunk)
            lens.append(len(chunk))
    return b"".join(kept), lens


@given(st.lists(st.tuples(st.sampled_from(["a", " é", "\ud83d", "", "\ufffd"]), st.integers(0, 3)), min_size=1))
def test_only_the_bytes_a_piece_cannot_say_are_kept_in_order(tokens: list[tuple[str, int]]) -> None:
    """Bytes the same as the piece's UTF-8, other bytes (a split character), none; a lone surrogate or not."""
    pieces = [piece for piece, _ in tokens]
    raw = [[piece.encode("utf-8", "surrogatepass"), b"\xe2\x89", None, b""][form] for piece, form in tokens]
    kept, lens = raw_apart(raw, lambda: _utf8(pieces))
    assert (kept, lens.tolist()) == _kept_one_by_one(pieces, raw)


@pytest.mark.parametrize(
    ("blob", "says"),
    [
        (struct.pack("<3I", 0, 2, 2) + struct.pack("<I", 5), "do not match their header"),
        (struct.pack("<3I", 0, 2, 1) + struct.pack("<I", 5) + b"abc", "streams do not match their header"),
        (struct.pack("<3I", 1, 4, 4) + isal_zlib.compress(b'["a"]'), "names do not match their header"),
    ],
    ids=["header", "streams", "names"],  # not the blobs: a compressor's bytes may differ between processes
)
def test_alternatives_that_do_not_hold_together_are_refused_when_read(blob: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        alternatives.unpack_top_strings(blob, np.zeros((1, 1), np.int64))
