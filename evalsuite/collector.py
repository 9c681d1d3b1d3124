"""Python's cyclic garbage collector held off around bulk work that makes many short-lived containers.

The collector runs after every 700 new containers (tuples, lists, dicts) and walks every container
made since its last run.  Reading one 2k-token body makes some 2,000 tuples of alternatives, and
storing a trace without ids some 16,000 row tuples: each set off a run every 700, and each run walked
the big columns of the answer being read as well.  Made, used and freed inside `collections_paused`,
such containers are never walked: they were 5-15 % of the client's CPU per token (bench/scale.py).

A full collection walks the whole heap: the modules, the config and the dataset's samples, some 90,000
containers that live as long as the run does.  `heap_frozen` sets them apart for a run (`gc.freeze`),
so that a full collection walks only what the run made: on streamed vLLM lists, whose per-token lists
set collections off, one cost 48-75 ms of a one-second run, and 6-10 ms with the heap frozen.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_freezes = 0  # `heap_frozen` blocks open now, in any thread
_freezing = threading.Lock()


@contextmanager
def collections_paused() -> Iterator[None]:
    """No collector runs inside (nothing may be awaited there); a collector the program turned off stays off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@contextmanager
def heap_frozen() -> Iterator[None]:
    """The containers alive on entry left out of every collection until the outermost exit (see the module).

    Nested or overlapping uses share one freeze; a heap some other code froze is left as it is, neither
    frozen further nor thawed."""
    global _freezes
    with _freezing:
        owner = _freezes > 0 or gc.get_freeze_count() == 0
        if owner:
            if not _freezes:
                gc.freeze()
            _freezes += 1
    try:
        yield
    finally:
        if owner:
            with _freezing:
                _freezes -= 1
                if not _freezes:
                    gc.unfreeze()


def pausing_collections(func: Callable[P, R]) -> Callable[P, R]:
    """`func` run as inside `collections_paused`, for what runs once per network read: a stream read as it
    arrives calls it once per token when the server is slower than the client, where a plain wrapper costs
    about an eighth of the context manager's generator (0.1 against 0.8 us)."""

    @wraps(func)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():
            return func(*args, **kwargs)
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            gc.enable()

    return paused
