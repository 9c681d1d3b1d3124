"""Checking a task spec's `grader.options` against what a grader accepts.

Options come from YAML, so a typo or a wrong type must be a ConfigError that
names the grader, the key and the value, not a TypeError from a constructor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def check_options(grader: str, options: Mapping[str, Any], accepted: Mapping[str, type | tuple[type, ...]]) -> None:
    """Raise ConfigError for an unknown option or a value of the wrong type."""
    from evalsuite.errors import ConfigError

    for key, value in options.items():
        if key not in accepted:
            known = ", ".join(sorted(accepted)) or "none"
            raise ConfigError(f"Grader '{grader}': unknown option '{key}' (accepted options: {known}).")
        kind = accepted[key]
        if isinstance(value, bool) and kind in (int, float, (int, float)):
            ok = False
        else:
            ok = isinstance(value, kind)
        if not ok:
            names = " or ".join(t.__name__ for t in (kind if isinstance(kind, tuple) else (kind,)))
            raise ConfigError(f"Grader '{grader}': option '{key}' = {value!r} should be a {names}.")
