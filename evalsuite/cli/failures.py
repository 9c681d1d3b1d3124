"""The last line of defence: an input failure no reader foresaw is still a sentence and exit 2, not a traceback.

A write the machine refused that no writer foresaw (a full disk, a read-only
filesystem) is exit 4, as the store's and the reports' own HostErrors are.

Every reader of a user's file turns its own failures into `evalsuite.errors`
exceptions naming the file.  Anything that slips past them (a file that
cannot be read, bytes that are not UTF-8, a damaged SQLite file, JSON or
YAML that does not parse) is mapped here, at the top of the CLI, with the
file named whenever the exception knows it.
"""

from __future__ import annotations

import errno
import json
import sqlite3

import yaml

from evalsuite.errors import HostError, describe_read_error, host_cause

INPUT_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    UnicodeError,
    sqlite3.DatabaseError,
    json.JSONDecodeError,
    yaml.YAMLError,
)


def input_error(exc: BaseException) -> tuple[int, str]:
    """(exit code, sentence) for an input failure; a refused or dropped connection is an endpoint error (3)."""
    if isinstance(exc, ConnectionError):
        return 3, f"the endpoint connection failed ({exc}); finished samples are saved, re-run to resume."
    if _only_on_writes(exc):
        cause = host_cause(exc)
        assert cause is not None
        where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename is not None else ""
        return HostError.exit_code, f"{where}{cause[0]} ({exc}); {cause[1]}, then re-run the same command."
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, PermissionError)) and exc.filename is not None:
        return 2, describe_read_error(exc.filename, exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return 2, f"{where}{exc.strerror or exc} (a file or folder evalsuite needs could not be used)."
    if isinstance(exc, UnicodeDecodeError):
        return 2, f"an input file is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8."
    if isinstance(exc, sqlite3.DatabaseError):
        return 2, f"a run database is damaged or not a run database ({exc}); it was left as it is."
    if isinstance(exc, json.JSONDecodeError):
        return 2, f"an input file is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})."
    return 2, f"an input file could not be read ({type(exc).__name__}: {exc})."


def _only_on_writes(exc: BaseException) -> bool:
    """A full disk, a used-up quota or a read-only filesystem: failures that only writing meets (permission
    denied is left to the readers, since reading a file the user named is input)."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
    return isinstance(exc, sqlite3.Error) and host_cause(exc) is not None
