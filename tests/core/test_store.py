"""The run store round-trips records exactly and loads lean when asked."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from evalsuite.engines.parse import trace_from_entries
from evalsuite.records import Completion, Grade, Sample, SampleResult
from evalsuite.store import RunStore, open_run


def _entries(ids: list[int | None]) -> list[dict]:
    out = []
    for i, tid in enumerate(ids):
        entry = {
            "token": f"t{i}é",
            "bytes": list(f"t{i}é".encode()),
            "logprob": -0.1 * i,
            "top_logprobs": [{"token": f"t{i}é", "logprob": -0.1 * i}, {"token": "alt", "logprob": -3.0}],
        }
        if tid is not None:
            entry["id"] = tid
            entry["top_logprobs"][0]["id"] = tid
            entry["top_logprobs"][1]["id"] = 7
        out.append(entry)
    return out


def _store(tmp_path: Path) -> RunStore:
    store = RunStore.create(tmp_path / "run", {"fingerprint": "f" * 64, "task": "t", "target": "x"})
    store.write_samples([Sample("a", "t", ({"role": "user", "content": "q"},), {"answer": [1, 2]}, {"s": "1"})])
    writer = store.writer()
    with_ids = Completion(
        "t0ét1é", "stop", trace_from_entries(_entries([5, 6])), {"completion_tokens": 2}, {"draft_n": 3.0}, 0.5, 0.1
    )
    no_ids = Completion("t0é", "length", trace_from_entries(_entries([None])))
    text_only = Completion("plain", "stop")
    for sid, c in (("a", with_ids), ("b", no_ids), ("c", text_only)):
        writer.put(SampleResult(sid, "t", {"s": sid}, c, attempts=2, finished_at=1.0))
    writer.close()
    return store


def test_round_trip_is_exact(tmp_path: Path) -> None:
    _store(tmp_path)
    store = open_run(tmp_path / "run")
    results = store.results()
    a = results["a"].completion
    assert a.text == "t0ét1é" and a.finish_reason == "stop" and a.usage == {"completion_tokens": 2}
    assert a.timings == {"draft_n": 3.0} and (a.latency_s, a.ttft_s) == (0.5, 0.1)
    assert a.tokens.ids.tolist() == [5, 6] and a.tokens.pieces == ["t0é", "t1é"]
    assert a.tokens.raw == ["t0é".encode(), "t1é".encode()]
    assert a.tokens.top_ids.tolist() == [[5, 7], [6, 7]] and a.tokens.top_pieces[1] == ["t1é", "alt"]
    assert np.allclose(a.tokens.top_logprobs[:, 1], -3.0)
    assert results["b"].completion.token_level == "strings"
    assert results["c"].completion.tokens is None and results["c"].attempts == 2
    assert store.samples()["a"].reference == {"answer": [1, 2]}


def test_lean_loading_keeps_strings_only_where_they_are_the_tokens(tmp_path: Path) -> None:
    store = _store(tmp_path)
    lean = store.results(strings="none")
    assert lean["a"].completion.tokens.pieces == [] and len(lean["a"].completion.tokens) == 2
    assert lean["b"].completion.tokens.pieces == ["t0é"]  # no ids: the strings are needed to diff
    pieces = store.results(strings="pieces", ids=["a"])
    assert list(pieces) == ["a"] and pieces["a"].completion.tokens.pieces == ["t0é", "t1é"]
    assert pieces["a"].completion.tokens.top_pieces == []


def test_grades_replace_and_frame(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.write_grades([Grade("a", "correct", "1", "equal")], "g", "1")
    store.write_grades([Grade("a", "incorrect", "2", "differs"), Grade("b", "ungraded", None, "timeout")], "g", "2")
    assert {k: g.status for k, g in store.grades().items()} == {"a": "incorrect", "b": "ungraded"}
    assert store.grader_identity() == ("g", "2")
    frame = store.frame().set_index("sample_id")
    assert frame.loc["a", "grade"] == "incorrect" and bool(frame.loc["b", "truncated"])
    assert frame.loc["a", "timing.draft_n"] == 3.0


def test_a_folder_of_another_run_is_refused(tmp_path: Path) -> None:
    import pytest

    from evalsuite.errors import StoreError

    _store(tmp_path)
    with pytest.raises(StoreError, match="holds run"):
        RunStore.create(tmp_path / "run", {"fingerprint": "0" * 64, "task": "t", "target": "x"})
    with pytest.raises(StoreError, match="not a run folder"):
        open_run(tmp_path)


def test_a_creation_cut_short_reopens_and_a_foreign_database_is_refused_untouched(tmp_path: Path) -> None:
    import json
    import sqlite3

    import pytest

    from evalsuite.errors import StoreError

    folder = tmp_path / "cut"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"fingerprint": "f" * 64, "task": "t", "target": "x"}))
    with sqlite3.connect(folder / "records.sqlite") as conn:  # tables made, killed before the version was set
        conn.execute(
            "CREATE TABLE samples (sample_id TEXT PRIMARY KEY, task TEXT, messages TEXT, reference TEXT, "
            "strata TEXT, metadata TEXT)"
        )
    assert len(open_run(folder)) == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({"fingerprint": "e" * 64, "task": "t", "target": "x"}))
    with sqlite3.connect(other / "records.sqlite") as conn:
        conn.execute("CREATE TABLE photos (id INTEGER)")
    before = (other / "records.sqlite").read_bytes()
    with pytest.raises(StoreError, match=r"holds other tables \(photos\); it is not a run database"):
        open_run(other)
    assert (other / "records.sqlite").read_bytes() == before
