"""compare_runs over real run folders written by the run store, opened by path."""

from __future__ import annotations

from pathlib import Path

import pytest
from recording_runs import needs_recordings, recording_run

from evalsuite.compare import compare_runs
from evalsuite.errors import NotComparableError
from evalsuite.records import Grade
from evalsuite.serialize import to_jsonable
from evalsuite.store import RunStore

pytestmark = needs_recordings


def _store(folder: Path, name: str, pass_: int = 0, *, max_tokens: int | None = None) -> Path:
    run = recording_run(name, pass_)
    manifest = to_jsonable(run.manifest)
    if max_tokens is not None:
        manifest["fingerprint_fields"]["params"] = {
            **manifest["fingerprint_fields"]["params"],
            "max_tokens": max_tokens,
        }
    store = RunStore.create(folder, manifest)
    writer = store.writer()
    for result in run.results().values():
        writer.put(result)
    writer.close()
    # Grade by a stand-in rule (first token id parity) so the accuracy path runs on stored grades.
    grades = [
        Grade(sid, "correct" if int(r.completion.tokens.ids[0]) % 2 == 0 else "incorrect", None, "")  # type: ignore[union-attr]
        for sid, r in run.results().items()
    ]
    store.write_grades(grades, "parity", "1")
    store.close()
    return folder


def test_compare_stored_runs_by_path(tmp_path: Path) -> None:
    base = _store(tmp_path / "base", "base_f16")
    spec = _store(tmp_path / "spec", "spec_f16_draftq4")
    ctl = _store(tmp_path / "self", "spec_f16_self")
    cmp = compare_runs(spec, base, controls={"control": ctl}, n_resamples=500)
    assert cmp.token.label == "NUMERICAL-ONLY"
    assert cmp.token.identical == 12
    overall = cmp.overall()[0]
    assert overall.summary.n == 24 and overall.verdict.label == "INCONCLUSIVE"  # 24 items cannot show ±2 points
    # runs are loaded without token strings; divergent samples get their text windows all the same
    in_memory = compare_runs(recording_run("spec_f16_draftq4"), recording_run("base_f16"), n_resamples=500)
    expected = {d.sample_id: d.window for d in in_memory.diffs if not d.identical}
    got = {d.sample_id: d.window for d in cmp.diffs if not d.identical}
    assert got == expected and all("[baseline:" in w and len(w) > 30 for w in got.values())


def test_stored_runs_with_different_max_tokens_are_refused(tmp_path: Path) -> None:
    base = _store(tmp_path / "base", "base_f16")
    spec = _store(tmp_path / "spec", "spec_f16_draftq4", max_tokens=512)
    with pytest.raises(NotComparableError, match="params.max_tokens: baseline 256, candidate 512"):
        compare_runs(spec, base)
