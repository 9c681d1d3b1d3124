"""A stream's kept body: the same bytes back, in order, whether they stayed in memory, went to a file, or
could not; and what it holds in memory past its share is not the body."""

from __future__ import annotations

import gc
import tempfile
import tracemalloc
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from evalsuite.engines import kept
from evalsuite.engines.kept import KeptBody

PIECES = st.lists(st.binary(max_size=300), max_size=40)


@given(pieces=PIECES, in_memory=st.integers(0, 2000), read_between=st.integers(0, 40))
def test_a_kept_body_gives_back_its_bytes_in_order(pieces: list[bytes], in_memory: int, read_between: int) -> None:
    """Whatever share stays in memory, and however often it is read while pieces still come."""
    body = KeptBody(in_memory)
    for i, piece in enumerate(pieces):
        body.append(piece)
        if i == read_between:
            assert b"".join(body) == b"".join(pieces[: i + 1])
    assert [b"".join(body) for _ in range(2)] == [b"".join(pieces)] * 2  # a reading leaves it whole


def test_past_its_share_a_body_is_held_out_of_memory() -> None:
    piece = bytes(range(256)) * 256  # 64 KiB, as a network read brings
    tracemalloc.start()
    try:
        body = KeptBody(1 << 20)
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(160):  # 10 MiB, each piece dropped once appended
            body.append(bytes(piece))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 2 << 20
    assert sum(map(len, body)) == 160 * len(piece)


def test_a_short_body_makes_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Any] = []
    monkeypatch.setattr(tempfile, "TemporaryFile", lambda *a, **k: opened.append(1))
    body = KeptBody()
    body.append(b"x" * kept.KEEP_IN_MEMORY)
    assert not opened and b"".join(body) == b"x" * kept.KEEP_IN_MEMORY


def test_its_file_is_closed_when_the_body_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []
    real = tempfile.TemporaryFile

    def record(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "TemporaryFile", record)
    body = KeptBody(10)
    body.append(b"a" * 100)
    assert len(made) == 1 and not made[0].closed
    del body
    gc.collect()
    assert made[0].closed


class _FullDisk:
    """A file that takes `room` bytes, then fails as a full disk does."""

    def __init__(self, room: int):
        self.room = room
        self.data = bytearray()
        self.at = 0
        self.closed = False

    def write(self, view: memoryview) -> int:
        if not self.room:
            raise OSError(28, "No space left on device")
        took = min(self.room, len(view))
        self.data += view[:took]
        self.room -= took
        return took

    def seek(self, at: int) -> None:
        self.at = at

    def read(self, n: int) -> bytes:
        out = bytes(self.data[self.at : self.at + n])
        self.at += len(out)
        return out

    def close(self) -> None:
        self.closed = True


@given(pieces=PIECES, room=st.integers(0, 3000))
@example(pieces=[b"a" * 30, b"b" * 30, b"c" * 30], room=10)  # the disk fills up inside the second piece
def test_a_file_that_fills_up_keeps_the_rest_in_memory(pieces: list[bytes], room: int) -> None:
    body = KeptBody(50)
    original = tempfile.TemporaryFile
    tempfile.TemporaryFile = lambda *a, **k: _FullDisk(room)  # type: ignore[assignment]
    try:
        for piece in pieces:
            body.append(piece)
    finally:
        tempfile.TemporaryFile = original
    assert b"".join(body) == b"".join(pieces)


def test_no_temporary_folder_keeps_it_all_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise FileNotFoundError(2, "No usable temporary directory found")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    body = KeptBody(10)
    pieces = [b"first piece", b"second", b"", b"third"]
    for piece in pieces:
        body.append(piece)
    assert list(body) == pieces


def test_bodies_hold_at_most_their_share_of_the_open_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past it a body keeps the rest in memory, so that streams in flight leave their connections room."""
    held = KeptBody.files_open
    monkeypatch.setattr(kept, "files_allowed", lambda: held + 1)
    first, second = KeptBody(10), KeptBody(10)
    first.append(b"a" * 100)
    second.append(b"b" * 100)
    assert KeptBody.files_open == held + 1
    assert b"".join(first) == b"a" * 100 and b"".join(second) == b"b" * 100
    del first
    gc.collect()
    assert KeptBody.files_open == held
    third = KeptBody(10)
    third.append(b"c" * 100)
    assert KeptBody.files_open == held + 1 and b"".join(third) == b"c" * 100
    del second, third
    gc.collect()
    assert KeptBody.files_open == held
