"""compare_runs on constructed stored runs: comparability, strata, Holm, JSON and frames."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from two_choices import token_entries

from evalsuite.compare import compare_runs, field_differences
from evalsuite.engines.parse import trace_from_entries
from evalsuite.errors import NotComparableError
from evalsuite.records import Completion, Grade, SampleResult
from evalsuite.stats import HOLM
from evalsuite.store import MemoryRun

FIELDS = {
    "task": "math500",
    "prompt_template": "abc123",
    "params": {"max_tokens": 2048, "temperature": 0.0, "seed": 42},
    "dataset": {"revision": "main", "rows": 200},
    "server": {"model": "qwen", "model_meta": {"n_params": 7}, "build_info": "b1"},
    "target": "base",
}


def _completion(ids: list[int]) -> Completion:
    entries = token_entries(ids, -0.1, lambda i: (i + 1000, f"u{i}", -0.11))
    return Completion(text="", finish_reason="stop", tokens=trace_from_entries(entries))


def _run(correct: np.ndarray, diverge: set[int], target: str, **field_changes: object) -> MemoryRun:
    fields = copy.deepcopy(FIELDS)
    fields["target"] = target
    for path, value in field_changes.items():
        node = fields
        *head, last = path.split("__")
        for key in head:
            node = node[key]
        node[last] = value
    results, grades = {}, {}
    for i, ok in enumerate(correct):
        sid = f"m{i:03d}"
        ids = [1, 2, 3, 4] if i not in diverge else [1, 2, 1003, 4]
        strata = {"subject": ["Algebra", "Geometry"][i % 2], "level": str(1 + i % 5)}
        results[sid] = SampleResult(sid, "math500", strata, _completion(ids))
        grades[sid] = Grade(sid, "correct" if ok else "incorrect", str(int(ok)), "")
    manifest = {"fingerprint": f"fp-{target}", "fingerprint_fields": fields, "target": target, "task": "math500"}
    return MemoryRun(manifest, results, grades)


def _arms(n: int = 200, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    base = np.random.default_rng(seed).random(n) < 0.8
    return base.copy(), base


def test_refuses_runs_that_differ_in_output_changing_fields() -> None:
    c, b = _arms()
    cand = _run(c, set(), "spec", params__max_tokens=8192, dataset__revision="abc")
    with pytest.raises(NotComparableError) as err:
        compare_runs(cand, _run(b, set(), "base"))
    msg = str(err.value)
    assert "params.max_tokens: baseline 2048, candidate 8192" in msg
    assert "dataset.revision: baseline 'main', candidate 'abc'" in msg
    assert "2 field(s)" in msg


def test_server_build_differences_are_reported_not_refused_and_waivers_work() -> None:
    c, b = _arms()
    cmp = compare_runs(_run(c, set(), "spec", server__build_info="b2"), _run(b, set(), "base"), n_resamples=200)
    assert {d.path for d in cmp.differences} == {"server.build_info", "target"}
    quant = _run(c, set(), "quant", server__model_meta={"n_params": 7, "ftype": "Q4_0"})
    with pytest.raises(NotComparableError, match="server.model_meta.ftype"):
        compare_runs(quant, _run(b, set(), "base"))
    assert compare_runs(quant, _run(b, set(), "base"), allow=["server.model_meta"], n_resamples=200).waived


def test_strata_holm_and_verdicts() -> None:
    c, b = _arms()
    cmp = compare_runs(_run(c, {3, 7}, "spec"), _run(b, set(), "base"), delta=0.05, n_resamples=500, seed=3)
    assert cmp.token.label == "NUMERICAL-ONLY"
    labels = [(r.stratum, r.value) for r in cmp.accuracy]
    assert labels[0] == ("overall", "all")
    assert ("subject", "Algebra") in labels and ("level", "5") in labels
    assert len(cmp.accuracy) == 1 + 2 + 5
    assert all(r.summary.adjust_method == HOLM for r in cmp.accuracy)
    overall = cmp.overall()[0]
    assert overall.summary.difference == 0.0 and overall.summary.p_value == 1.0
    assert overall.verdict.label == "EQUIVALENT"
    small = [r for r in cmp.accuracy if r.stratum == "level"]
    assert all(r.verdict.label == "INCONCLUSIVE" for r in small)  # 40 items cannot show ±5 points
    assert cmp.summary.endswith("equivalent within ±5 points")


def test_flipped_answers_make_accuracy_different_and_are_flagged_per_sample() -> None:
    c, b = _arms(400)
    right = np.flatnonzero(b)[:40]
    c[right] = False
    cmp = compare_runs(_run(c, set(right), "spec"), _run(b, set(), "base"), n_resamples=300)
    assert cmp.overall()[0].verdict.label == "DIFFERENT"
    frame = cmp.samples_frame()
    assert frame["correctness_flipped"].sum() == 40 and frame["answer_changed"].sum() == 40
    assert cmp.accuracy_frame().iloc[0]["difference"] == pytest.approx(-0.1)  # its columns: test_compare_json


def test_ungraded_items_are_excluded_and_counted() -> None:
    c, b = _arms()
    cand = _run(c, set(), "spec")
    cand.stored_grades["m000"] = Grade("m000", "ungraded", None, "timeout")
    cmp = compare_runs(cand, _run(b, set(), "base"), n_resamples=200)
    overall = cmp.overall()[0]
    assert overall.summary.n == 199 and overall.ungraded == 1


def test_json_is_versioned_and_null_safe() -> None:
    c, b = _arms(40)
    c[:] = True
    b[:] = True  # 40/40: BCa undefined, must be null in JSON
    doc = json.loads(compare_runs(_run(c, set(), "spec"), _run(b, set(), "base"), n_resamples=200).to_json())
    assert doc["schema_version"] == 5
    boot = doc["accuracy"][0]["stats"]["candidate"]["bootstrap"]
    assert boot["low"] is None and boot["degenerate"] is True
    assert doc["token"]["label"] == "IDENTICAL"
    assert doc["summary"].startswith("IDENTICAL: 40/40 token-identical")


def test_field_differences_walks_nested_fields() -> None:
    diffs = field_differences({"a": {"b": 1, "c": [1]}}, {"a": {"b": 2, "c": [1]}, "d": 3})
    assert [(d.path, d.baseline, d.other) for d in diffs] == [("a.b", 1, 2), ("d", "<absent>", 3)]


def test_holm_turns_a_significant_overall_difference_into_an_inconclusive_one() -> None:
    """10 items lost, 1 gained of 200: exact McNemar p = 0.0117 overall, below 0.05 on its own, but the task's
    family has 8 tests (overall, 2 subjects, 5 levels), so Holm multiplies the smallest p by 8 and the verdict
    must be INCONCLUSIVE, not DIFFERENT. The reference numbers come from scipy's binomial test and statsmodels'
    Holm, not from the suite."""
    from scipy.stats import binomtest
    from statsmodels.stats.multitest import multipletests

    b = np.ones(200, dtype=bool)
    c = b.copy()
    lost = [2, 13, 24, 35, 46, 57, 68, 79, 90, 101]  # spread over both subjects and all five levels
    c[lost] = False
    b[150], c[150] = False, True
    cmp = compare_runs(_run(c, set(), "spec"), _run(b, set(), "base"), delta=0.05, n_resamples=200)

    raw = [r.summary.p_value for r in cmp.accuracy]
    counts = [(r.summary.counts.baseline_only, r.summary.counts.candidate_only) for r in cmp.accuracy]
    expected_raw = [binomtest(k, k + j, 0.5).pvalue if k + j else 1.0 for k, j in counts]
    assert raw == pytest.approx(expected_raw, rel=1e-9)
    expected_holm = multipletests(raw, method="holm")[1]
    assert [r.summary.p_adjusted for r in cmp.accuracy] == pytest.approx(list(expected_holm), rel=1e-9)
    assert len(cmp.accuracy) == cmp.holm.size == 8

    overall = cmp.overall()[0]
    assert overall.summary.p_value == pytest.approx(2 * 12 / 2**11)  # binomial(11, 1/2), at most 1 of 11 gained
    assert overall.summary.p_adjusted == pytest.approx(8 * overall.summary.p_value)
    assert overall.verdict.label == "INCONCLUSIVE"  # without Holm: DIFFERENT (p = 0.012 < 0.05)
    assert "Holm-adjusted p = 0.094" in overall.verdict.reason


def test_accuracy_rows_are_the_stats_of_each_group_with_the_callers_settings() -> None:
    """Each row equals paired_summary called directly on that group's items, so the settings reach it."""
    from evalsuite.serialize import dumps
    from evalsuite.stats import paired_summary

    c, b = _arms(120, seed=5)
    c[np.flatnonzero(b)[:9]] = False
    cmp = compare_runs(
        _run(c, set(), "spec"),
        _run(b, set(), "base"),
        delta={"math500": 0.05},
        seed=11,
        bootstrap_method="percentile",
        n_resamples=300,
    )
    algebra = [i for i in range(120) if i % 2 == 0]
    row = next(r for r in cmp.accuracy if (r.stratum, r.value) == ("subject", "Algebra"))
    direct = paired_summary(
        c[algebra].astype(float),
        b[algebra].astype(float),
        delta=0.05,
        label="math500 subject=Algebra",
        seed=11,
        bootstrap_method="percentile",
        n_resamples=300,
    ).with_adjusted(row.summary.p_adjusted, HOLM)
    assert dumps(row.summary) == dumps(direct)
    assert row.task == "math500" and row.verdict.delta == 0.05
    assert [r.summary.label for r in cmp.accuracy] == [
        "math500 overall",
        *[f"math500 level={v}" for v in "12345"],
        "math500 subject=Algebra",
        "math500 subject=Geometry",
    ]
    assert cmp.holm.sentence() == (
        "Holm family: the 8 accuracy tests of this task (its overall difference and 7 stratum values), "
        "adjusted together by holm (step-down Bonferroni); each task is its own family."
    )
    assert cmp.holm.__json__() == {
        "method": HOLM,
        "scope": "one task: its overall accuracy difference and the difference in every stratum value",
        "size": 8,
        "tests": [r.summary.label for r in cmp.accuracy],
    }
    assert row.__json__() == {
        "task": "math500",
        "stratum": "subject",
        "value": "Algebra",
        "ungraded_excluded": 0,
        "stats": row.summary,
        "verdict": row.verdict,
    }


