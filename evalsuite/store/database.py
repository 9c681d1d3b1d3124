"""The run database: schema, connection settings, and what a damaged or foreign file becomes.

SQLite in WAL mode: a committed sample survives `kill -9`, and a
half-written one never appears (synchronous=NORMAL: after a power cut, not a
process crash, the last commits may be lost and are simply asked again).

Layouts (`PRAGMA user_version`, recorded in the manifest as `store_layout`):

1. every token column in the `results` row, strings as JSON;
2. token columns in a `tokens` table, raw where every comparison reads them,
   packed where only a divergence does (`store.tokens`): about 40 % of layout
   1's bytes, and reading a sample's ids no longer walks its strings;
3. the chosen tokens' strings apart from their alternatives' (a `top_strings`
   column; `store.chosen`): an output without ids, whose tokens are its
   strings, is read without unpacking the alternatives' strings or making a
   string a token.

A database keeps the layout it was created with (a resumed run appends in it);
new runs are created in `STORE_LAYOUT`.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from isal import isal_zlib

from evalsuite.errors import EvalsuiteError, StoreError, host_error
from evalsuite.store.codec import add_missing_columns
from evalsuite.store.tokens import token_columns

STORE_LAYOUT = 3
LAYOUTS = (1, 2, 3)
DATABASE = "records.sqlite"
TABLES = frozenset({"results", "grades", "samples", "sessions", "tokens"})

SCHEMA = """
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
"""


def tokens_schema(layout: int) -> str:
    """The `tokens` table of `layout` (none in layout 1)."""
    if layout < 2:
        return ""
    columns = ", ".join(f"{c} BLOB" for c in token_columns(layout))
    return f"CREATE TABLE IF NOT EXISTS tokens (sample_id TEXT PRIMARY KEY, {columns});"


PACKED_DAMAGE: type[Exception] = isal_zlib.error  # type: ignore[assignment]  # a zlib stream failing its checks (isal types the class as an instance)
# a damaged file, or a row whose JSON, token arrays or packed columns no longer decode (a torn or edited record)
DAMAGE = (sqlite3.DatabaseError, ValueError, TypeError, KeyError, PACKED_DAMAGE)
_F = TypeVar("_F", bound=Callable[..., Any])


def unreadable(folder: Path, exc: Exception) -> EvalsuiteError:
    """What a failing database operation becomes: a HostError when the machine is at fault (disk full, a
    read-only or unwritable folder), otherwise a StoreError saying the file is damaged."""
    host = host_error(folder / DATABASE, exc)
    if host is not None:
        return host
    return StoreError(
        f"{folder / DATABASE} is damaged or not a run database ({exc}); it was left as it is. Move the run "
        f"folder {folder} aside and re-run the same command to generate it again."
    )


def guarded(method: _F) -> _F:
    """A corrupt or truncated database becomes a StoreError naming the file; nothing is deleted or rewritten.

    A full disk or a database that may not be written is a HostError instead (see `unreadable`).

    For methods of an object with a `folder` attribute (the run folder).
    """

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except DAMAGE as exc:
            raise unreadable(self.folder, exc) from None

    return cast(_F, wrapper)


def inspect(database: Path) -> None:
    """Read-only look at an existing database: refuse an unknown layout or someone else's tables.

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
    except sqlite3.OperationalError:  # cannot look read-only (busy, a WAL without its index): the store's open decides
        return
    if version != 0 and version not in LAYOUTS:
        raise StoreError(
            f"{database.parent} was written with store layout {version} by a newer evalsuite; this evalsuite "
            f"reads layouts {LAYOUTS[0]} to {LAYOUTS[-1]}. Upgrade evalsuite to read it."
        )
    foreign = tables - TABLES
    if version == 0 and foreign:  # (ours without the version: a creation cut short, completed by the schema script)
        raise StoreError(
            f"{database} holds other tables ({', '.join(sorted(foreign))}); it is not a run database "
            "and was left as it is."
        )


def connect(path: Path) -> sqlite3.Connection:
    """A connection in WAL mode with rows as mappings; stores written before a column existed read it as NULL."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.row_factory = sqlite3.Row
    add_missing_columns(conn)
    return conn


def layout_of(conn: sqlite3.Connection) -> int:
    """The database's layout: its user_version; 0 is layout 1's creation cut short, or a database not yet made."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version:
        return version
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return 1 if "results" in tables else 0


def open_database(folder: Path, layout: int = STORE_LAYOUT) -> tuple[sqlite3.Connection, int]:
    """The run folder's database and its layout, created in `layout` when new; a foreign or damaged file is a
    StoreError.  An existing database keeps its own layout, and `layout` (the manifest's) must agree."""
    database = folder / DATABASE
    if database.is_dir():
        raise StoreError(f"{database} is a folder, not a run database.")
    try:
        if database.exists() and database.stat().st_size:
            inspect(database)
        conn = connect(database)
        found = layout_of(conn) or layout
        if found != layout:
            conn.close()
            raise StoreError(
                f"{database} is in store layout {found}, but {folder / 'manifest.json'} says {layout}; "
                "one of them was edited or copied from another run. It was left as it is."
            )
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        needed = TABLES if found >= 2 else TABLES - {"tokens"}
        complete = needed <= tables and conn.execute("PRAGMA user_version").fetchone()[0] == found
        if not complete:  # new, or its creation was cut short
            tokens = tokens_schema(found)
            conn.executescript(f"BEGIN IMMEDIATE; {SCHEMA} {tokens} PRAGMA user_version = {found}; COMMIT;")
    except sqlite3.DatabaseError as exc:
        raise unreadable(folder, exc) from None
    return conn, found


class Transaction:
    """`with Transaction(conn):` one immediate transaction, rolled back when the block raises."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self._conn.execute("ROLLBACK" if exc_type else "COMMIT")
