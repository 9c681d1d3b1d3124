"""Store layouts 2 (packed token columns) and 3 (the chosen tokens' strings apart) read back exactly what
layout 1 did, and runs of every older layout still read, compare and resume in their own layout.

A layout-1 store is made here the way every run before layout 2 was: a
manifest without `store_layout` (schema 2), whose database is then created and
written in layout 1 (`codec.result_to_row`, the layout-1 row, unchanged).  A
layout-2 store is made as the evalsuite of that time made new runs: in the
layout it created runs in.
`tests/core/fixtures/runs_v1` holds runs written by the code of that time
(`test_manifest.py` compares them).
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from evalsuite.compare import compare_runs
from evalsuite.errors import StoreError
from evalsuite.records import Completion, Grade, SampleResult, TokenTrace
from evalsuite.store import MemoryRun, RunStore, open_run
from evalsuite.store.database import STORE_LAYOUT
from evalsuite.store.lean import StoredTrace

TORN = (("detail", "long"), ("strings", "no-ids"), ("top_logprobs", "long"))
FIELDS = {"task": "t", "prompt_template": "p", "params": {}, "dataset": {}, "server": {"model": "m"}}
V2_MANIFEST_KEYS = ("fingerprint", "target", "task", "fingerprint_fields")


def _trace(ids: list[int], *, seed: int, k: int = 3, draft: bool = False) -> TokenTrace:
    """A trace with the edges a store must keep: missing ids, an accepted draft token (no alternatives), a chosen
    token that is not the top one, a split character, bytes that are not the piece's."""
    rng = np.random.default_rng(seed)
    n = len(ids)
    top_lp = np.sort(-rng.exponential(2.0, (n, k)).astype(np.float32), axis=1)[:, ::-1].copy()
    top_ids = np.empty((n, 0), np.int64)
    if k:
        top_ids = np.concatenate([np.array(ids, np.int64)[:, None], rng.integers(0, 50_000, (n, k - 1))], axis=1)
    logprobs = top_lp[:, 0].copy() if k else np.zeros(n, np.float32)
    pieces = [f" w{t}" for t in ids]
    raw: list[bytes | None] = [p.encode() for p in pieces]
    top_pieces = [[f" w{t}" for t in row] for row in top_ids.tolist()]
    if n > 3:
        logprobs[1] = top_lp[1, -1] if k else -1.0  # sampled, not the top token
        pieces[2], raw[2] = "\ud83d", b"\xf0\x9f"  # half an emoji
        raw[3] = None
    if draft and n > 4:
        top_lp[4] = np.nan
        top_ids[4] = -1
        top_pieces[4] = [""] * k
        logprobs[4] = 0.0
    return TokenTrace(np.array(ids, np.int64), pieces, raw, logprobs, top_ids, top_lp, top_pieces)


def _results(shift: int = 0) -> dict[str, SampleResult]:
    traces = {
        "long": _trace(list(range(100, 160)), seed=1, draft=True),
        "short": _trace([5, 6, 7, 8, 9, 10], seed=2),
        "no-top": _trace([1, 2, 3, 4, 5], seed=3, k=0),
        "empty": _trace([], seed=4),
        "no-ids": _trace([-1, -1, 3, 4, 5], seed=5),
    }
    named = _trace([11, 12, 13, 14, 15, 16], seed=6)  # alternatives named without ids, as vLLM gives them
    named.top_ids[:, 1:] = -1
    named.top_pieces = [[p, f"alt{i}", f"other{i}"] for i, p in enumerate(named.pieces)]
    ragged = _trace([21, 22, 23, 24, 25], seed=7)  # fewer alternatives than k at one position
    ragged.top_pieces[1] = ragged.top_pieces[1][:2]
    traces |= {"named": named, "ragged": ragged}
    if shift:  # a candidate diverging in two samples: one with ids, one without (to the baseline's runner-up)
        ids = traces["long"].ids.copy()
        ids[30 + shift :] = 7
        traces["long"] = _trace(ids.tolist(), seed=1, draft=True)
        traces["no-ids"] = _trace([-1, -1, 3, int(traces["no-ids"].top_ids[3, 1]), 5], seed=5)
    out = {
        sid: SampleResult(sid, "t", {"level": "1"}, Completion(f"text of {sid}", "stop", t, {}, {"x": 1.0}, 0.5))
        for sid, t in traces.items()
    }
    out["text"] = SampleResult("text", "t", {}, Completion("plain text", "length"))
    return out


def _write(folder: Path, results: dict[str, SampleResult], *, layout: int, name: str) -> None:
    manifest = {"fingerprint": name, "target": name, "task": "t", "fingerprint_fields": {**FIELDS, "target": name}}
    if layout == 1:  # a run before layout 2: manifest schema 2, so its database is made in layout 1
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 2}))
        store = open_run(folder, write=True)
    else:
        with mock.patch("evalsuite.store.run.STORE_LAYOUT", layout):  # the layout new runs were created in
            store = RunStore.create(folder, manifest)
    writer = store.writer()
    for result in results.values():
        writer.put(result)
    writer.close()
    store.write_grades([Grade(sid, "correct", "1", "r") for sid in results], "g", "1")
    store.close()