def test_holm_family_sentences_for_one_test_and_none() -> None:
    from evalsuite.compare.accuracy import HolmFamily

    assert HolmFamily(()).sentence() == "No accuracy test was run, so nothing was Holm-adjusted."
    assert HolmFamily(("gsm8k overall",)).sentence() == (
        "Holm family: the 1 accuracy test of this task (its overall difference), adjusted together by "
        "holm (step-down Bonferroni); each task is its own family."
    )
    assert (
        HolmFamily(("gsm8k overall", "gsm8k level=1"))
        .sentence()
        .startswith("Holm family: the 2 accuracy tests of this task (its overall difference and 1 stratum value),")
    )


def test_strata_sort_by_field_then_value_naturally_and_ungraded_and_unpaired_items_are_left_out() -> None:
    from evalsuite.compare.accuracy import accuracy_rows

    results, cgrades, bgrades = {}, {}, {}
    values = [("hard", "10"), ("easy", "9"), ("hard", "n/a"), ("easy", "10"), ("easy", "9")]
    for i, (difficulty, level) in enumerate(values):
        sid = f"s{i}"
        results[sid] = SampleResult(sid, "lcb", {"difficulty": difficulty, "level": level}, _completion([1, 2]))
        cgrades[sid] = bgrades[sid] = Grade(sid, "correct", "1", "")
    cgrades["s3"] = Grade("s3", "ungraded", None, "timeout")
    bgrades["s4"] = Grade("s4", "ungraded", None, "timeout")
    candidate = {**results, "extra": SampleResult("extra", "lcb", {}, _completion([1]))}
    rows = accuracy_rows(candidate, results, cgrades, bgrades, delta=0.02, n_resamples=50)
    assert [(r.stratum, r.value, r.summary.n, r.ungraded) for r in rows] == [
        ("overall", "all", 3, 2),
        ("difficulty", "easy", 1, 2),
        ("difficulty", "hard", 2, 0),
        ("level", "9", 1, 1),
        ("level", "10", 1, 1),
        ("level", "n/a", 1, 0),
    ]
