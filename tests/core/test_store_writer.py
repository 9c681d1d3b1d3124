"""Writing a run: every result committed within the group window, a bad one named without losing the rest;
samples stored once."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from evalsuite.errors import StoreError
from evalsuite.records import Completion, Sample, SampleResult
from evalsuite.store import RunStore, open_run
from evalsuite.store import run as run_module
from evalsuite.store.writer import GROUP_WINDOW_S

BAD_TEXT = "half an emoji: \ud83d"  # not UTF-8: SQLite cannot hold it


def _store(tmp_path: Path) -> RunStore:
    return RunStore.create(tmp_path / "run", {"fingerprint": "f" * 64, "task": "t", "target": "x"})


def _result(sample_id: str, text: str = "ok") -> SampleResult:
    return SampleResult(sample_id, "t", {}, Completion(text, "stop"), attempts=1, finished_at=1.0)


def _committed(tmp_path: Path) -> set[str]:
    """What another connection sees: committed rows only."""
    conn = sqlite3.connect(tmp_path / "run" / "records.sqlite")
    try:
        return {row[0] for row in conn.execute("SELECT sample_id FROM results")}
    finally:
        conn.close()


def test_a_result_that_cannot_be_stored_is_named_and_the_rest_of_its_batch_is_kept(tmp_path: Path) -> None:
    writer = _store(tmp_path).writer()
    writer.put(_result("a"))  # no event loop and within the window: the three wait for close
    writer.put(_result("bad", BAD_TEXT))
    writer.put(_result("c"))
    with pytest.raises(StoreError, match="result bad"):
        writer.close()
    assert _committed(tmp_path) == {"a", "c"}
    assert set(open_run(tmp_path / "run").results()) == {"a", "c"}


def test_results_are_committed_within_the_window_without_another_put(tmp_path: Path) -> None:
    async def run() -> set[str]:
        writer = _store(tmp_path).writer(asyncio.get_running_loop())
        writer.put(_result("a"))
        writer.put(_result("b"))
        await asyncio.sleep(GROUP_WINDOW_S * 3)
        seen = _committed(tmp_path)
        assert writer.committed == 2
        writer.close()
        return seen

    assert asyncio.run(run()) == {"a", "b"}


def test_a_failure_in_a_timed_commit_is_raised_by_the_next_put_and_nothing_else_is_lost(tmp_path: Path) -> None:
    async def run() -> None:
        writer = _store(tmp_path).writer(asyncio.get_running_loop())
        writer.put(_result("a"))
        writer.put(_result("bad", BAD_TEXT))
        await asyncio.sleep(GROUP_WINDOW_S * 3)  # the timer commits; nobody is there to hear the failure
        assert _committed(tmp_path) == {"a"}
        with pytest.raises(StoreError, match="result bad"):
            writer.put(_result("c"))  # reports the earlier failure, and keeps this result
        writer.close()

    asyncio.run(run())
    assert _committed(tmp_path) == {"a", "c"}


def test_samples_already_stored_are_kept_and_not_encoded_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def sample(sid: str, question: str) -> Sample:
        return Sample(sid, "t", ({"role": "user", "content": question},), {"answer": 1}, {})

    store = _store(tmp_path)
    store.write_samples([sample("a", "first"), sample("b", "first")])
    encoded: list[str] = []
    encode = run_module.sample_to_row
    monkeypatch.setattr(run_module, "sample_to_row", lambda s: encoded.append(s.id) or encode(s))
    store.write_samples([sample("a", "changed"), sample("b", "changed"), sample("c", "new")])
    store.write_samples([sample("a", "again")])
    assert encoded == ["c"]
    stored = open_run(tmp_path / "run").samples()
    assert list(stored) == ["a", "b", "c"]
    assert [s.messages[0]["content"] for s in stored.values()] == ["first", "first", "new"]
