"""walk_runs: one pass over a comparison's runs, and what it keeps of each sample."""

from __future__ import annotations

from typing import Any

from two_choices import token_entries

from evalsuite.compare import compare_runs
from evalsuite.compare.walk import shell, walk_runs
from evalsuite.engines.parse import trace_from_entries
from evalsuite.records import Completion, Grade, SampleResult
from evalsuite.store import MemoryRun

FIELDS = {"task": "t", "prompt_template": "p", "params": {}, "dataset": {}, "server": {"model": "m"}}


def _completion(ids: list[int], latency: float = 1.0) -> Completion:
    entries = token_entries(ids, -0.05, lambda i: (i + 1, "u", -3.1))
    return Completion(
        text=" ".join(f"t{i}" for i in ids),
        finish_reason="stop",
        tokens=trace_from_entries(entries),
        usage={"completion_tokens": len(ids)},
        latency_s=latency,
        reasoning="r",
        answer="a",
    )


def _run(target: str, samples: dict[str, list[int]], **latency: float) -> MemoryRun:
    results = {
        sid: SampleResult(sid, "t", {"k": sid[-1]}, _completion(ids, latency.get(sid, 1.0)))
        for sid, ids in samples.items()
    }
    grades = {sid: Grade(sid, "correct", "1", "") for sid in samples}
    manifest = {
        "fingerprint": f"fp-{target}",
        "target": target,
        "task": "t",
        "fingerprint_fields": {**FIELDS, "target": target},
    }
    return MemoryRun(manifest, results, grades)


def test_a_candidate_that_runs_past_the_baselines_end_diverges_there() -> None:
    base = _run("base", {"s1": [10, 11, 12], "s2": [10, 11]})
    cand = _run("spec", {"s1": [10, 11, 12, 13, 14], "s2": [10, 11]})
    cmp = compare_runs(cand, base, n_resamples=50)
    first = {d.sample_id: d.first_divergence for d in cmp.diffs}
    assert first == {"s1": 3, "s2": None}
    (longer,) = [d for d in cmp.diffs if not d.identical]
    assert (longer.baseline_length, longer.candidate_length, longer.ended) == (3, 5, "baseline")


def test_the_pass_keeps_shells_in_each_runs_order_and_diffs_in_sample_order() -> None:
    base = _run("base", {"s3": [1, 2], "s1": [1, 2], "s2": [1, 2]}, s1=2.0)
    cand = _run("spec", {"s2": [1, 3], "s1": [1, 2], "s4": [1], "s0": [5]})  # s0, s4: no baseline answer
    cand.stored_grades["s2"] = Grade("s2", "incorrect", "2", "")
    ctl = _run("self", {"s1": [1, 2], "s2": [1, 2]})
    runs: dict[str, Any] = {"candidate": cand, "baseline": base, "control": ctl}
    ids = {role: run.result_ids() for role, run in runs.items()}
    walk = walk_runs(runs, ids, cand.grades(), base.grades())
    assert [d.sample_id for d in walk.diffs] == ["s1", "s2"]  # only samples both answered, sorted
    assert [d.sample_id for d in walk.control_diffs["control"]] == ["s1", "s2"]
    assert list(walk.control_diffs) == ["control"]
    assert [list(walk.shells[r]) for r in ("candidate", "baseline", "control")] == [
        ["s2", "s1", "s4", "s0"],
        ["s3", "s1", "s2"],
        ["s1", "s2"],
    ]
    assert list(walk.requests["baseline"]) == ["s3", "s1", "s2"]
    assert walk.requests["baseline"]["s1"].decode_s == 2.0 and walk.requests["baseline"]["s1"].sample_id == "s1"
    assert walk.resolution.judged == 6  # the baseline's three samples of two positions each
    kept = walk.shells["candidate"]["s2"]
    assert kept == shell(cand.result("s2"))
    assert kept.completion.usage == {"completion_tokens": 2} and kept.strata == {"k": "2"}
    assert (kept.completion.text, kept.completion.tokens, kept.completion.reasoning, kept.completion.answer) == (
        "",
        None,
        None,
        None,
    )
    assert [(d.answer_changed, d.correctness_flipped) for d in walk.diffs] == [(False, False), (True, True)]
