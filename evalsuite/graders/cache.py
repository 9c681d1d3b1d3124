"""The grade cache: each distinct (grader, grader version, reference, answer) is graded once.

One SQLite file, `grade-cache.sqlite` in the runs folder (next to the
`<target>/<task>/<id>` run folders), shared by every run under it: the arms
of a comparison (baseline, repeat, control, candidate) and every re-grade.
A grade is stored under the SHA-256 of its key, the JSON of

- the grader's identity: its spec (name, extraction steps, options) and the
  `version` it reports, so a grader change or another option never reuses a
  grade;
- what the grader reads of the item: `grader.grading_key(item)` when the
  grader defines it (the code grader: the reference with its tests and the
  extracted program), else the sample without its id and the answer text.

Only final grades (`correct`, `incorrect`) are stored: an `ungraded` outcome
(a sandbox failure, a busy machine, a timeout) is graded again next time.
The first grade stored for a key is the one every later reader gets, even
when two processes grade the same key at once, so identical answers get the
identical grade by construction.  WAL mode and one transaction per write
keep the file whole across crashes and concurrent writers; the cache is
derived data, so a cache that cannot be opened or written only costs the
saving, never a grade.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsuite.folders import folder_name
from evalsuite.records import Grade
from evalsuite.serialize import to_jsonable

CACHE_FILE = "grade-cache.sqlite"
FINAL = frozenset({"correct", "incorrect"})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS grades (
    key TEXT PRIMARY KEY, grader TEXT NOT NULL, version TEXT NOT NULL,
    status TEXT NOT NULL, extracted TEXT, reason TEXT NOT NULL, score REAL NOT NULL, details TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS gradings (
    folder TEXT PRIMARY KEY, grader TEXT NOT NULL, version TEXT NOT NULL,
    items INTEGER NOT NULL, graded INTEGER NOT NULL, reused INTEGER NOT NULL, at REAL NOT NULL
);
"""


def cache_path(folder: Path, target: str, task: str) -> Path | None:
    """Where the cache of a run folder lives: the runs folder above `<target>/<task>/<id>`, else None."""
    folder = folder.resolve()
    if folder.parent.name != task or folder.parent.parent.name not in (target, folder_name(target)):
        return None
    return folder.parents[2] / CACHE_FILE


def grade_key(identity: Any, item_key: Any) -> str:
    """The cache key: SHA-256 of the canonical JSON of the grader's identity and what it reads of the item."""
    text = json.dumps([to_jsonable(identity), to_jsonable(item_key)], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class GradingCount:
    """How one run's latest grading went: items, gradings actually run, grades reused from the cache."""

    items: int
    graded: int
    reused: int

    @property
    def saved(self) -> int:
        """Gradings not run: grades reused from the cache, and repeats of a key within the run."""
        return self.items - self.graded


class GradeCache:
    """Final grades by key in one SQLite file (see the module doc); safe to share between processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.failure: str | None = None
        self._conn = sqlite3.connect(path, timeout=60.0, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)

    def get(self, keys: Iterable[str]) -> dict[str, Grade]:
        """The stored grades among `keys` (with an empty sample id: the caller's sample owns each)."""
        try:
            return self._get(keys)
        except sqlite3.Error as exc:
            self.failure = f"{self.path}: {exc}"
            return {}

    def _get(self, keys: Iterable[str]) -> dict[str, Grade]:
        found: dict[str, Grade] = {}
        wanted = list(dict.fromkeys(keys))
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = self._conn.execute(
                "SELECT key, status, extracted, reason, score, details FROM grades "
                f"WHERE key IN ({', '.join('?' * len(chunk))})",
                chunk,
            )
            for key, status, extracted, reason, score, details in rows:
                found[key] = Grade("", status, extracted, reason, score, json.loads(details))
        return found

    def put(self, grades: Mapping[str, Grade], grader: str, version: str) -> None:
        """Store the final grades among `grades`; a key already stored keeps its first grade."""
        rows = [
            (
                key,
                grader,
                version,
                g.status,
                g.extracted,
                g.reason,
                float(g.score),
                json.dumps(to_jsonable(g.details), ensure_ascii=False),
                time.time(),
            )
            for key, g in grades.items()
            if g.status in FINAL
        ]
        if rows:
            self._write("INSERT OR IGNORE INTO grades VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def record(self, folder: Path, grader: str, version: str, count: GradingCount) -> None:
        """Note how a run's latest grading went, for the report's count of gradings saved."""
        row = (str(folder.resolve()), grader, version, count.items, count.graded, count.reused, time.time())
        self._write("INSERT OR REPLACE INTO gradings VALUES (?, ?, ?, ?, ?, ?, ?)", [row])

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """One transaction; a failure (a full disk, a lock held too long) loses the saving, not the grades."""
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            self.failure = f"{self.path}: {exc}"

    def counts(self, folders: Sequence[Path]) -> dict[Path, GradingCount]:
        """The latest grading's count of each folder the cache has seen."""
        out: dict[Path, GradingCount] = {}
        try:
            for folder in folders:
                row = self._conn.execute(
                    "SELECT items, graded, reused FROM gradings WHERE folder = ?", (str(folder.resolve()),)
                ).fetchone()
                if row is not None:
                    out[folder] = GradingCount(*row)
        except sqlite3.Error as exc:
            self.failure = f"{self.path}: {exc}"
        return out

    def close(self) -> None:
        self._conn.close()


def open_cache(path: Path | None) -> GradeCache | None:
    """The cache at `path`, or None when there is none or it cannot be opened (grading goes on without it)."""
    if path is None:
        return None
    try:
        return GradeCache(path)
    except (sqlite3.Error, OSError):
        return None


def saved_across(runs: Sequence[tuple[Path, str, str]]) -> GradingCount | None:
    """The latest gradings of runs given as (folder, target, task), summed; None when the cache knows none.

    Runs under different runs folders are looked up in each one's cache.
    """
    by_cache: dict[Path, list[Path]] = {}
    for folder, target, task in runs:
        path = cache_path(folder, target, task)
        if path is not None and path.exists():
            by_cache.setdefault(path, []).append(folder)
    found: list[GradingCount] = []
    for path, folders in by_cache.items():
        cache = open_cache(path)
        if cache is not None:
            try:
                found += cache.counts(folders).values()
            finally:
                cache.close()
    if not found:
        return None
    return GradingCount(*(sum(values) for values in zip(*((c.items, c.graded, c.reused) for c in found))))


def saved_sentence(runs: Sequence[tuple[Path, str, str]]) -> str:
    """The report's line on the gradings the cache saved across runs given as (folder, target, task); "" if none."""
    count = saved_across(runs)
    if count is None or not count.items:
        return ""
    return (
        f"Grading: {count.items} answers across the arms, {count.graded} gradings run; the other {count.saved} "
        f"reused the grade of an identical answer (the grade cache, {CACHE_FILE} in the runs folder)."
    )
