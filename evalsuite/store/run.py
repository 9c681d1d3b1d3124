"""A run on disk: `manifest.json` (what produced it) + `records.sqlite` (what it produced).

Results that finish within 50 ms of each other share one commit (see
`store.writer`); the database's schema and damage handling are in
`store.database`, the manifest's in `store.manifest`.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from evalsuite.errors import StoreError, writing
from evalsuite.records import Grade, Sample, SampleResult
from evalsuite.store import alternatives
from evalsuite.store.codec import (
    GRADE_COLUMNS,
    LAYOUT1_TOKEN_COLUMNS,
    RESULT_COLUMNS,
    Strings,
    grade_to_row,
    row_to_grade,
    row_to_result,
    row_to_sample,
    sample_to_row,
)
from evalsuite.store.database import (
    DAMAGE,
    DATABASE,
    STORE_LAYOUT,
    Transaction,
    guarded,
    open_database,
    unreadable,
)
from evalsuite.store.lean import Fetch
from evalsuite.store.lock import WriterLock
from evalsuite.store.manifest import MANIFEST, RunManifest, as_manifest, read_manifest, write_manifest
from evalsuite.store.tokens import token_columns, unpack_top_row
from evalsuite.store.writer import RunWriter

T = TypeVar("T")

if TYPE_CHECKING:
    import pandas as pd


class RunStore:
    """One run folder.  Create (to write) with `RunStore.create`, reopen with `open_run`.

    A store opened to write holds the run folder's writer lock (`writer.lock`, see `store.lock`) until
    `close`, until it is garbage-collected or until its process ends: one process writes a run at a time.
    """

    def __init__(self, folder: Path, manifest: RunManifest | Mapping[str, Any], lock: WriterLock | None = None):
        self.folder = folder
        self.manifest = as_manifest(manifest, str(folder / MANIFEST))
        self._lock = lock
        if lock is not None:
            weakref.finalize(self, lock.release)
        self._conn, self.layout = open_database(folder, self.manifest.store_layout)

    @classmethod
    def create(cls, folder: Path, manifest: RunManifest | Mapping[str, Any]) -> RunStore:
        """Open the run folder for this manifest to write, creating it when new; refuses a folder of another run.

        Another process writing the folder is a RunBusyError naming it; a folder that cannot be made or
        written (full disk, permissions, read-only filesystem) is a HostError naming it.
        """
        manifest = as_manifest(manifest)
        with writing(folder, "create the run folder"):
            folder.mkdir(parents=True, exist_ok=True)
        lock = WriterLock.acquire(folder)
        try:
            path = folder / MANIFEST
            if path.exists():
                existing = open_run(folder).close_and_manifest()
                if existing.fingerprint != manifest.fingerprint:
                    raise StoreError(f"{folder} holds run {existing.fingerprint}, not {manifest.fingerprint}.")
                return cls(folder, existing, lock)
            manifest = manifest.model_copy(update={"store_layout": STORE_LAYOUT})  # a new run: today's layout
            with writing(path):
                write_manifest(path, manifest)
            return cls(folder, manifest, lock)
        except BaseException:
            lock.release()
            raise

    @property
    def writing(self) -> bool:
        """Whether this store holds its folder's writer lock."""
        return self._lock is not None and self._lock.held

    @property
    def fingerprint(self) -> str:
        return self.manifest.fingerprint

    @guarded
    def write_samples(self, samples: list[Sample]) -> None:
        """Keep the prompts and references with the run, so grading and reports never need the dataset again.

        A sample already stored is kept as it is (a resumed run encodes and inserts only new ones).
        """
        stored = {row[0] for row in self._conn.execute("SELECT sample_id FROM samples")}
        new = [s for s in samples if s.id not in stored]
        if not new:
            return
        with Transaction(self._conn):
            self._conn.executemany(
                "INSERT OR IGNORE INTO samples VALUES (?, ?, ?, ?, ?, ?)",
                [sample_to_row(s) for s in new],
            )

    @guarded
    def samples(self) -> dict[str, Sample]:
        rows = self._conn.execute("SELECT * FROM samples ORDER BY rowid")
        return {row["sample_id"]: row_to_sample(dict(row)) for row in rows}

    @guarded
    def done_ids(self) -> set[str]:
        return {r[0] for r in self._conn.execute("SELECT sample_id FROM results")}

    @guarded
    def __len__(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def iter_results(self, *, strings: Strings = "all", ids: Iterable[str] | None = None) -> Iterator[SampleResult]:
        """Stored results in the order they finished (see `_iter_results`); a damaged database is a StoreError."""
        try:
            yield from self._iter_results(strings=strings, ids=ids)
        except DAMAGE as exc:
            raise unreadable(self.folder, exc) from None

    def _iter_results(self, *, strings: Strings = "all", ids: Iterable[str] | None = None) -> Iterator[SampleResult]:
        """Stored results in the order they finished.

        `strings="none"` skips token strings (the bulk of a run's memory) for
        samples that have token ids, "pieces" decodes only the chosen tokens'
        text; `ids` restricts to those samples.
        """
        sql = self._select(strings)
        if ids is None:
            rows = self._conn.execute(sql + " ORDER BY r.rowid")
        else:
            wanted = sorted(set(ids))
            self._conn.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (sample_id TEXT PRIMARY KEY)")
            self._conn.execute("DELETE FROM wanted")
            self._conn.executemany("INSERT INTO wanted VALUES (?)", [(i,) for i in wanted])
            rows = self._conn.execute(sql + " WHERE r.sample_id IN (SELECT sample_id FROM wanted) ORDER BY r.rowid")
        for row in rows.fetchall():
            yield self._decode(dict(row), strings)

    def _select(self, strings: Strings) -> str:
        """The query for results with what `strings` needs (layouts 2 and 3: ids only for "none", the rest on first
        use)."""
        if self.layout >= 2:
            skipped = () if strings == "all" else ("top_strings",)  # layout 3 keeps the alternatives' strings apart
            tokens = (
                "t.ids"
                if strings == "none"
                else ", ".join(f"t.{c}" for c in token_columns(self.layout) if c not in skipped)
            )
            meta = [f"r.{c}" for c in RESULT_COLUMNS if c not in LAYOUT1_TOKEN_COLUMNS]
            return f"SELECT {', '.join(meta)}, {tokens} FROM results r LEFT JOIN tokens t USING (sample_id)"
        skip = {
            "none": ("pieces", "top_pieces", "raw", "raw_lens"),
            "pieces": ("top_pieces", "raw", "raw_lens"),
            "tokens": ("top_pieces",),
        }
        columns = [f"NULL AS {c}" if c in skip.get(strings, ()) else c for c in RESULT_COLUMNS]
        return f"SELECT {', '.join(columns)} FROM results r"

    def _decode(self, record: dict[str, Any], strings: Strings) -> SampleResult:
        """A result from its row; a row without ids everywhere is read again with its tokens' strings and exact
        bytes, which are its tokens (its alternatives' strings only where `strings` asks for them)."""
        sid = record["sample_id"]
        no_ids = record["ids"] is not None and -1 in np.frombuffer(record["ids"], "<i4")
        if no_ids and strings in ("none", "pieces"):
            strings = "tokens"
            if self.layout < 2:
                record = dict(self._conn.execute(self._select("tokens") + " WHERE r.sample_id = ?", (sid,)).fetchone())
        if self.layout >= 2 and record["ids"] is not None:
            return row_to_result(record, self.layout, strings=strings, fetch=self._fetcher(sid, record))
        return row_to_result(record, self.layout, strings=strings)

    def _fetcher(self, sample_id: str, record: dict[str, Any]) -> Fetch:
        """How a lean trace of this sample reads its other columns when first used: from its row where it holds
        them, else from the store; a column that does not decode is a StoreError naming the file."""

        def fetch(column: str, decode: Callable[[bytes], T]) -> T:
            try:
                return decode(record[column] if record.get(column) is not None else self._column(sample_id, column))
            except DAMAGE as exc:  # (a column set to NULL is a TypeError here)
                raise unreadable(self.folder, ValueError(f"the {column} of sample {sample_id}: {exc}")) from None

        return fetch

    def _column(self, sample_id: str, column: str) -> bytes:
        """One `tokens` column of one sample (layouts 2 and 3), for a trace read with its ids only."""
        assert column in token_columns(self.layout)
        try:
            row = self._conn.execute(f"SELECT {column} FROM tokens WHERE sample_id = ?", (sample_id,)).fetchone()
        except sqlite3.ProgrammingError:  # the store was closed: its lean traces can read no more
            raise StoreError(
                f"The tokens of {sample_id} were read after {self.folder} was closed; read them with strings= "
                "'all' or 'pieces', or while the store is open."
            ) from None
        except DAMAGE as exc:
            raise unreadable(self.folder, exc) from None
        if row is None:
            raise StoreError(f"{self.folder / DATABASE}: the tokens of {sample_id} are gone; the file was edited.")
        return bytes(row[0])

    @guarded
    def result_ids(self) -> list[str]:
        """The ids of the stored results, in the order they finished."""
        return [r[0] for r in self._conn.execute("SELECT sample_id FROM results ORDER BY rowid")]

    @guarded
    def result(self, sample_id: str, *, strings: Strings = "all") -> SampleResult | None:
        """One stored result (None when the sample has none): what a comparison reads, one sample at a time."""
        row = self._conn.execute(self._select(strings) + " WHERE r.sample_id = ?", (sample_id,)).fetchone()
        return None if row is None else self._decode(dict(row), strings)

    @guarded
    def top_names(self, sample_id: str, position: int, top_ids: np.ndarray) -> list[str]:
        """One token's top-k strings, read alone (see `RunReader.top_names`): a report shows one row of them."""
        if self.layout >= 2:
            column, unpack = (
                ("top_strings", alternatives.unpack_top_row) if self.layout >= 3 else ("strings", unpack_top_row)
            )
            return self._fetcher(sample_id, {})(column, lambda blob: unpack(blob, position, top_ids))
        row = self._conn.execute("SELECT top_pieces FROM results WHERE sample_id = ?", (sample_id,)).fetchone()
        rows = json.loads(row[0]) if row is not None and row[0] else []
        return list(rows[position]) if position < len(rows) else []

    @guarded
    def results(self, *, strings: Strings = "all", ids: Iterable[str] | None = None) -> dict[str, SampleResult]:
        return {r.sample_id: r for r in self.iter_results(strings=strings, ids=ids)}

    @guarded
    def grades(self) -> dict[str, Grade]:
        rows = self._conn.execute(f"SELECT {', '.join(GRADE_COLUMNS)} FROM grades")
        return {row["sample_id"]: row_to_grade(dict(row)) for row in rows}

    @guarded
    def grader_identity(self) -> tuple[str, str] | None:
        row = self._conn.execute("SELECT grader, grader_version FROM grades LIMIT 1").fetchone()
        return (row[0], row[1]) if row else None

    @guarded
    def write_grades(self, grades: list[Grade], grader: str, version: str) -> None:
        """Replace all grades at once: grades are derived data, recomputable from the results."""
        placeholders = ", ".join("?" * len(GRADE_COLUMNS))
        with Transaction(self._conn):
            self._conn.execute("DELETE FROM grades")
            self._conn.executemany(
                f"INSERT INTO grades ({', '.join(GRADE_COLUMNS)}) VALUES ({placeholders})",
                [grade_to_row(g, grader, version) for g in grades],
            )

    @guarded
    def record_session(self, started_at: float, requested: int, recorded: int, outcome: str, info: dict) -> None:
        with Transaction(self._conn):
            self._conn.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)",
                (started_at, time.time(), requested, recorded, outcome, json.dumps(info, default=str)),
            )

    @guarded
    def sessions(self) -> list[dict[str, Any]]:
        rows = self._conn.execute("SELECT * FROM sessions ORDER BY started_at")
        return [{**dict(r), "info": json.loads(r["info"])} for r in rows]

    def writer(self, loop: asyncio.AbstractEventLoop | None = None) -> RunWriter:
        with writing(self.folder / DATABASE, "open for writing"):
            return RunWriter(self.folder / DATABASE, loop, layout=self.layout)

    def frame(self) -> pd.DataFrame:
        """One row per sample: ids, strata, text, finish reason, token counts, timings and grade."""
        import pandas as pd  # a fifth of a second to import: only the readers of frames pay it

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

    def close(self) -> None:
        self._conn.close()
        if self._lock is not None:
            self._lock.release()

    def close_and_manifest(self) -> RunManifest:
        """Close the store and return its manifest (for checks that only need the manifest)."""
        self.close()
        return self.manifest


def open_run(path: str | Path, *, write: bool = False) -> RunStore:
    """Open an existing run folder (or its manifest.json / records.sqlite) for reading (`write`: and writing).

    A folder that is not a run, a manifest that is not JSON, lacks the keys a
    run has or comes from a newer evalsuite, and a damaged database are
    StoreErrors naming the file.  An older manifest is migrated in memory.
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
    manifest = read_manifest(manifest_path)
    if not write:
        return RunStore(folder, manifest)
    lock = WriterLock.acquire(folder)
    try:
        return RunStore(folder, manifest, lock)
    except BaseException:
        lock.release()
        raise
