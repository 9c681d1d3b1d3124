"""Speed from stored runs: decode-time sources, draft acceptance from three engines, paired speedup."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from stored_runs import Plan, manifest, recording_store, recordings_dir, synthetic_runs, write_run

from evalsuite.records import Completion, SampleResult
from evalsuite.speed import RequestSpeed, paired_speedup, request_speed, speed_summary, speedup
from evalsuite.speed.summary import summarize

needs_recordings = pytest.mark.skipif(
    not (recordings_dir() / "base_f16.json.gz").exists(), reason=f"recordings not found under {recordings_dir()}"
)


def test_decode_time_prefers_the_engine_then_latency_minus_ttft_then_latency() -> None:
    engine = request_speed(
        "a",
        Completion(
            "x", "stop", usage={"completion_tokens": 100}, timings={"predicted_ms": 500.0}, latency_s=2.0, ttft_s=0.5
        ),
    )
    # the first token comes from the prompt pass: 99 decode tokens over the engine's 0.5 s
    assert (engine.source, engine.tokens_per_s) == ("engine", 198.0)
    streamed = request_speed("b", Completion("x", "stop", usage={"completion_tokens": 100}, latency_s=2.5, ttft_s=0.5))
    assert (streamed.source, streamed.tokens_per_s) == ("latency-ttft", 49.5)
    plain = request_speed("c", Completion("x", "stop", usage={"completion_tokens": 100}, latency_s=4.0))
    assert (plain.source, plain.tokens_per_s) == ("latency", 25.0)
    untimed = request_speed("d", Completion("x", "stop", usage={"completion_tokens": 100}))
    assert untimed.source == "none" and math.isnan(untimed.tokens_per_s)


@needs_recordings
def test_acceptance_and_speed_of_real_llamacpp_recordings(tmp_path: Path) -> None:
    base = speed_summary(recording_store(tmp_path, "base_f16"))
    self_draft = speed_summary(recording_store(tmp_path, "spec_f16_self"))
    q4 = speed_summary(recording_store(tmp_path, "spec_f16_draftq4"))
    synth = speed_summary(recording_store(tmp_path, "synth_f16"))
    # the figures the recordings' README gives, summed over the 24 requests
    assert (self_draft.draft_accepted, self_draft.draft_n) == (5420, 5479)
    assert (q4.draft_accepted, q4.draft_n) == (2805, 26009)
    assert (synth.draft_accepted, synth.draft_n) == (4536, 6312)
    assert q4.acceptance_rate == pytest.approx(2805 / 26009)
    assert self_draft.mean_accepted_length == pytest.approx(
        self_draft.predicted_n / (self_draft.predicted_n - self_draft.draft_accepted)
    )
    assert math.isnan(base.acceptance_rate) and base.acceptance_source == "not reported by the engine"
    assert base.decode_source.startswith("engine decode time")
    assert 600 < base.median_tokens_per_s < 720
    # the perfect drafter is faster, the random Q4_0 drafter costs more than it saves
    fast = speedup(recording_store(tmp_path / "s", "spec_f16_self"), recording_store(tmp_path / "b", "base_f16"))
    slow = paired_speedup(q4, base)
    assert fast.n == 24 and 1.2 < fast.geometric_mean < 1.6 and fast.low95 < fast.geometric_mean < fast.high95
    assert slow.geometric_mean < 0.5 and slow.faster_share == 0.0
    # a slower candidate is explained with its own acceptance figures; a faster one needs no explanation
    assert fast.slower is None and slow.slower is not None
    tau = q4.mean_accepted_length
    steps = q4.predicted_n - q4.draft_accepted
    assert f"kept {tau:.2f} tokens" in slow.slower and f"{2805 / 26009:.0%} of about {26009 / steps:.1f}" in slow.slower


def test_vllm_counter_deltas_over_sessions(tmp_path: Path) -> None:
    comp = Completion("x", "stop", usage={"completion_tokens": 10}, latency_s=1.0)
    before = {
        "vllm:spec_decode_num_drafts": 100.0,
        "vllm:spec_decode_num_draft_tokens": 400.0,
        "vllm:spec_decode_num_accepted_tokens": 250.0,
    }
    after = {
        "vllm:spec_decode_num_drafts": 300.0,
        "vllm:spec_decode_num_draft_tokens": 1200.0,
        "vllm:spec_decode_num_accepted_tokens": 650.0,
    }
    sessions = [
        {"engine_stats_before": before, "engine_stats_after": after},
        {"engine_stats_before": after, "engine_stats_after": {}},
    ]  # an interrupted session read nothing after
    store = write_run(
        tmp_path / "v", manifest("vllm-spec", "candidate"), [SampleResult("s1", "t", {}, comp)], [], [], sessions
    )
    s = speed_summary(store)
    assert s.counters is not None and (s.counters.drafts, s.counters.accepted) == (200.0, 400.0)
    assert s.acceptance_rate == pytest.approx(400 / 800)
    assert s.mean_accepted_length == pytest.approx(1 + 400 / 200)
    assert "vLLM" in s.acceptance_source


def test_accepted_and_drafted_tokens_come_from_requests_else_from_counters(tmp_path: Path) -> None:
    counted = [
        {
            "info": {
                "engine_stats_before": {
                    "vllm:spec_decode_num_drafts": 10.0,
                    "vllm:spec_decode_num_draft_tokens": 30.0,
                    "vllm:spec_decode_num_accepted_tokens": 20.0,
                },
                "engine_stats_after": {
                    "vllm:spec_decode_num_drafts": 40.0,
                    "vllm:spec_decode_num_draft_tokens": 120.0,
                    "vllm:spec_decode_num_accepted_tokens": 80.0,
                },
            }
        }
    ]
    drafted = RequestSpeed("a", 11, 1.0, "engine", math.nan, 1.0, predicted_n=11, draft_n=8, draft_accepted=6)
    plain = RequestSpeed("a", 11, 1.0, "latency", math.nan, 1.0)
    llama = summarize("llama", {"a": drafted}, counted, engine="llamacpp")
    assert (llama.accepted_tokens, llama.drafted_tokens) == (6, 8)  # what each request reported comes first
    vllm = summarize("vllm", {"a": plain}, counted, engine="vllm")
    assert (vllm.accepted_tokens, vllm.drafted_tokens, vllm.engine) == (60, 90, "vllm")
    assert summarize("none", {"a": plain}, []).accepted_tokens is None
    man = manifest("vllm-spec", "candidate")
    man["fingerprint_fields"]["engine"]["dialect"] = "vllm"
    comp = Completion("x", "stop", usage={"completion_tokens": 10}, latency_s=1.0)
    store = write_run(tmp_path / "v", man, [SampleResult("s1", "t", {}, comp)], [], [])
    assert speed_summary(store).engine == "vllm"  # read from the manifest, for the report's TTFT note


def test_sglang_accept_length_is_averaged() -> None:
    reqs = {
        sid: request_speed(
            sid,
            Completion(
                "x",
                "stop",
                usage={"completion_tokens": 5},
                latency_s=1.0,
                engine_extra={"meta_info": {"spec_accept_length": v}},
            ),
        )
        for sid, v in (("a", 2.0), ("b", 3.0))
    }
    s = summarize("sglang", reqs, [])
    assert s.mean_accepted_length == pytest.approx(2.5) and "SGLang" in s.acceptance_source


def _req(sid: str, tokens: int, decode: float) -> RequestSpeed:
    return RequestSpeed(sid, tokens, decode, "engine", math.nan, decode)


def test_a_slower_candidate_without_drafting_counts_says_acceptance_cannot_explain_it() -> None:
    base = summarize("b", {s: _req(s, 101, 1.0) for s in "abcdef"}, [])
    slower = summarize("c", {s: _req(s, 101, 2.0 + 0.1 * i) for i, s in enumerate("abcdef")}, [])
    note = paired_speedup(slower, base).slower
    gm = math.exp(-sum(math.log(2.0 + 0.1 * i) for i in range(6)) / 6)
    assert note is not None and note.startswith(f"The candidate decoded slower than its baseline ({gm:.2f}x")
    assert "no drafting counts" in note
    mixed = summarize("c", {s: _req(s, 101, 0.5 if i % 2 else 2.0) for i, s in enumerate("abcdef")}, [])
    assert paired_speedup(mixed, base).slower is None  # the interval reaches above 1: nothing to explain


def test_speedup_is_a_geometric_mean_of_paired_ratios() -> None:
    # decode rates count n - 1 tokens: 101 tokens over 1 s decode at 100 tokens/s
    base = summarize("b", {"a": _req("a", 101, 1.0), "b": _req("b", 101, 1.0), "x": _req("x", 5, 1.0)}, [])
    cand = summarize("c", {"a": _req("a", 101, 0.5), "b": _req("b", 1001, 20.0)}, [])
    s = paired_speedup(cand, base)
    assert s.n == 2  # "x" was not answered by the candidate
    assert s.geometric_mean == pytest.approx(1.0)  # 2x and 0.5x cancel
    assert s.aggregate == pytest.approx((1100 / 20.5) / (200 / 2.0))  # long outputs weigh more
    assert s.wall_clock == pytest.approx(2.0 / 20.5) and s.faster_share == 0.5


def test_speedup_of_synthetic_stores_matches_their_timings(tmp_path: Path) -> None:
    runs = synthetic_runs(tmp_path, Plan(n=12, speedup=2.5))
    s = speedup(runs["candidate"], runs["baseline"])
    assert s.geometric_mean == pytest.approx(2.5, rel=1e-4) and s.candidate.acceptance_rate == pytest.approx(0.75)
