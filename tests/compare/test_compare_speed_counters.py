"""Comparison speed of in-memory vLLM runs: acceptance from the counters each session read before and after."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evalsuite.compare.speed import comparison_speed
from evalsuite.records import Completion, SampleResult
from evalsuite.serialize import dumps
from evalsuite.store import MemoryRun


def _counters(drafts: float, draft_tokens: float, accepted: float) -> dict[str, float]:
    return {
        "vllm:spec_decode_num_drafts": drafts,
        "vllm:spec_decode_num_draft_tokens": draft_tokens,
        "vllm:spec_decode_num_accepted_tokens": accepted,
    }


def _run(target: str, sessions: list[dict[str, Any]], ttft_s: float | None = None) -> MemoryRun:
    results = {
        f"s{i}": SampleResult(
            f"s{i}", "gsm8k", {}, Completion("x", "stop", usage={"completion_tokens": 20}, latency_s=1.0, ttft_s=ttft_s)
        )
        for i in range(4)
    }
    fields = {"target": target, "engine": {"dialect": "vllm", "api": "chat", "extra": {}}}
    manifest = {"fingerprint": f"fp-{target}", "fingerprint_fields": fields, "target": target, "task": "gsm8k"}
    return MemoryRun(manifest, results, sessions=[{"info": info} for info in sessions])


def test_counter_acceptance_of_a_vllm_candidate_is_summed_over_its_sessions() -> None:
    runs = {
        "baseline": _run("base", [{"engine_stats_before": {}, "engine_stats_after": {}}]),
        "candidate": _run(
            "spec",
            [
                {"engine_stats_before": _counters(10, 40, 20), "engine_stats_after": _counters(60, 240, 120)},
                {"engine_stats_before": _counters(60, 240, 120), "engine_stats_after": {}},  # interrupted: no reading
                {"engine_stats_before": _counters(0, 0, 0), "engine_stats_after": _counters(50, 160, 80)},  # restarted
            ],
        ),
    }
    speed = comparison_speed(runs, {role: run.results() for role, run in runs.items()})
    cand, base = speed.arms["candidate"], speed.arms["baseline"]
    assert (cand.accepted_tokens, cand.drafted_tokens) == (180, 360)
    assert cand.acceptance_rate == pytest.approx(0.5) and cand.mean_accepted_length == pytest.approx(1 + 180 / 100)
    assert cand.engine == "vllm" and "vLLM" in cand.acceptance_source
    assert (base.accepted_tokens, base.drafted_tokens) == (None, None)
    arms = json.loads(dumps(speed))["arms"]
    assert (arms["candidate"]["accepted_tokens"], arms["candidate"]["drafted_tokens"]) == (180, 360)
    assert arms["baseline"]["accepted_tokens"] is None


def test_ttft_of_streamed_vllm_requests_is_kept() -> None:
    runs = {"baseline": _run("base", [], ttft_s=0.2), "candidate": _run("spec", [], ttft_s=0.1)}
    speed = comparison_speed(runs, {role: run.results() for role, run in runs.items()})
    assert speed.arms["candidate"].median_ttft_s == pytest.approx(0.1)
    assert speed.arms["baseline"].median_ttft_s == pytest.approx(0.2)
