"""Errors a user can act on.  Their messages are sentences meant to be printed as-is."""

from __future__ import annotations

import contextlib
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
