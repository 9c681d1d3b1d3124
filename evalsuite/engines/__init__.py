"""Engine adapters: one small class per server engine behind `Engine.generate`, found by name.

Engines are registered in the `evalsuite.engines` entry-point group
(`evalsuite.plugins`); a target's `engine = "..."` names one.  evalsuite's own
four (openai, llamacpp, vllm, sglang) are registered in its pyproject.toml the
same way an outside package adds a new engine: one module with one `Engine`
subclass, and one entry-point line.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from evalsuite import plugins
from evalsuite.config import TargetConfig
from evalsuite.engines.base import Engine
from evalsuite.engines.speculation import CounterSpeculation, Speculation
from evalsuite.errors import ConfigError
from evalsuite.records import Completion


def engine_names() -> list[str]:
    """The engines every installed package registers, by name (nothing is imported)."""
    return plugins.names(plugins.ENGINES)


def engine_class(name: str) -> type[Engine]:
    """The Engine subclass registered as `name`; ConfigError (naming the known engines) otherwise."""
    try:
        cls = plugins.load(plugins.ENGINES, name, "engine")
    except plugins.PluginError as exc:
        raise ConfigError(str(exc)) from None
    if not (isinstance(cls, type) and issubclass(cls, Engine)):
        raise ConfigError(
            f"The engine '{name}' ({plugins.registered(plugins.ENGINES)[name]}) is not a subclass of "
            "evalsuite.engines.Engine."
        )
    return cls


def make_engine(target: TargetConfig, *, base_url: str | None = None) -> Engine:
    """The adapter for a target's engine (base_url overrides the config, e.g. for rig servers)."""
    engine = engine_class(target.engine)(target, base_url=base_url)
    engine.name = target.engine  # the registered name, whatever the class calls itself
    return engine


def _classes(engine: str | None) -> tuple[type[Engine], ...]:
    """The named engine's class, or every registered one (for records that do not say which engine wrote them)."""
    if engine is not None:
        return (engine_class(engine),)
    return _every_class(tuple(engine_names()))


@lru_cache(maxsize=8)
def _every_class(names: tuple[str, ...]) -> tuple[type[Engine], ...]:
    """The registered classes, loaded once per set of names (speed figures ask once per stored request)."""
    found = []
    for name in names:
        try:
            found.append(engine_class(name))
        except ConfigError:
            continue  # a broken outside plugin cannot read anything; the others still can
    return tuple(found)


def request_speculation(completion: Completion, engine: str | None = None) -> Speculation | None:
    """One request's drafting as its engine reports it (the first engine that reads any, when unnamed)."""
    for cls in _classes(engine):
        found = cls.request_speculation(completion)
        if found is not None:
            return found
    return None


def counter_speculation(
    before: Mapping[str, Any], after: Mapping[str, Any], engine: str | None = None
) -> CounterSpeculation | None:
    """Drafting counted by the server between two `run_stats()` readings, as its engine reads its counters."""
    for cls in _classes(engine):
        found = cls.counter_speculation(before, after)
        if found is not None:
            return found
    return None


__all__ = [
    "CounterSpeculation",
    "Engine",
    "Speculation",
    "counter_speculation",
    "engine_class",
    "engine_names",
    "make_engine",
    "request_speculation",
]
