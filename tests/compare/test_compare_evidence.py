"""A control's flips on every stored task of its engine count: the threshold belongs to the engine, so every way
of asking (one task, several, `compare`, the gate) judges the same stored runs alike."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from two_choices import token_entries

from evalsuite.compare import compare_runs
from evalsuite.compare.evidence import engine_identity, stored_evidence
from evalsuite.diff import ALPHA, THIN_CEILING_NATS, flip_bound
from evalsuite.engines.parse import trace_from_entries
from evalsuite.gate.runs import GatePair, compare_pair
from evalsuite.records import Completion, SampleResult
from evalsuite.stats.tails import exceedance_bound
from evalsuite.store import RunStore, open_run
from evalsuite.workflow import compare_folders

SPREAD = [round(-0.0125 * math.log(1 - (i + 0.5) / 30), 5) for i in range(30)]
"""Thirty flips spread as numerics spread them (an exponential's quantiles), the largest 0.051 nats."""


def _store(
    root: Path, target: str, task: str, gaps: dict[int, float], flips: set[int], *, build: str = "b1", rig: str = ""
) -> Path:
    """A run of `len(gaps)` samples of four tokens: sample i's third token has a runner-up `gaps[i]` nats below
    it, which the run takes instead in the samples of `flips`.  Stored under `root` as a run command stores it;
    `rig` names the server configuration (the target's name unless given)."""
    fields: dict[str, Any] = {
        "task": task,
        "prompt_template": "t",
        "params": {"temperature": 0.0, "max_tokens": 64 if task == "math500" else 32},
        "dataset": {"revision": task},
        "server": {"model": "m", "build_info": build},
        "endpoint": {"rig": rig or target},
        "target": target,
    }
    fingerprint = f"{target}-{task}-{build}-{len(gaps)}".ljust(16, "0")
    folder = root / target / task / fingerprint[:16]
    store = RunStore.create(
        folder, {"fingerprint": fingerprint, "fingerprint_fields": fields, "target": target, "task": task}
    )
    writer = store.writer()
    for i, gap in gaps.items():
        third = 100 + i
        ids = [1, 2, third + 1000 if i in flips else third, 4]
        entries = token_entries(ids, -0.1, lambda t, g=gap, k=third: (k + 1000 if t == k else t + 5000, "u", -0.1 - g))
        completion = Completion(text="", finish_reason="stop", tokens=trace_from_entries(entries))
        writer.put(SampleResult(f"{task}-{i}", task, {}, completion))
    writer.close()
    store.close()
    return folder


def _math(root: Path) -> dict[str, Path]:
    """MATH-500's five prompts: the control flips once at 0.03 nats, the candidate once at 0.2."""
    gaps = {0: 1.0, 1: 0.03, 2: 0.2, 3: 1.0, 4: 1.0}
    return {
        "baseline": _store(root, "base", "math500", gaps, set()),
        "control": _store(root, "self", "math500", gaps, {1}),
        "candidate": _store(root, "spec", "math500", gaps, {2}),
    }


def _gsm8k(root: Path, *, control: str = "self", build: str = "b1") -> dict[str, Path]:
    """GSM8K's 32 prompts: the control flips at 30 of them, at the spread gaps."""
    gaps = {i: SPREAD[i] if i < 30 else 1.0 for i in range(32)}
    return {
        "baseline": _store(root, "base", "gsm8k", gaps, set()),
        "control": _store(root, control, "gsm8k", gaps, set(range(30)), build=build, rig="self"),
    }


def _compare(roles: dict[str, Path]) -> Any:
    return compare_runs(roles["candidate"], roles["baseline"], controls={"control": roles["control"]}, n_resamples=50)


def test_a_task_alone_in_its_store_is_judged_on_its_own_flips_and_their_number(tmp_path: Path) -> None:
    math500 = _math(tmp_path / "runs")
    alone = _compare(math500)
    assert alone.thresholds.thin and alone.thresholds.effective == pytest.approx(THIN_CEILING_NATS)
    assert alone.token.label == "NUMERICAL-ONLY"  # one flip at 0.03 cannot say a flip at 0.2 is no numerics
    assert alone.controls[0].elsewhere.samples == 0


def test_stored_flips_of_the_same_engines_on_another_task_count_in_every_way_of_asking(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    math500, gsm8k = _math(root), _gsm8k(root)
    every = [0.03, *SPREAD]
    expected = max(2 * max(every), exceedance_bound(every, ALPHA))
    assert expected == flip_bound(every, 2.0)
    compared = _compare(math500)
    (control,) = compared.controls
    assert (len(control.elsewhere.gaps), control.elsewhere.samples, control.elsewhere.tasks) == (30, 32, ("gsm8k",))
    assert sorted(control.gaps.tolist()) == pytest.approx(sorted(every), abs=1e-6)  # gaps of float32 logprobs
    assert compared.thresholds.effective == pytest.approx(expected) and expected < 0.2
    assert compared.token.label == "LOSSY"
    assert "31 flips in 37 samples, 30 of them on stored runs of gsm8k" in compared.thresholds.source
    gsm8k["candidate"] = _store(root, "spec", "gsm8k", {i: 1.0 for i in range(32)}, set())
    math_eval, gsm_eval = compare_folders({"math500": math500, "gsm8k": gsm8k})
    assert math_eval.token.label == "LOSSY" and math_eval.thresholds.effective == compared.thresholds.effective
    assert gsm_eval.controls[0].elsewhere.tasks == ("math500",)  # each task counts the other's flips
    pair = GatePair(
        "math500", str(math500["candidate"]), str(math500["baseline"]), (("control", str(math500["control"])),)
    )
    gated = compare_pair(pair, 0.1).comparison
    assert gated.thresholds.effective == compared.thresholds.effective and gated.token.label == "LOSSY"
    doc = json.loads(compared.to_json())
    assert doc["controls"][0]["elsewhere"] == {"flips": 30, "samples": 32, "tasks": ["gsm8k"]}


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({"control": "elsewhere"}, id="another control target of the same engine counts"),
        pytest.param({"build": "b2"}, id="another server build does not"),
    ],
)
def test_only_runs_of_the_controls_engine_count(tmp_path: Path, other: dict[str, str]) -> None:
    root = tmp_path / "runs"
    math500 = _math(root)
    gsm8k = _gsm8k(root, **other)
    counted = _compare(math500).controls[0].elsewhere
    control = open_run(gsm8k["control"])
    same = engine_identity(control.manifest) == engine_identity(open_run(math500["control"]).manifest)
    assert same == ("build" not in other)
    assert (counted.samples, len(counted.gaps)) == ((32, 30) if same else (0, 0))


def test_the_comparisons_own_runs_and_runs_without_a_baseline_of_its_engine_are_not_counted(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    math500 = _math(root)
    _store(root, "self", "gsm8k", {i: SPREAD[i] for i in range(30)}, set(range(30)))  # no gsm8k baseline stored
    base, control = open_run(math500["baseline"]), open_run(math500["control"])
    assert stored_evidence(base, control).samples == 0
    (root / "broken" / "gsm8k" / "0000").mkdir(parents=True)
    (root / "broken" / "gsm8k" / "0000" / "manifest.json").write_text("{not json")  # a damaged folder is passed over
    assert stored_evidence(base, control).samples == 0
