"""comparison.json, the frames and the speed block: what a report reads, key by key."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from two_choices import token_entries

from evalsuite.compare import compare_roles, compare_runs
from evalsuite.compare.speed import REPEAT_LIMIT, comparison_speed, repeat_warnings
from evalsuite.diff import ALPHA
from evalsuite.engines.parse import trace_from_entries
from evalsuite.errors import NotComparableError
from evalsuite.records import Completion, Grade, SampleResult
from evalsuite.serialize import dumps
from evalsuite.speed import paired_speedup
from evalsuite.stats.tails import exceedance_bound
from evalsuite.store import MemoryRun

FIELDS = {
    "task": "gsm8k",
    "prompt_template": "t1",
    "params": {"max_tokens": 64, "temperature": 0.0},
    "dataset": {"revision": "main"},
    "server": {"model": "qwen", "build_info": "b1"},
}


def _completion(ids: list[int], latency: float, finish: str = "stop") -> Completion:
    entries = token_entries(ids, -0.1, lambda i: (i + 1000, f"u{i}", -0.1 - 0.0137 * (i % 7 + 1)))
    return Completion(
        text="",
        finish_reason=finish,
        tokens=trace_from_entries(entries),
        usage={"completion_tokens": len(ids)},
        latency_s=latency,
    )


def _run(
    target: str, n: int, *, diverge: set[int] = frozenset(), slow: float = 1.0, build: str = "b1", max_tokens: int = 64
) -> MemoryRun:
    """`n` samples of four tokens; samples in `diverge` pick another third token; latencies vary per sample."""
    fields: dict[str, Any] = copy.deepcopy(FIELDS)
    fields["target"] = target
    fields["server"]["build_info"] = build
    fields["params"]["max_tokens"] = max_tokens
    results, grades = {}, {}
    for i in range(n):
        sid = f"g{i:02d}"
        ids = [1, 2, 1003, 4] if i in diverge else [1, 2, 3, 4]
        finish = "length" if i == 0 else "stop"
        results[sid] = SampleResult(sid, "gsm8k", {"level": str(i % 2)}, _completion(ids, slow * (1 + i / 10), finish))
        grades[sid] = Grade(sid, "correct" if i % 3 else "incorrect", "1", "")
    manifest = {"fingerprint": f"fp-{target}", "fingerprint_fields": fields, "target": target, "task": "gsm8k"}
    return MemoryRun(manifest, results, grades)


def test_comparison_json_lists_every_part_a_report_reads(tmp_path: Path) -> None:
    cand = _run("spéc", 12, diverge={3, 7}, slow=0.5, build="b2")
    base = _run("base", 12)
    del base.stored_results["g11"]
    repeat = _run("base-again", 12, slow=1.02)
    cmp = compare_runs(cand, base, controls={"repeat": repeat}, n_resamples=200, seed=4, delta=0.1)
    text = cmp.to_json(tmp_path / "comparison.json")
    assert (tmp_path / "comparison.json").read_text(encoding="utf-8") == text + "\n"
    assert text.startswith('{\n  "schema_version": 5,\n  "summary": ')
    assert '"target": "spéc"' in text  # written as UTF-8, not \u escapes
    doc = json.loads(text)
    assert list(doc) == [
        "schema_version",
        "summary",
        "candidate",
        "baseline",
        "settings",
        "differences",
        "waived",
        "missing",
        "token",
        "controls",
        "accuracy",
        "holm_family",
        "divergences",
        "speed",
        "truncation",
    ]
    assert doc["summary"] == cmp.summary
    assert doc["candidate"] == {"fingerprint": "fp-spéc", "target": "spéc", "task": "gsm8k"}
    assert doc["baseline"] == {"fingerprint": "fp-base", "target": "base", "task": "gsm8k"}
    assert doc["settings"] == {
        "delta": 0.1,
        "seed": 4,
        "bootstrap_method": "bca",
        "n_resamples": 200,
        "near_tie_nats": cmp.settings["near_tie_nats"],
        "control_slack": cmp.settings["control_slack"],
        "must_match": ["task", "prompt_template", "params", "dataset", "server.model", "server.model_meta"],
    }
    assert [d["path"] for d in doc["differences"]] == ["server.build_info", "target"]
    assert doc["waived"] == []
    assert doc["missing"] == {"candidate_only": 1, "baseline_only": 0}
    assert doc["token"]["label"] == cmp.token.label
    (control,) = doc["controls"]
    assert control["name"] == "repeat:base-again"
    assert [d["path"] for d in control["differences"]] == ["target"]
    assert [d["sample_id"] for d in doc["divergences"]] == ["g03", "g07"]
    assert all(d["identical"] is False and d["first_divergence"] == 2 for d in doc["divergences"])
    assert [r["stratum"] for r in doc["accuracy"]] == ["overall", "level", "level"]
    assert doc["holm_family"]["size"] == 3
    assert set(doc["speed"]) == {"speedup", "repeat_speedup", "warnings", "arms"}
    assert list(doc["speed"]["arms"]) == ["baseline", "repeat", "candidate"]
    assert list(doc["truncation"]) == ["baseline", "repeat", "candidate"]
    assert doc["truncation"]["candidate"] == {"target": "spéc", "n": 12, "truncated": 1, "in_reasoning": 0}
    assert doc["truncation"]["baseline"]["n"] == 11


def test_a_comparison_by_role_passes_its_options_on() -> None:
    roles = {"candidate": _run("spec", 10, diverge={2}), "baseline": _run("base", 10), "repeat": _run("r", 10)}
    cmp = compare_roles(roles, delta=0.25, seed=9, n_resamples=100)
    assert cmp.settings["delta"] == 0.25 and cmp.settings["seed"] == 9 and cmp.settings["n_resamples"] == 100
    assert [c.name for c in cmp.controls] == ["repeat:r"]
    assert cmp.overall()[0].verdict.delta == 0.25


def test_a_speed_from_whole_runs_is_the_speed_a_comparison_reports() -> None:
    """comparison_speed over fully loaded results gives the figures compare_runs measured one sample at a time:
    the same seed unless told (0), requests paired and outliers named by sample id, every warning kept."""
    rng = np.random.default_rng(8)
    cand_s = list(rng.uniform(0.4, 1.2, 24))
    cand_s[5] = 40.0  # one request 40x slower than the rest: an outlier of its arm, left out by its id
    base_s = list(rng.uniform(1.0, 2.0, 24))
    runs = {
        "candidate": _varied("spec", cand_s),
        "baseline": _varied("base", base_s),
        "repeat": _varied("r", [1.3 * x * rng.uniform(0.99, 1.01) for x in base_s]),  # the baseline again, slower
    }
    loaded = {role: run.results() for role, run in runs.items()}
    whole = comparison_speed(runs, loaded, seed=5)
    assert dumps(whole) == dumps(compare_roles(runs, seed=5, n_resamples=100).speed)
    assert dumps(comparison_speed(runs, loaded)) == dumps(compare_roles(runs, n_resamples=100).speed)
    assert dumps(comparison_speed(runs, loaded)) != dumps(whole)  # the seed reaches the intervals
    arms = whole.arms
    assert [arms[r].target for r in ("candidate", "baseline", "repeat")] == ["spec", "base", "r"]
    assert whole.speedup is not None and whole.speedup.excluded == ("g05",) and whole.speedup.n == 23
    assert dumps(whole.repeat_speedup) == dumps(paired_speedup(arms["repeat"], arms["baseline"], seed=5))
    assert whole.repeat_speedup is not None and whole.repeat_speedup.n == 24
    left_out = "1 of 24 samples left out of the speedup because a request in them is an outlier of its arm: g05."
    assert whole.speedup.warnings[0] == left_out
    assert left_out in whole.warnings and whole.warnings[-1].startswith("The two runs of the baseline differ")
    assert whole.warnings == [w for s in arms.values() for w in s.warnings] + whole.speedup.warnings + [
        whole.warnings[-1]
    ]


def test_a_baseline_and_its_repeat_alone_give_the_repeats_speed() -> None:
    runs = {"baseline": _run("base", 6), "repeat": _run("r", 6, slow=1.5)}
    speed = comparison_speed(runs, {role: run.results() for role, run in runs.items()})
    assert speed.speedup is None and speed.repeat_speedup is not None
    assert speed.repeat_speedup.geometric_mean == 1 / 1.5
    assert len(speed.warnings) == 1 and "by 0.67x (paired over 6 samples)" in speed.warnings[0]


def test_the_accuracy_frame_is_the_accuracy_rows_column_by_column() -> None:
    cmp = compare_runs(_run("spec", 20, diverge={1, 2}), _run("base", 20), n_resamples=100)
    frame = cmp.accuracy_frame()
    assert list(frame.columns) == [
        "task",
        "stratum",
        "value",
        "n",
        "candidate",
        "baseline",
        "difference",
        "low95",
        "high95",
        "low90",
        "high90",
        "discordance",
        "p",
        "p_holm",
        "verdict",
        "reason",
        "n_to_settle",
        "ungraded_excluded",
    ]
    for row, (_, got) in zip(cmp.accuracy, frame.iterrows(), strict=True):
        s, v = row.summary, row.verdict
        expected = [
            row.task,
            row.stratum,
            row.value,
            s.n,
            s.candidate.accuracy,
            s.baseline.accuracy,
            s.difference,
            s.interval95.low,
            s.interval95.high,
            s.interval90.low,
            s.interval90.high,
            s.discordance,
            s.p_value,
            s.p_adjusted,
            v.label,
            v.reason,
            v.n_to_settle,
            row.ungraded,
        ]
        assert [None if isinstance(x, float) and np.isnan(x) else x for x in got.tolist()] == [
            None if isinstance(x, float) and np.isnan(x) else x for x in expected
        ]


def test_the_samples_frame_is_indexed_by_sample_and_empty_without_samples() -> None:
    from evalsuite.compare.frames import DIFF_FIELDS, samples_frame

    cmp = compare_runs(_run("spec", 6, diverge={4}), _run("base", 6), n_resamples=100)
    frame = cmp.samples_frame()
    assert frame.index.name == "sample_id" and list(frame.index) == [f"g{i:02d}" for i in range(6)]
    assert list(frame.columns) == list(DIFF_FIELDS[1:])
    assert frame.loc["g04", "first_divergence"] == 2 and not frame.loc["g04", "identical"]
    assert samples_frame([]).empty


def _varied(target: str, factors: list[float]) -> MemoryRun:
    """A run whose sample i took factors[i] seconds (tokens fixed), so the paired ratios differ per sample."""
    run = _run(target, len(factors))
    for (sid, result), factor in zip(sorted(run.stored_results.items()), factors, strict=True):
        run.stored_results[sid] = replace(result, completion=replace(result.completion, latency_s=factor))
    return run


def test_the_speedup_is_paired_with_the_comparisons_seed() -> None:
    """The interval is paired_speedup's, computed on the comparison's seed (not the default), by sample id."""
    rng = np.random.default_rng(3)
    base = _varied("base", list(rng.uniform(1.0, 2.0, 30)))
    cand = _varied("spec", list(rng.uniform(0.4, 1.2, 30)))
    cmp = compare_runs(cand, base, n_resamples=100, seed=7)
    assert cmp.speed is not None and cmp.speed.speedup is not None
    arms = cmp.speed.arms
    assert dumps(cmp.speed.speedup) == dumps(paired_speedup(arms["candidate"], arms["baseline"], seed=7))
    assert dumps(cmp.speed.speedup) != dumps(paired_speedup(arms["candidate"], arms["baseline"], seed=0))
    assert cmp.speed.repeat_speedup is None and cmp.speed.timed


def test_a_repeat_warns_only_beyond_the_repeat_limit() -> None:
    runs = {"candidate": _run("spec", 8, slow=0.5), "baseline": _run("base", 8), "repeat": _run("r", 8)}
    speed = comparison_speed(runs, {role: run.results() for role, run in runs.items()})
    assert speed.repeat_speedup is not None
    at = replace(speed.repeat_speedup, geometric_mean=REPEAT_LIMIT)
    assert REPEAT_LIMIT == 1.10 and repeat_warnings(at) == [] and repeat_warnings(None) == []
    assert repeat_warnings(replace(at, geometric_mean=math.nan)) == []
    (slower,) = repeat_warnings(replace(at, geometric_mean=1 / 1.2))
    assert slower == (
        "The two runs of the baseline differ in decode speed by 0.83x (paired over 8 samples): speed differences "
        "smaller than that are noise on this machine; measure speed on its own with `evalsuite speed`."
    )
    assert len(repeat_warnings(replace(at, geometric_mean=1.1001))) == 1


def test_runs_without_a_sample_in_common_are_refused() -> None:
    cand, base = _run("spec", 3), _run("base", 3)
    cand.stored_results = {f"x{sid}": r for sid, r in cand.stored_results.items()}
    with pytest.raises(NotComparableError) as err:
        compare_runs(cand, base)
    assert str(err.value) == (
        "The candidate run (spec, 3 samples) and the baseline run (base, 3 samples) have no sample in common, so "
        "there is nothing to compare (a 0/0 verdict would mean nothing). Run both on the same samples."
    )


def test_the_must_match_fields_reach_the_candidates_check() -> None:
    cand, base = _run("spec", 4, max_tokens=128), _run("base", 4)
    with pytest.raises(NotComparableError, match="params.max_tokens"):
        compare_runs(cand, base, n_resamples=50)
    cmp = compare_runs(cand, base, must_match=("task",), n_resamples=50)
    assert [d.path for d in cmp.differences] == ["params.max_tokens", "target"]


def test_the_default_comparison_bootstraps_as_the_statistics_doc_says() -> None:
    """docs/statistics.md: BCa, 10,000 resamples; delta 0.02 and seed 0 unless given."""
    settings = compare_runs(_run("spec", 6), _run("base", 6)).settings
    assert (settings["bootstrap_method"], settings["n_resamples"], settings["delta"], settings["seed"]) == (
        "bca",
        10_000,
        0.02,
        0,
    )


def test_the_callers_near_tie_and_control_slack_set_the_threshold() -> None:
    """The repeat diverges on 30 samples, each to the baseline's runner-up 0.0137 x 4 nats below its token: slack
    x that gap is the threshold when it exceeds both the near-tie default and what 30 flips allow (the gap a
    31st exceeds with probability 1 %), the near-tie default when that is larger, else the bound."""
    cand, base = _run("spec", 32, diverge={3}), _run("base", 32)
    rep = _run("again", 32, diverge=set(range(30)))
    gap = 0.0137 * 4
    bound = exceedance_bound([gap] * 30, ALPHA)
    loose = compare_runs(cand, base, controls={"repeat": rep}, control_slack=6.0, n_resamples=50)
    assert (loose.thresholds.slack, loose.thresholds.effective) == (6.0, pytest.approx(6 * gap, rel=1e-4))
    assert not loose.thresholds.thin
    wide = compare_runs(cand, base, controls={"repeat": rep}, near_tie=0.5, control_slack=6.0, n_resamples=50)
    assert (wide.thresholds.near_tie, wide.thresholds.effective) == (0.5, 0.5)
    tight = compare_runs(cand, base, controls={"repeat": rep}, control_slack=1.0, n_resamples=50)
    assert tight.thresholds.effective == pytest.approx(bound, rel=1e-4) and tight.thresholds.thin
    assert 0.1 < bound < 6 * gap


def test_a_control_is_checked_for_comparability_under_the_callers_rules() -> None:
    cand, base = _run("spec", 4), _run("base", 4)
    odd = _run("self", 4, max_tokens=128)
    with pytest.raises(NotComparableError) as err:
        compare_runs(cand, base, controls={"control": odd}, n_resamples=50)
    assert str(err.value).startswith("The control run (self/gsm8k fp-self) and the baseline run")
    assert "  - params.max_tokens: baseline 64, control 128\n" in str(err.value)
    for options in ({"allow": ["params"]}, {"must_match": ("task",)}):
        cmp = compare_runs(cand, base, controls={"control": odd}, n_resamples=50, **options)  # type: ignore[arg-type]
        assert [d.path for d in cmp.control_differences["control:self"]] == ["params.max_tokens", "target"]


def test_an_unknown_control_role_is_refused() -> None:
    with pytest.raises(NotComparableError) as err:
        compare_runs(_run("spec", 4), _run("base", 4), controls={"draft": _run("d", 4)})  # type: ignore[dict-item]
    assert str(err.value) == "Unknown control role 'draft'; use one of repeat, control."


def test_grades_given_by_the_caller_replace_the_stored_ones() -> None:
    cand, base = _run("spec", 12), _run("base", 12)
    wrong = {sid: Grade(sid, "incorrect", "0", "") for sid in cand.stored_grades}
    right = {sid: Grade(sid, "correct", "1", "") for sid in cand.stored_grades}
    cmp = compare_runs(cand, base, grades={"candidate": wrong, "baseline": right}, n_resamples=50)
    overall = cmp.overall()[0].summary
    assert (overall.candidate.accuracy, overall.baseline.accuracy) == (0.0, 1.0)
    stored = compare_runs(cand, base, n_resamples=50).overall()[0].summary
    assert stored.candidate.accuracy == stored.baseline.accuracy == 8 / 12  # every third sample is stored wrong


def test_the_summary_line_speaks_of_the_overall_accuracy_only() -> None:
    """13 of 20 right in both runs overall (65 %); the strata (levels 0 and 1) are not summarised."""
    cmp = compare_runs(_run("spec", 20, diverge={1, 2}), _run("base", 20), n_resamples=100)
    assert [(r.stratum, r.value) for r in cmp.accuracy] == [("overall", "all"), ("level", "0"), ("level", "1")]
    assert cmp.summary == (
        "NUMERICAL-ONLY: 18/20 token-identical, 2 divergences all at near-ties; accuracy 65.0 % vs "
        "65.0 %, inconclusive at ±2 points (about 133 items would settle it)"
    )


def test_a_run_without_grades_gets_no_accuracy_rows() -> None:
    cand, base = _run("spec", 6), _run("base", 6)
    cand.stored_grades = {}
    cmp = compare_runs(cand, base, n_resamples=50)
    assert cmp.accuracy == [] and cmp.summary == "IDENTICAL: 6/6 token-identical; accuracy not graded"
