"""Appending results to a run database in small group commits."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from evalsuite.errors import StoreError
from evalsuite.records import SampleResult
from evalsuite.store.codec import RESULT_COLUMNS, result_to_row
from evalsuite.store.database import connect

GROUP_WINDOW_S = 0.05  # a result waits at most this long before it is committed


class RunWriter:
    """Appends results in small transactions: each result is on disk within GROUP_WINDOW_S of `put`.

    Inserting is cheap; committing is what costs, so results that finish
    close together share one commit.  `put` commits at once when the last
    commit is older than the window, and otherwise (given an event loop)
    schedules one for when the window ends, so a lone result never waits for
    the next.  Everything runs on the caller's thread.
    """

    def __init__(self, db_path: Path, loop: asyncio.AbstractEventLoop | None = None):
        self._conn = connect(db_path)
        self._loop = loop
        self._timer: asyncio.TimerHandle | None = None
        self._last_commit = time.monotonic()
        self._open = False
        self._sql = (
            f"INSERT OR IGNORE INTO results ({', '.join(RESULT_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(RESULT_COLUMNS))})"
        )
        self.committed = 0
        self._pending = 0

    def put(self, result: SampleResult) -> None:
        try:
            if not self._open:
                self._conn.execute("BEGIN IMMEDIATE")
                self._open = True
            self._conn.execute(self._sql, result_to_row(result))
        except sqlite3.Error as exc:
            raise StoreError(f"Could not write result {result.sample_id} to the run store: {exc}") from exc
        self._pending += 1
        if time.monotonic() - self._last_commit >= GROUP_WINDOW_S:
            self.flush()
        elif self._timer is None and self._loop is not None:
            self._timer = self._loop.call_later(GROUP_WINDOW_S, self.flush)

    def flush(self) -> None:
        """Commit what was put so far."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._open:
            self._conn.execute("COMMIT")
            self._open = False
            self.committed += self._pending
            self._pending = 0
        self._last_commit = time.monotonic()

    def close(self) -> None:
        self.flush()
        self._conn.close()
