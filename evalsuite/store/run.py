"""A run on disk: `manifest.json` (what produced it) + `records.sqlite` (what it produced).

SQLite in WAL mode: a committed sample survives `kill -9`, and a
half-written one never appears.  Results that finish within 50 ms of each
other share one commit (synchronous=NORMAL: after a power cut, not a process
crash, the last commits may be lost and are simply asked again).
"""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from evalsuite.errors import StoreError, describe_read_error
from evalsuite.records import Grade, Sample, SampleResult
from evalsuite.store.codec import (
    GRADE_COLUMNS,
    RESULT_COLUMNS,
    Strings,
    add_missing_columns,
    grade_to_row,
    result_to_row,
    row_to_grade,
    row_to_result,
    row_to_sample,
    sample_to_row,
)

STORE_SCHEMA = 1
GROUP_WINDOW_S = 0.05  # a result waits at most this long before it is committed
MANIFEST = "manifest.json"
DATABASE = "records.sqlite"

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS results (
    sample_id TEXT PRIMARY KEY, task TEXT, strata TEXT, finished_at REAL, attempts INTEGER, text TEXT,
    finish_reason TEXT, usage TEXT, timings TEXT, latency_s REAL, ttft_s REAL, engine_extra TEXT,
    n_tokens INTEGER, top_k INTEGER, ids BLOB, logprobs BLOB, top_ids BLOB, top_logprobs BLOB,
    pieces TEXT, top_pieces TEXT, raw BLOB, raw_lens BLOB, reasoning TEXT, answer TEXT, reasoning_cut INTEGER
);
CREATE TABLE IF NOT EXISTS grades (
    sample_id TEXT PRIMARY KEY, status TEXT, extracted TEXT, reason TEXT, score REAL, details TEXT,
    grader TEXT, grader_version TEXT
);
CREATE TABLE IF NOT EXISTS samples (
    sample_id TEXT PRIMARY KEY, task TEXT, messages TEXT, reference TEXT, strata TEXT, metadata TEXT
);
CREATE TABLE IF NOT EXISTS sessions (
    started_at REAL, ended_at REAL, requested INTEGER, recorded INTEGER, outcome TEXT, info TEXT
);
PRAGMA user_version = {STORE_SCHEMA};
"""


REQUIRED_KEYS = ("fingerprint", "target", "task")  # what listing, grading and reports need; comparing checks more
_F = TypeVar("_F", bound=Callable[..., Any])
# a damaged file, or a row whose JSON or token arrays no longer decode (a torn or edited record)
_DAMAGE = (sqlite3.DatabaseError, ValueError, TypeError, KeyError)


def _unreadable(folder: Path, exc: Exception) -> StoreError:
    return StoreError(
        f"{folder / DATABASE} is damaged or not a run database ({exc}); it was left as it is. Move the run "
        f"folder {folder} aside and re-run the same command to generate it again."
    )


def _guarded(method: _F) -> _F:
    """A corrupt or truncated database becomes a StoreError naming the file; nothing is deleted or rewritten."""

    @functools.wraps(method)
    def wrapper(self: RunStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except _DAMAGE as exc:
            raise _unreadable(self.folder, exc) from None

    return wrapper  # type: ignore[return-value]


def _inspect(database: Path) -> None:
    """Read-only look at an existing database: refuse another schema version or someone else's tables.

    Done before the store's own connection switches the journal mode, so a
    database that is refused is left byte-for-byte as it was.
    """
    try:
        conn = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except (
        sqlite3.OperationalError
    ):  # cannot look read-only (busy, a WAL without its index): the store's own open decides
        return
    if version not in (0, STORE_SCHEMA):
        raise StoreError(
            f"{database.parent} was written by store schema {version}; this evalsuite reads {STORE_SCHEMA}."
        )
    foreign = tables - {"results", "grades", "samples", "sessions"}
    if version == 0 and foreign:  # (ours without the version: a creation cut short, completed by the schema script)
        raise StoreError(
            f"{database} holds other tables ({', '.join(sorted(foreign))}); it is not a run database "
            "and was left as it is."
        )


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.row_factory = sqlite3.Row
    add_missing_columns(conn)  # stores written before a column existed read it as NULL
    return conn


class RunStore:
    """One run folder.  Create with `RunStore.create`, reopen with `open_run`."""

    def __init__(self, folder: Path, manifest: dict[str, Any]):
        self.folder = folder
        self.manifest = manifest
        database = folder / DATABASE
        if database.is_dir():
            raise StoreError(f"{database} is a folder, not a run database.")
        try:
            if database.exists() and database.stat().st_size:
                _inspect(database)
            self._conn = _connect(database)
            self._conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise _unreadable(folder, exc) from None

    @classmethod
    def create(cls, folder: Path, manifest: dict[str, Any]) -> RunStore:
        """Open the run folder for this manifest, creating it when new; refuses a folder of another run."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / MANIFEST
        if path.exists():
            existing = open_run(folder).close_and_manifest()
            if existing.get("fingerprint") != manifest.get("fingerprint"):
                raise StoreError(
                    f"{folder} holds run {existing.get('fingerprint')}, not {manifest.get('fingerprint')}."
                )
            return cls(folder, existing)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str), encoding="utf-8")
        tmp.replace(path)
        return cls(folder, manifest)

    @property
    def fingerprint(self) -> str:
        return str(self.manifest["fingerprint"])

    @_guarded
    def write_samples(self, samples: list[Sample]) -> None:
        """Keep the prompts and references with the run, so grading and reports never need the dataset again."""
        with self._transaction():
            self._conn.executemany(
                "INSERT OR IGNORE INTO samples VALUES (?, ?, ?, ?, ?, ?)",
                [sample_to_row(s) for s in samples],
            )

    @_guarded
    def samples(self) -> dict[str, Sample]:
        rows = self._conn.execute("SELECT * FROM samples ORDER BY rowid")
        return {row["sample_id"]: row_to_sample(dict(row)) for row in rows}

    @_guarded
    def done_ids(self) -> set[str]:
        return {r[0] for r in self._conn.execute("SELECT sample_id FROM results")}

    @_guarded
    def __len__(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def iter_results(self, *, strings: Strings = "all", ids: Iterable[str] | None = None) -> Iterator[SampleResult]:
        """Stored results in the order they finished (see `_iter_results`); a damaged database is a StoreError."""
        try:
            yield from self._iter_results(strings=strings, ids=ids)
        except _DAMAGE as exc:
            raise _unreadable(self.folder, exc) from None

    def _iter_results(self, *, strings: Strings = "all", ids: Iterable[str] | None = None) -> Iterator[SampleResult]:
        """Stored results in the order they finished.

        `strings="none"` skips token strings (the bulk of a run's memory) for
        samples that have token ids, "pieces" decodes only the chosen tokens'
        text; `ids` restricts to those samples.
        """
        skip = {"none": ("pieces", "top_pieces", "raw", "raw_lens"), "pieces": ("top_pieces", "raw", "raw_lens")}
        columns = [f"NULL AS {c}" if c in skip.get(strings, ()) else c for c in RESULT_COLUMNS]
        sql = f"SELECT {', '.join(columns)} FROM results"
        if ids is None:
            rows = self._conn.execute(sql + " ORDER BY rowid")
        else:
            wanted = sorted(set(ids))
            self._conn.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (sample_id TEXT PRIMARY KEY)")
            self._conn.execute("DELETE FROM wanted")
            self._conn.executemany("INSERT INTO wanted VALUES (?)", [(i,) for i in wanted])
            rows = self._conn.execute(sql + " WHERE sample_id IN (SELECT sample_id FROM wanted) ORDER BY rowid")
        full = f"SELECT {', '.join(RESULT_COLUMNS)} FROM results WHERE sample_id = ?"
        for row in rows.fetchall():
            record = dict(row)
            if strings != "all" and record["ids"] is not None and -1 in np.frombuffer(record["ids"], "<i4"):
                record = dict(
                    self._conn.execute(full, (record["sample_id"],)).fetchone()
                )  # no ids: strings are the tokens
            yield row_to_result(record, strings=strings)

    @_guarded
    def results(self, *, strings: Strings = "all", ids: Iterable[str] | None = None) -> dict[str, SampleResult]:
        return {r.sample_id: r for r in self.iter_results(strings=strings, ids=ids)}

    @_guarded
    def grades(self) -> dict[str, Grade]:
        rows = self._conn.execute(f"SELECT {', '.join(GRADE_COLUMNS)} FROM grades")
        return {row["sample_id"]: row_to_grade(dict(row)) for row in rows}

    @_guarded
    def grader_identity(self) -> tuple[str, str] | None:
        row = self._conn.execute("SELECT grader, grader_version FROM grades LIMIT 1").fetchone()
        return (row[0], row[1]) if row else None

    @_guarded
    def write_grades(self, grades: list[Grade], grader: str, version: str) -> None:
        """Replace all grades at once: grades are derived data, recomputable from the results."""
        placeholders = ", ".join("?" * len(GRADE_COLUMNS))
        with self._transaction():
            self._conn.execute("DELETE FROM grades")
            self._conn.executemany(
                f"INSERT INTO grades ({', '.join(GRADE_COLUMNS)}) VALUES ({placeholders})",
                [grade_to_row(g, grader, version) for g in grades],
            )

    @_guarded
    def record_session(self, started_at: float, requested: int, recorded: int, outcome: str, info: dict) -> None:
        with self._transaction():
            self._conn.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)",
                (started_at, time.time(), requested, recorded, outcome, json.dumps(info, default=str)),
            )

    @_guarded
    def sessions(self) -> list[dict[str, Any]]:
        rows = self._conn.execute("SELECT * FROM sessions ORDER BY started_at")
        return [{**dict(r), "info": json.loads(r["info"])} for r in rows]

    def writer(self, loop: asyncio.AbstractEventLoop | None = None) -> RunWriter:
        return RunWriter(self.folder / DATABASE, loop)

    def frame(self) -> pd.DataFrame:
        """One row per sample: ids, strata, text, finish reason, token counts, timings and grade."""
        grades = self.grades()
        rows = []
        for r in self.iter_results(strings="none"):
            c = r.completion
            grade = grades.get(r.sample_id)
            rows.append(
                {
                    "sample_id": r.sample_id,
                    "task": r.task,
                    **{f"stratum.{k}": v for k, v in r.strata.items()},
                    "text": c.text,
                    "finish_reason": c.finish_reason,
                    "truncated": c.truncated,
                    "truncated_in_reasoning": c.truncated_in_reasoning,
                    "completion_tokens": c.completion_tokens,
                    "token_level": c.token_level,
                    "latency_s": c.latency_s,
                    "ttft_s": c.ttft_s,
                    **{f"timing.{k}": v for k, v in c.timings.items()},
                    "attempts": r.attempts,
                    "grade": grade.status if grade else None,
                    "extracted": grade.extracted if grade else None,
                }
            )
        return pd.DataFrame(rows)

    def _transaction(self) -> Any:
        conn = self._conn

        class _Tx:
            def __enter__(self) -> None:
                conn.execute("BEGIN IMMEDIATE")

            def __exit__(self, exc_type: Any, *_: Any) -> None:
                conn.execute("ROLLBACK" if exc_type else "COMMIT")

        return _Tx()

    def close(self) -> None:
        self._conn.close()

    def close_and_manifest(self) -> dict[str, Any]:
        """Close the store and return its manifest (for checks that only need the manifest)."""
        self.close()
        return self.manifest


