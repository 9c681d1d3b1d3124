"""Errors a user can act on.  Their messages are sentences meant to be printed as-is."""

from __future__ import annotations

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
        value = err.get("input")
        lines.append(f"  - {key} = {value!r}: {err['msg']}.")
    return "\n".join(lines)