def _same_trace(a: TokenTrace | None, b: TokenTrace | None) -> None:
    assert (a is None) == (b is None)
    if a is None or b is None:
        return
    assert a.ids.dtype == b.ids.dtype and np.array_equal(a.ids, b.ids)
    for name in ("logprobs", "top_logprobs"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()  # bit for bit, NaN included
    assert a.top_ids.dtype == b.top_ids.dtype and np.array_equal(a.top_ids, b.top_ids)
    assert (a.pieces, a.raw, a.top_pieces) == (b.pieces, b.raw, b.top_pieces)


@pytest.fixture
def layouts(tmp_path: Path) -> dict[int, Path]:
    folders = {layout: tmp_path / f"layout{layout}" for layout in (1, 2, 3)}
    for layout, folder in folders.items():
        _write(folder, _results(), layout=layout, name=f"run{layout}")
    return folders


def test_each_layout_is_recorded_in_its_manifest_and_its_database(layouts: dict[int, Path]) -> None:
    assert STORE_LAYOUT == 3
    for layout, folder in layouts.items():
        store = open_run(folder)
        assert store.manifest.store_layout == store.layout == layout
        store.close()
        conn = sqlite3.connect(folder / "records.sqlite")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert conn.execute("PRAGMA user_version").fetchone()[0] == layout and ("tokens" in tables) == (layout >= 2)
        columns = [r[1] for r in conn.execute("PRAGMA table_info(tokens)")]
        assert ("top_strings" in columns) == (layout == 3)
        conn.close()
    assert "store_layout" not in json.loads((layouts[1] / "manifest.json").read_text())  # never rewritten


@pytest.mark.parametrize("layout", [2, 3])
@pytest.mark.parametrize("strings", ["all", "tokens", "pieces", "none"])
def test_later_layouts_read_back_exactly_what_layout_1_does(
    layouts: dict[int, Path], strings: str, layout: int
) -> None:
    old, new = open_run(layouts[1]), open_run(layouts[layout])
    a, b = old.results(strings=strings), new.results(strings=strings)  # type: ignore[arg-type]
    assert list(a) == list(b) == list(_results())
    for sid in a:
        _same_trace(a[sid].completion.tokens, b[sid].completion.tokens)
        assert a[sid].completion.text == b[sid].completion.text
        one = new.result(sid, strings=strings)  # type: ignore[arg-type]
        assert one is not None
        _same_trace(one.completion.tokens, b[sid].completion.tokens)
    if strings == "all":
        for sid, written in _results().items():
            _same_trace(b[sid].completion.tokens, written.completion.tokens)
    assert new.result("absent") is None and old.result("absent") is None
    assert new.result_ids() == old.result_ids() == list(_results())
    old.close()
    new.close()


@pytest.mark.parametrize("layout", [2, 3])
def test_a_lean_read_reads_the_rest_of_a_trace_only_when_used(layouts: dict[int, Path], layout: int) -> None:
    store = open_run(layouts[layout])
    read: list[str] = []
    column = store._column
    store._column = lambda sid, name: read.append(name) or column(sid, name)  # type: ignore[method-assign]
    lean = store.result("long", strings="none")
    assert lean is not None and isinstance(lean.completion.tokens, StoredTrace)
    trace = lean.completion.tokens
    assert len(trace) == 60 and trace.has_ids and read == []
    assert math.isnan(trace.top_logprobs[4, 0]) and read == ["top_logprobs"]  # the resolution's column alone
    assert trace.top_ids[4, 0] == -1 and trace.logprobs[4] == 0.0 and read == ["top_logprobs", "detail"]
    assert trace.pieces == [] and trace.top_pieces == [] and trace.raw == []
    spelt = trace.with_strings()  # a divergence's window: the strings column, nothing read twice
    assert read == ["top_logprobs", "detail", "strings"] and trace.pieces == []
    assert spelt.pieces == _results()["long"].completion.tokens.pieces and spelt.top_ids[4, 0] == -1
    assert spelt.top_pieces == [] and spelt.raw == [] and read == ["top_logprobs", "detail", "strings"]
    read.clear()
    no_ids = store.result("no-ids", strings="none")  # without ids the strings are the tokens: those read
    assert no_ids is not None and isinstance(no_ids.completion.tokens, StoredTrace) and read == ["strings"]
    written, lean_no_ids = _results()["no-ids"].completion.tokens, no_ids.completion.tokens
    assert (lean_no_ids.pieces, lean_no_ids.raw) == (written.pieces, written.raw)
    assert lean_no_ids.top_pieces == [] and read == ["strings"]  # the alternatives' strings: only where asked for
    assert np.array_equal(lean_no_ids.top_ids, written.top_ids) and sorted(read) == [
        "detail",
        "strings",
        "top_logprobs",
    ]
    late = store.result("short", strings="none")
    store.close()
    assert late is not None and late.completion.tokens is not None
    with pytest.raises(StoreError, match="read after .* was closed"):
        assert late.completion.tokens.top_logprobs is None


def test_one_tokens_alternatives_read_alone_are_those_of_the_whole_read(layouts: dict[int, Path]) -> None:
    """What a report's viewer reads of a divergence: one token's top-k strings, over either layout and in
    memory, with and without ids, ragged, named without ids."""
    manifest = {"fingerprint": "m", "target": "m", "task": "t", "fingerprint_fields": {**FIELDS, "target": "m"}}
    for reader in (*(open_run(folder) for folder in layouts.values()), MemoryRun(manifest, _results())):
        for sid, written in _results().items():
            trace, lean = written.completion.tokens, reader.result(sid, strings="pieces")
            if trace is None:
                continue
            assert lean is not None and lean.completion.tokens is not None
            rows = [reader.top_names(sid, i, lean.completion.tokens.top_ids) for i in range(len(trace))]
            assert rows == trace.top_pieces, sid


def test_comparisons_are_identical_over_either_layout_and_in_memory(tmp_path: Path) -> None:
    docs = []
    for layout in (1, 2, 3):
        root = tmp_path / f"layout{layout}"
        _write(root / "base", _results(), layout=layout, name="base")
        _write(root / "cand", _results(shift=1), layout=layout, name="cand")
        _write(root / "self", _results(shift=2), layout=layout, name="self")
        cmp = compare_runs(root / "cand", root / "base", controls={"control": root / "self"}, n_resamples=200)
        docs.append(json.loads(cmp.to_json()))
    memory = {
        name: MemoryRun(
            {"fingerprint": name, "target": name, "task": "t", "fingerprint_fields": {**FIELDS, "target": name}},
            results,
            {sid: Grade(sid, "correct", "1", "r") for sid in results},
        )
        for name, results in (("base", _results()), ("cand", _results(shift=1)), ("self", _results(shift=2)))
    }
    in_memory = compare_runs(memory["cand"], memory["base"], controls={"control": memory["self"]}, n_resamples=200)
    assert docs[0] == docs[1] == docs[2] == json.loads(in_memory.to_json())
    assert docs[0]["divergences"] and docs[0]["divergences"][0]["window"]  # the window's strings were read
    by_name = [d for d in docs[0]["divergences"] if d["sample_id"] == "no-ids"]
    assert [(d["level"], d["first_divergence"], d["candidate_rank"]) for d in by_name] == [("strings", 3, 2)]


@pytest.mark.parametrize("layout", [1, 2])
def test_a_resumed_run_of_an_older_layout_appends_in_its_layout(tmp_path: Path, layout: int) -> None:
    results = _results()
    first = dict(list(results.items())[:2])
    _write(tmp_path / "run", first, layout=layout, name="run")
    manifest = open_run(tmp_path / "run").close_and_manifest()
    store = RunStore.create(tmp_path / "run", manifest)  # `evalsuite run` resuming the folder
    writer = store.writer()
    for sid, result in results.items():
        if sid not in first:
            writer.put(result)
    writer.close()
    store.close()
    store = open_run(tmp_path / "run")
    assert store.layout == layout and store.result_ids() == list(results)
    for sid, result in store.results().items():
        _same_trace(result.completion.tokens, results[sid].completion.tokens)
    store.close()


def test_a_newer_layout_and_a_manifest_that_disagrees_with_its_database_are_refused(layouts: dict[int, Path]) -> None:
    conn = sqlite3.connect(layouts[3] / "records.sqlite")
    conn.execute("PRAGMA user_version = 4")
    conn.close()
    with pytest.raises(StoreError, match="store layout 4 by a newer evalsuite"):
        open_run(layouts[3])
    manifest = json.loads((layouts[1] / "manifest.json").read_text())
    (layouts[1] / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 3, "store_layout": 2}))
    with pytest.raises(StoreError, match="is in store layout 1, but .* says 2"):
        open_run(layouts[1])