class RunWriter:
    """Appends results in small transactions: each result is on disk within GROUP_WINDOW_S of `put`.

    Inserting is cheap; committing is what costs, so results that finish
    close together share one commit.  `put` commits at once when the last
    commit is older than the window, and otherwise (given an event loop)
    schedules one for when the window ends, so a lone result never waits for
    the next.  Everything runs on the caller's thread.
    """

    def __init__(self, db_path: Path, loop: asyncio.AbstractEventLoop | None = None):
        self._conn = _connect(db_path)
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


def open_run(path: str | Path) -> RunStore:
    """Open an existing run folder (or its manifest.json / records.sqlite) for reading.

    A folder that is not a run, a manifest that is not JSON or lacks the keys
    a run has, and a damaged database are StoreErrors naming the file.
    """
    folder = Path(path)
    if folder.name in (MANIFEST, DATABASE):
        folder = folder.parent
    manifest_path = folder / MANIFEST
    if not folder.is_dir():
        raise StoreError(
            f"{folder} is not a run folder ({'a file' if folder.exists() else 'it does not exist'}). "
            "Runs live under the runs/ folder; `evalsuite runs` lists them."
        )
    if not manifest_path.exists():
        raise StoreError(f"{folder} is not a run folder (no {MANIFEST}). Runs live under the runs/ folder.")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise StoreError(f"{manifest_path} is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(describe_read_error(manifest_path, exc)) from None
    if not isinstance(manifest, dict):
        raise StoreError(f"{manifest_path} must hold a JSON object, not {type(manifest).__name__}.")
    missing = [k for k in REQUIRED_KEYS if k not in manifest]
    if missing:
        raise StoreError(
            f"{manifest_path} lacks the key(s) {', '.join(missing)}; it was not written by "
            "`evalsuite run`, or it was edited."
        )
    wrong = [k for k in REQUIRED_KEYS if not isinstance(manifest[k], str) or not manifest[k]]
    if wrong:
        raise StoreError(
            f"{manifest_path}: {', '.join(f'{k} = {manifest[k]!r}' for k in wrong)} should be a non-empty string."
        )
    return RunStore(folder, manifest)
