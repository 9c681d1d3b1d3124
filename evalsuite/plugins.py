"""Plugins by name: engines, graders and dataset adapters, found through entry-point groups.

One mechanism for every extension point, so an outside package adds an
engine, a grader or a task adapter the same way evalsuite registers its own,
in its `pyproject.toml`:

    [project.entry-points."evalsuite.engines"]
    myserver = "mypackage.engine:MyServerEngine"

After editing that file the package must be reinstalled (`pip install -e .`):
entry points live in the installed metadata, not in the source tree.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

ENGINES = "evalsuite.engines"
GRADERS = "evalsuite.graders"
TASK_ADAPTERS = "evalsuite.task_adapters"


class PluginError(LookupError):
    """A plugin name that is not registered, or a registered plugin that does not load."""


def _entries(group: str) -> dict[str, EntryPoint]:
    """The group's entry points by name; the first installed distribution wins a duplicate name.

    Scanning the installed metadata costs milliseconds and speed figures ask
    once per request, so one scan finds every group's and is kept per import
    path (a changed `sys.path` scans again).
    """
    return _group(group, tuple(sys.path))


@lru_cache(maxsize=16)
def _group(group: str, path: tuple[str, ...]) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in _scan(path).select(group=group):
        found.setdefault(ep.name, ep)
    return found


@lru_cache(maxsize=4)
def _scan(path: tuple[str, ...]) -> Any:
    """Every group's entry points, from one pass over the installed metadata (not one per group)."""
    return entry_points()


def registered(group: str) -> dict[str, str]:
    """Plugin names of one group and the objects they point at, from every installed package."""
    return {name: ep.value for name, ep in sorted(_entries(group).items())}


def names(group: str) -> list[str]:
    """The sorted plugin names of one group (nothing is imported)."""
    return sorted(_entries(group))


def is_registered(group: str, name: str) -> bool:
    return name in _entries(group)


def load(group: str, name: str, kind: str) -> Any:
    """The object registered as `name` in `group`; PluginError (a sentence naming the known ones) otherwise.

    `kind` is what a user calls the plugin ("engine", "grader"), for the message.
    """
    entries = _entries(group)
    entry = entries.get(name)
    if entry is None:
        known = ", ".join(sorted(entries)) or "none"
        raise PluginError(
            f"Unknown {kind} '{name}'. Known {kind}s: {known} (the {group} entry-point group). A package adds "
            "one in its pyproject.toml; after editing that file, reinstall it (pip install -e .)."
        )
    key = (group, name, entry.value)
    if key not in _loaded:  # speed figures look engines up once per stored request
        try:
            _loaded[key] = entry.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must be a sentence, not a traceback
            raise PluginError(
                f"The {kind} '{name}' ({entry.value}) cannot be loaded: {type(exc).__name__}: {exc}."
            ) from None
    return _loaded[key]


_loaded: dict[tuple[str, str, str], Any] = {}