@pytest.mark.parametrize(
    ("layout", "column", "sample"),
    [
        *((layout, column, sample) for layout in (2, 3) for column, sample in TORN),
        (3, "top_strings", "no-ids"),  # read at the divergence, to rank the candidate's token by name
    ],
)
@pytest.mark.parametrize("torn_to_null", [False, True])
def test_a_torn_tokens_column_is_the_stores_damage_when_a_comparison_reads_it(
    tmp_path: Path, layout: int, column: str, sample: str, torn_to_null: bool
) -> None:
    """A column cut short or emptied (a torn write, an edit) is read only when a lean trace uses it, deep in a
    comparison: it is still a StoreError naming the file and the sample, not a decoder's own error."""
    _write(tmp_path / "base", _results(), layout=layout, name="base")
    _write(tmp_path / "cand", _results(shift=1), layout=layout, name="cand")
    conn = sqlite3.connect(tmp_path / "base" / "records.sqlite")
    blob = conn.execute(f"SELECT {column} FROM tokens WHERE sample_id = ?", (sample,)).fetchone()[0]
    torn = None if torn_to_null else blob[: len(blob) // 2]
    conn.execute(f"UPDATE tokens SET {column} = ? WHERE sample_id = ?", (torn, sample))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=f"records.sqlite is damaged .*the {column} of sample {sample}"):
        compare_runs(tmp_path / "cand", tmp_path / "base", n_resamples=50)
