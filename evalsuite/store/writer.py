"""Appending results to a run database in small group commits."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from evalsuite.errors import EvalsuiteError, StoreError, host_error
from evalsuite.records import SampleResult
from evalsuite.store.codec import RESULT_COLUMNS, result_to_row, result_to_rows
from evalsuite.store.database import STORE_LAYOUT, connect
from evalsuite.store.tokens import token_columns

GROUP_WINDOW_S = 0.05  # a result waits at most this long before it is committed


class RunWriter:
    """Appends results in small transactions: each result is on disk within GROUP_WINDOW_S of `put`.

    Committing is what costs, so results that finish close together share one
    commit.  `put` only queues a result's row; it commits at once when the
    last commit is older than the window, and otherwise (given an event loop)
    schedules a commit for when the window ends, so a lone result never waits
    for the next.  Rows are inserted at commit time, together: one batch runs
    with SQLite warm in the CPU caches, where one insert between two responses
    ran about twice as slow.  Rows, not results, wait: a row is a few bytes
    objects, where a result's token trace is dozens of lists that would keep
    the garbage collector busy while they wait.  A result that
    cannot be stored is a StoreError naming it, raised once every other result
    of its batch is committed (by the next `put` or `close` when a timer
    committed it; the result being put is kept).  Everything runs on the caller's thread.
    """

    def __init__(self, db_path: Path, loop: asyncio.AbstractEventLoop | None = None, *, layout: int = STORE_LAYOUT):
        self._path = db_path
        self._conn = connect(db_path)
        self._loop = loop
        self._layout = layout
        self._tokens_sql = f"INSERT OR IGNORE INTO tokens VALUES ({', '.join('?' * (1 + len(token_columns(layout))))})"
        self._timer: asyncio.TimerHandle | None = None
        self._last_commit = time.monotonic()
        self._sql = (
            f"INSERT OR IGNORE INTO results ({', '.join(RESULT_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(RESULT_COLUMNS))})"
        )
        self.committed = 0
        self._queued: list[tuple[tuple[Any, ...], tuple[Any, ...] | None]] = []  # rows: results are freed at once
        self._failure: EvalsuiteError | None = None  # from a commit a timer ran: raised by the next put or close

    def put(self, result: SampleResult) -> None:
        rows = result_to_rows(result, self._layout) if self._layout >= 2 else (result_to_row(result), None)
        self._queued.append(rows)  # kept even when an earlier failure is raised: `close` stores it
        self._raise_failure()
        if time.monotonic() - self._last_commit >= GROUP_WINDOW_S:
            self.flush()
        elif self._timer is None and self._loop is not None:
            self._timer = self._loop.call_later(GROUP_WINDOW_S, self._flush_later)

    def flush(self) -> None:
        """Commit what was put so far; a result that could not be stored is a StoreError after the others are."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._queued = self._queued, []
        self._last_commit = time.monotonic()
        if not batch:
            return
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self._queued = batch + self._queued  # nothing was written: kept for the next commit
            raise self._error(exc, f"Could not write {len(batch)} results to the run store: {exc}") from exc
        failure: EvalsuiteError | None = None
        stored = 0
        for row, tokens in batch:
            try:
                self._insert(row, tokens)
                stored += 1
            except (sqlite3.Error, ValueError) as exc:  # ValueError: text SQLite cannot hold
                failure = failure or self._error(exc, f"Could not write result {row[0]} to the run store: {exc}")
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise self._error(exc, f"Could not commit {len(batch)} results to the run store: {exc}") from exc
        self.committed += stored
        if failure is not None:
            raise failure

    def _insert(self, row: tuple[Any, ...], tokens: tuple[Any, ...] | None) -> None:
        """One result's rows: both or neither (layouts 2 and 3 store its tokens apart)."""
        if tokens is None:
            self._conn.execute(self._sql, row)
            return
        self._conn.execute("SAVEPOINT result")
        try:
            self._conn.execute(self._sql, row)
            self._conn.execute(self._tokens_sql, tokens)
        except BaseException:
            self._conn.execute("ROLLBACK TO result")
            raise
        finally:
            self._conn.execute("RELEASE result")

    def _error(self, exc: Exception, message: str) -> EvalsuiteError:
        """A full disk or an unwritable database is the machine's fault (HostError, exit 4), anything else the
        store's (StoreError)."""
        return host_error(self._path, exc) or StoreError(message)

    def _rollback(self) -> None:
        """End a transaction whose commit failed (a full disk), so the connection is usable again and closes."""
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _flush_later(self) -> None:
        self._timer = None
        try:
            self.flush()
        except EvalsuiteError as exc:  # nobody awaits a timer: the next put or close reports it
            self._failure = self._failure or exc

    def _raise_failure(self) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def close(self) -> None:
        try:
            self.flush()
            self._raise_failure()
        finally:
            self._conn.close()
