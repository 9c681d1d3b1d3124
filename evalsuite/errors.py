"""Errors a user can act on.  Their messages are sentences meant to be printed as-is."""

from __future__ import annotations

import contextlib
import errno
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError


class EvalsuiteError(Exception):
    """Base of every error the CLI prints without a traceback."""

    exit_code = 2


class ConfigError(EvalsuiteError):
    """A config file, task spec or command-line value is wrong."""


class DatasetError(EvalsuiteError):
    """A dataset is missing or a row is malformed."""


class EndpointError(EvalsuiteError):
    """The endpoint refused a request in a way retrying cannot fix (4xx, bad model...)."""

    exit_code = 3


class StoreError(EvalsuiteError):
    """A run folder is unreadable or belongs to something else."""


class NotComparableError(EvalsuiteError):
    """Two runs differ in something that changes outputs, so diffing them is meaningless."""


class HostError(EvalsuiteError):
    """This machine cannot do what was asked (a full disk, a folder evalsuite may not write, a read-only
    filesystem): nothing is wrong with the input or the endpoint, and the same command works once it is fixed."""

    exit_code = 4


class RunBusyError(EvalsuiteError):
    """Another process is writing the same run folder; a second writer would ask the endpoint for the same samples."""

    exit_code = 5


_FULL = ("the disk is full", "free some space")
_QUOTA = ("the disk quota is used up", "free some space or raise the quota")
_READ_ONLY = ("the filesystem is read-only", "point runs_dir or reports_dir in the config at a writable folder")
_DENIED = ("permission denied", "make it writable for this user, or point runs_dir or reports_dir elsewhere")
HOST_ERRNOS = {
    errno.ENOSPC: _FULL,
    errno.EDQUOT: _QUOTA,
    errno.EROFS: _READ_ONLY,
    errno.EACCES: _DENIED,
    errno.EPERM: _DENIED,
    errno.EFBIG: ("the file is larger than this system allows (ulimit -f)", "raise the limit"),
}
# SQLite's primary result codes for the same conditions (sqlite_errorcode & 0xff of its exceptions)
_SQLITE_HOST = {
    3: _DENIED,  # SQLITE_PERM
    8: ("the database may not be written (a read-only file, folder or filesystem)", _READ_ONLY[1]),  # SQLITE_READONLY
    10: ("a disk I/O error", "check the disk (full, failing or unmounted)"),  # SQLITE_IOERR
    13: _FULL,  # SQLITE_FULL
    14: ("the database cannot be opened (a folder that may not be written, or no space)", _DENIED[1]),  # CANTOPEN
}


def host_cause(exc: BaseException) -> tuple[str, str] | None:
    """(why, what to do) when `exc` is the machine's fault (disk full, permissions, read-only), else None."""
    if isinstance(exc, OSError) and exc.errno in HOST_ERRNOS:
        return HOST_ERRNOS[exc.errno]
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.Error) and isinstance(code, int) and code & 0xFF in _SQLITE_HOST:
        return _SQLITE_HOST[code & 0xFF]
    return None


def host_error(path: str | Path, exc: BaseException, what: str = "write") -> HostError | None:
    """A HostError naming `path` when `exc` is the machine's fault, else None (the caller keeps its own error)."""
    cause = host_cause(exc)
    if cause is None:
        return None
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return HostError(f"Could not {what} {path}: {cause[0]} ({detail}); {cause[1]}.")


@contextlib.contextmanager
def writing(path: str | Path, what: str = "write") -> Iterator[None]:
    """Turn a full disk, a folder that may not be written or a read-only filesystem into a HostError naming `path`.

    For the places evalsuite writes (run folders, reports); other failures propagate unchanged.
    """
    try:
        yield
    except EvalsuiteError:
        raise
    except (OSError, sqlite3.Error) as exc:
        error = host_error(path, exc, what)
        if error is None:
            raise
        raise error from exc


def format_validation_error(exc: ValidationError, source: str) -> str:
    """Turn pydantic's report into lines naming the file, the key, the value and what was expected."""
    lines = [f"{source} has {exc.error_count()} problem(s):"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"  - {key}: unknown key (check the spelling).")
            continue
        if err["type"] == "missing":
            lines.append(f"  - {key}: required but missing.")
            continue
        if err["type"] == "value_error" and not err["loc"]:
            lines.append(f"  - {err['msg'].removeprefix('Value error, ')}.")  # a whole-file check names its keys
            continue
        value = err.get("input")
        lines.append(f"  - {key} = {value!r}: {err['msg']}.")
    return "\n".join(lines)


def describe_read_error(path: str | Path, exc: BaseException) -> str:
    """One sentence saying why a user file could not be read, naming the file."""
    if isinstance(exc, IsADirectoryError) or (isinstance(exc, OSError) and Path(path).is_dir()):
        return f"{path} is a folder, not a file."
    if isinstance(exc, FileNotFoundError):
        return f"{path} does not exist."
    if isinstance(exc, PermissionError):
        return f"{path} cannot be read (permission denied)."
    if isinstance(exc, UnicodeDecodeError):
        return (
            f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start} "
            "cannot be decoded); save it as UTF-8."
        )
    if isinstance(exc, OSError):
        return f"{path} cannot be read ({exc.strerror or exc})."
    return f"{path} cannot be read ({type(exc).__name__}: {exc})."


@contextlib.contextmanager
def reading(path: str | Path, error: type[EvalsuiteError] = ConfigError) -> Iterator[None]:
    """Turn the ways reading a user's file fails (missing, a folder, not UTF-8...) into `error` naming it.

    One mechanism for every file a user hands in, so an unforeseen failure
    is still a sentence with exit 2, never a traceback.
    """
    try:
        yield
    except EvalsuiteError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise error(describe_read_error(path, exc)) from None
