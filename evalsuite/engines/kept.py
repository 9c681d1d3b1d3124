"""A stream's body as it was read, kept for a generic reading that is rarely wanted, mostly out of memory.

The typed reader (`typed_stream.py`) keeps a stream's token columns, not its
events.  The body itself is read again only where the typed reading gives
up or its answer is refused (`stream.read_generic`), yet a copy held in
memory for that was about half of what a stream in flight held: some 700
bytes a token with top-5 alternatives.  The first KEEP_IN_MEMORY bytes stay in
memory, so a short answer makes no file; the rest is written to an unnamed
temporary file, which the system removes however the process ends.  Where
no file can be written (no temporary folder, a full disk, a quarter of the
process's open files already held by bodies), the rest stays in memory, as
all of it did before.
"""

from __future__ import annotations

import tempfile
import weakref
from collections.abc import Iterator
from typing import BinaryIO

KEEP_IN_MEMORY = 2 << 20
"""Bytes of a body kept in memory before the rest goes to a file: a 2k-token answer with top-5 alternatives
(about 1.4 MB streamed) makes none."""
READ_BACK = 1 << 16


def files_allowed() -> int:
    """How many bodies may hold a file at once: a quarter of the process's limit on open files, so that
    hundreds of streams in flight never take the room their connections need."""
    try:
        import resource
    except ImportError:  # Windows
        return 128
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 1 << 16 if soft == resource.RLIM_INFINITY else soft // 4


def _close(file: BinaryIO) -> None:
    file.close()
    KeptBody.files_open -= 1


class KeptBody:
    """A body's pieces, appended in the order they came; iterating gives the same bytes, in other pieces
    past the first `in_memory` bytes (default KEEP_IN_MEMORY).  Its file is closed when the body is dropped."""

    files_open = 0
    """Bodies that hold a file now, in this process."""

    def __init__(self, in_memory: int | None = None):
        self._head: list[bytes] = []  # the pieces before any went to the file
        self._room = KEEP_IN_MEMORY if in_memory is None else in_memory
        self._file: BinaryIO | None = None
        self._written = 0
        self._tail: list[bytes] | None = None  # the pieces after a write to the file failed

    def append(self, piece: bytes) -> None:
        if self._tail is not None:
            self._tail.append(piece)
        elif self._file is None and len(piece) <= self._room:
            self._head.append(piece)
            self._room -= len(piece)
        elif self._file is not None or self._open():
            self._write(piece)
        else:
            self._tail = [piece]

    def __iter__(self) -> Iterator[bytes]:
        yield from self._head
        if self._file is not None:
            yield from self._read_back(self._file)
        yield from self._tail or ()

    def _open(self) -> bool:
        if KeptBody.files_open >= files_allowed():
            return False
        try:
            file = tempfile.TemporaryFile("a+b", buffering=0)  # appended to wherever a reading left it
        except OSError:
            return False
        KeptBody.files_open += 1
        weakref.finalize(self, _close, file)
        self._file = file
        return True

    def _write(self, piece: bytes) -> None:
        assert self._file is not None
        view = memoryview(piece)
        try:
            while view:
                wrote = self._file.write(view)
                if not wrote:
                    raise OSError("the file took no bytes")
                self._written += wrote
                view = view[wrote:]
        except OSError:  # a full disk, say: what is left stays in memory
            self._tail = [bytes(view)]

    def _read_back(self, file: BinaryIO) -> Iterator[bytes]:
        at = 0
        while at < self._written:
            file.seek(at)
            block = file.read(min(READ_BACK, self._written - at))
            if not block:
                raise OSError(f"the kept body's file ended at {at} of {self._written} bytes")
            yield block
            at += len(block)
