"""The speed table of stored vLLM runs: acceptance from /metrics counter deltas, TTFT only when streamed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stored_runs import manifest, write_run

from evalsuite.compare import compare_runs
from evalsuite.engines.parse import trace_from_entries
from evalsuite.records import Completion, SampleResult
from evalsuite.report import ReportPaths, write_reports
from evalsuite.store import RunStore

DRAFTS, DRAFT_TOKENS, ACCEPTED = (
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
)
N = 6


def _counters(drafts: float, draft_tokens: float, accepted: float) -> dict[str, float]:
    return {DRAFTS: drafts, DRAFT_TOKENS: draft_tokens, ACCEPTED: accepted}


def _completion(latency_s: float, ttft_s: float | None) -> Completion:
    """A vLLM response: token ids and usage, no `timings` (vLLM reports none); latency measured by the client."""
    entries = [{"id": i, "token": f"t{i}", "logprob": -0.1} for i in range(1, 12)]
    return Completion(
        "",
        "stop",
        tokens=trace_from_entries(entries),
        usage={"completion_tokens": len(entries)},
        latency_s=latency_s,
        ttft_s=ttft_s,
    )


def _vllm_run(root: Path, target: str, role: str, sessions: list[dict[str, Any]], *, streamed: bool) -> RunStore:
    man = manifest(target, role, args=["--speculative-config", "{}"] if role == "candidate" else [])
    man["fingerprint_fields"]["engine"] = {"dialect": "vllm", "api": "chat", "extra": {}}
    man["probe"]["dialect"] = "vllm"
    latency = 1.0 if role == "baseline" else 0.5
    results = [
        SampleResult(f"s{i}", "math500", {}, _completion(latency + 0.01 * i, 0.05 if streamed else None))
        for i in range(N)
    ]
    return write_run(root / target, man, results, [], [], sessions)


def _report(root: Path, *, streamed: bool) -> ReportPaths:
    """A baseline without drafting and a candidate whose counters moved in two sessions (the run was resumed)."""
    candidate = _vllm_run(
        root,
        "vspec",
        "candidate",
        [
            {"engine_stats_before": _counters(100, 400, 250), "engine_stats_after": _counters(250, 1000, 550)},
            {"engine_stats_before": _counters(0, 0, 0), "engine_stats_after": _counters(50, 200, 100)},
        ],
        streamed=streamed,
    )
    baseline = _vllm_run(
        root, "vbase", "baseline", [{"engine_stats_before": {}, "engine_stats_after": {}}], streamed=streamed
    )
    runs = {"candidate": candidate, "baseline": baseline}
    cmp = compare_runs(candidate, baseline, n_resamples=100)
    return write_reports([cmp], root / "report", runs={"math500": runs})


def _row(md: str, role: str) -> list[str]:
    line = next(line for line in md.splitlines() if line.startswith(f"| {role} | "))
    return [cell.strip() for cell in line.split("|")[1:-1]]


def test_vllm_counter_acceptance_fills_the_speed_table(tmp_path: Path) -> None:
    paths = _report(tmp_path, streamed=False)
    md = paths.markdown.read_text()
    # drafts 150 + 50, draft tokens 600 + 200, accepted 300 + 100 over the two sessions
    assert _row(md, "candidate")[7:] == [
        "50.0 %",
        "400/800",
        "3.00",
    ]  # acceptance, accepted / drafted, tau = 1 + 400/200
    assert _row(md, "baseline")[7:] == ["–", "–", "–"]  # no drafting: the server had no spec_decode counters
    assert "Acceptance from vLLM /metrics spec_decode counters" in md
    html = paths.html.read_text()
    assert "<td>50.0 %</td><td>400/800</td><td>3.00</td>" in html
    arm = json.loads(paths.json[0].read_text())["speed"]["arms"]["candidate"]
    assert (arm["accepted_tokens"], arm["drafted_tokens"], arm["engine"]) == (400, 800, "vllm")
    assert (arm["acceptance_rate"], arm["mean_accepted_length"]) == (0.5, 3.0)


def test_unstreamed_vllm_runs_say_why_they_have_no_ttft(tmp_path: Path) -> None:
    paths = _report(tmp_path, streamed=False)
    md = paths.markdown.read_text()
    assert _row(md, "candidate")[5] == "–¹" and _row(md, "baseline")[5] == "–¹"
    note = (
        "¹ No time to first token for `vbase`, `vspec`: a non-streamed vllm response carries no timing, "
        "so TTFT needs `stream = true` on the target."
    )
    assert note in md
    assert (
        note.replace("`vbase`", "<code>vbase</code>")
        .replace("`vspec`", "<code>vspec</code>")
        .replace("`stream = true`", "<code>stream = true</code>")
        in paths.html.read_text()
    )


def test_streamed_vllm_runs_show_their_ttft(tmp_path: Path) -> None:
    md = _report(tmp_path, streamed=True).markdown.read_text()
    assert _row(md, "candidate")[5] == "50 ms" and _row(md, "baseline")[5] == "50 ms"
    assert "No time to first token" not in md and "–¹" not in md
    assert "Decode time: wall-clock latency minus time to first token." in md
