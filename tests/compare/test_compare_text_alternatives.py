"""Stored runs whose alternatives carry text but no ids (vLLM's shape): the divergence still names the rank."""

from __future__ import annotations

from pathlib import Path

from evalsuite.compare import compare_runs
from evalsuite.engines.parse import completion_from_chat
from evalsuite.records import SampleResult
from evalsuite.store import RunStore

FIELDS = {
    "task": "gsm8k",
    "prompt_template": "t",
    "params": {"max_tokens": 8, "temperature": 0.0, "seed": 42},
    "dataset": {"revision": "main", "rows": 2},
    "server": {"model": "smollm2", "version": "0.32.0"},
}


def _body(tokens: list[tuple[int, str, list[tuple[str, float]]]]) -> dict:
    return {
        "choices": [
            {
                "message": {"content": "".join(t for _, t, _ in tokens)},
                "finish_reason": "length",
                "token_ids": [i for i, _, _ in tokens],
                "logprobs": {
                    "content": [
                        {
                            "token": t,
                            "logprob": alts[0][1],
                            "top_logprobs": [{"token": a, "logprob": lp} for a, lp in alts],
                        }
                        for _, t, alts in tokens
                    ]
                },
            }
        ]
    }


BASE = [
    (10, "The", [("The", -0.1), ("A", -2.5)]),
    (11, " sum", [(" sum", -0.6), (" total", -0.725), (" answer", -3.0)]),
    (12, " is", [(" is", -0.01), (" was", -5.0)]),
]
CAND = [BASE[0], (13, " total", [(" total", -0.6), (" sum", -0.725)]), (12, " is", [(" is", -0.01), (" was", -5.0)])]


def _store(folder: Path, name: str, rows: list) -> Path:
    manifest = {"fingerprint": f"fp-{name}", "fingerprint_fields": {**FIELDS, "target": name}, "target": name}
    store = RunStore.create(folder, {**manifest, "task": "gsm8k"})
    writer = store.writer()
    writer.put(SampleResult("g0", "gsm8k", {}, completion_from_chat(_body(rows))))
    writer.close()
    store.close()
    return folder


def test_rank_of_the_candidates_token_among_text_only_alternatives(tmp_path: Path) -> None:
    base = _store(tmp_path / "base", "base", BASE)
    cand = _store(tmp_path / "cand", "cand", CAND)
    (d,) = compare_runs(cand, base).diffs
    assert d.level == "ids" and d.first_divergence == 1 and d.candidate_token_id == 13
    assert d.candidate_rank == 2 and abs(d.candidate_logprob + 0.725) < 1e-6
    assert d.candidate_next.startswith(" total") and d.context == "The"
