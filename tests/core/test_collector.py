"""Reading and storing long answers sets off no run of the cyclic collector inside the bulk work.

A stream is paused a network read at a time, between awaits: each event's containers are made and
freed inside the typed reader's `feed` (vLLM's legacy lists: three lists an event)."""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_server import FakeServer, FakeState
from projects import make_project

from evalsuite.collector import collections_paused, heap_frozen, pausing_collections
from evalsuite.config import load_config
from evalsuite.runner import execute, plan_run

BULK = {"decode_body", "Engine.accept_read", "pack_strings", "TypedEvents.feed"}
"""The functions that make thousands of short-lived containers per answer."""


def _collections(work: Callable[[], Any]) -> list[set[str]]:
    """The functions on the stack at each start of a collection while `work` runs."""
    starts: list[set[str]] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            names, frame = set(), sys._getframe(0).f_back
            while frame is not None:
                names.add(frame.f_code.co_qualname)
                frame = frame.f_back
            starts.append(names)

    gc.callbacks.append(watch)
    try:
        work()
    finally:
        gc.callbacks.remove(watch)
    return starts


@pytest.fixture
def long_answers(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    server = FakeServer(FakeState(tokens=2048, legacy=request.param == "lists"))
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("long_answers", "api", "stream"),
    [
        ("entries", "chat", False),
        ("lists", "completions", False),
        ("entries", "chat", True),
        ("lists", "completions", True),
    ],
    indirect=["long_answers"],
)
def test_no_collection_starts_while_a_body_is_decoded_checked_or_packed(
    tmp_path: Path, long_answers: FakeServer, api: str, stream: bool
) -> None:
    extra = f'api = "{api}"\nstream = {str(stream).lower()}'
    config = load_config(make_project(tmp_path, long_answers.base_url, n=4, target_extra=extra))
    plan = plan_run(config, "base", "echo", max_tokens=2048)
    plan.runs_dir = tmp_path / "runs"
    outcome: list[Any] = []
    starts = _collections(lambda: outcome.append(asyncio.run(execute(plan, progress=lambda done, total: None))))
    assert outcome[0].recorded == 4
    assert [names & BULK for names in starts if names & BULK] == []


def test_the_collector_is_paused_inside_and_back_after_an_error() -> None:
    assert gc.isenabled()
    with pytest.raises(KeyError), collections_paused():
        assert not gc.isenabled()
        raise KeyError("x")
    assert gc.isenabled()


def test_a_collector_the_program_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with collections_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_function_wrapped_runs_paused_and_leaves_the_collector_as_it_found_it() -> None:
    seen: list[bool] = []

    @pausing_collections
    def work(fail: bool) -> str:
        seen.append(gc.isenabled())
        if fail:
            raise KeyError("x")
        return "done"

    assert work(False) == "done" and gc.isenabled()
    with pytest.raises(KeyError):
        work(True)
    assert gc.isenabled()
    gc.disable()
    try:
        assert work(False) == "done" and not gc.isenabled()
    finally:
        gc.enable()
    assert seen == [False, False, False]


class _Node:
    """A container that can sit in a reference cycle."""

    def __init__(self) -> None:
        self.other: Any = None


def _cycle() -> weakref.ref[_Node]:
    """A reference cycle, unreachable once made (only a collection frees it), and a way to see whether it lives."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_frozen_heap_keeps_what_lived_before_out_of_collections_until_the_outermost_exit() -> None:
    assert gc.get_freeze_count() == 0
    gc.disable()  # no automatic collection between the garbage made and the freeze: only the test's own
    try:
        before = _cycle()  # garbage from before the block: frozen with the rest, not collected inside it
        with heap_frozen():
            frozen = gc.get_freeze_count()
            assert frozen > 1000  # the modules and everything else alive
            inside = _cycle()
            gc.collect()
            assert before() is not None and inside() is None
            with heap_frozen():
                assert gc.get_freeze_count() == frozen  # nested: the one freeze, not a second
            assert gc.get_freeze_count() == frozen  # the inner exit thaws nothing
        assert gc.get_freeze_count() == 0
        gc.collect()
        assert before() is None  # thawed, and collected
    finally:
        gc.enable()


def test_a_frozen_heap_thaws_after_an_error_and_leaves_another_owners_freeze_alone() -> None:
    with pytest.raises(KeyError), heap_frozen():
        raise KeyError("x")
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with heap_frozen():
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen  # not thawed: the freeze was someone else's
    finally:
        gc.unfreeze()


def test_a_run_freezes_the_heap_it_starts_with_and_thaws_it_at_the_end(tmp_path: Path) -> None:
    server = FakeServer(FakeState(tokens=16))
    server.start()
    try:
        config = load_config(make_project(tmp_path, server.base_url, n=2))
        plan = plan_run(config, "base", "echo", max_tokens=16)
        plan.runs_dir = tmp_path / "runs"
        seen: list[int] = []
        asyncio.run(execute(plan, progress=lambda done, total: seen.append(gc.get_freeze_count())))
    finally:
        server.stop()
    assert seen and min(seen) > 1000
    assert gc.get_freeze_count() == 0
