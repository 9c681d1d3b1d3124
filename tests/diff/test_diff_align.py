"""First divergence, margins, ranks and levels on hand-built traces."""

from __future__ import annotations

import math

import pytest

from evalsuite.diff import diff_completions, diff_runs
from evalsuite.engines.parse import completion_from_chat, trace_from_entries
from evalsuite.records import Completion, Grade


def entry(tid: int | None, text: str, alts: list[tuple[int | None, str, float]] | None) -> dict:
    e: dict = {"token": text, "bytes": list(text.encode()), "logprob": alts[0][2] if alts else 0.0}
    if tid is not None:
        e["id"] = tid
    e["top_logprobs"] = [
        {**({"id": i} if i is not None else {}), "token": t, "bytes": list(t.encode()), "logprob": lp}
        for i, t, lp in (alts or [])
    ]
    return e


def completion(entries: list[dict]) -> Completion:
    trace = trace_from_entries(entries)
    return Completion(text="".join(trace.pieces), finish_reason="stop", tokens=trace)


BASE = [
    entry(1, "The", [(1, "The", -0.1), (2, "A", -2.5)]),
    entry(3, " answer", [(3, " answer", -0.3), (4, " result", -0.32), (5, " sum", -3.0)]),
    entry(6, " is", [(6, " is", -0.01), (7, " was", -5.0)]),
]


def test_identical_outputs() -> None:
    d = diff_completions("s", completion(BASE), completion(BASE))
    assert d.identical and d.first_divergence is None and d.common_prefix == 3 and d.level == "ids"
    assert d.window == ""


def test_divergence_at_a_near_tie_reports_margin_rank_and_window() -> None:
    cand = [BASE[0], entry(4, " result", None), entry(6, " is", None)]  # accepted draft tokens: no alternatives
    d = diff_completions("s", completion(cand), completion(BASE))
    assert not d.identical and d.first_divergence == 1 and d.common_prefix == 1
    assert d.margin == pytest.approx(0.02, abs=1e-6) and d.margin_source == "baseline"
    assert d.candidate_rank == 2 and d.candidate_logprob == pytest.approx(-0.32)
    assert d.baseline_token_id == 3 and d.candidate_token_id == 4
    assert d.char_offset == 3
    assert d.window == "…The[baseline: ' answer is' | candidate: ' result is']"


def test_candidate_token_outside_the_alternatives() -> None:
    cand = [BASE[0], entry(99, " zebra", [(99, " zebra", -0.1), (3, " answer", -4.0)])]
    d = diff_completions("s", completion(cand), completion(BASE))
    assert d.candidate_rank is None and math.isnan(d.candidate_logprob)
    assert d.ended is None


def test_margin_falls_back_to_the_candidate_when_the_baseline_has_no_alternatives() -> None:
    base = [BASE[0], entry(3, " answer", None)]
    cand = [BASE[0], entry(4, " result", [(4, " result", -0.2), (3, " answer", -0.25)])]
    d = diff_completions("s", completion(cand), completion(base))
    assert d.margin == pytest.approx(0.05, abs=1e-6) and d.margin_source == "candidate"


def test_one_output_is_a_prefix_of_the_other() -> None:
    d = diff_completions("s", completion(BASE[:2]), completion(BASE))
    assert d.first_divergence == 2 and d.ended == "candidate"
    assert d.margin == pytest.approx(4.99, abs=1e-5)  # the baseline continued confidently


def test_strings_level_uses_bytes_when_ids_are_missing() -> None:
    base = [entry(None, t["token"], [(None, a["token"], a["logprob"]) for a in t["top_logprobs"]]) for t in BASE]
    cand = [base[0], entry(None, " result", None), base[2]]
    d = diff_completions("s", completion(cand), completion(base))
    assert d.level == "strings" and d.first_divergence == 1
    assert d.candidate_rank == 2 and d.candidate_token_id is None


def test_text_level_fallback_without_tokens() -> None:
    base = Completion(text="The answer is 42.", finish_reason="stop")
    cand = Completion(text="The answer is 24.", finish_reason="stop")
    d = diff_completions("s", cand, base)
    assert d.level == "text" and d.first_divergence == 14 and math.isnan(d.margin)
    assert d.baseline_next.startswith("42") and d.candidate_next.startswith("24")
    assert diff_completions("s", base, base).identical


def test_answer_change_and_correctness_flip_from_grades() -> None:
    right = Grade("s", "correct", "42", "match")
    wrong = Grade("s", "incorrect", "24", "mismatch")
    ungraded = Grade("s", "ungraded", None, "timeout")
    c, b = completion(BASE), completion(BASE)
    d = diff_completions("s", c, b, candidate_grade=wrong, baseline_grade=right)
    assert d.answer_changed is True and d.correctness_flipped is True
    d = diff_completions("s", c, b, candidate_grade=ungraded, baseline_grade=right)
    assert d.correctness_flipped is None
    d = diff_completions("s", c, b)
    assert d.answer_changed is None and d.correctness_flipped is None


def test_diff_runs_covers_common_samples_in_order() -> None:
    runs = {"b": completion(BASE), "a": completion(BASE), "z": completion(BASE)}
    out = diff_runs({k: runs[k] for k in ("b", "a")}, {k: runs[k] for k in ("a", "b", "z")})
    assert [d.sample_id for d in out] == ["a", "b"]


def test_rank_matches_by_text_when_only_the_chosen_tokens_carry_ids() -> None:
    """vLLM's shape: `token_ids` beside text tokens, alternatives named by text alone."""

    def vllm_like(entries: list[dict], ids: list[int]) -> Completion:
        body = {
            "choices": [
                {
                    "message": {"content": "".join(e["token"] for e in entries)},
                    "finish_reason": "stop",
                    "logprobs": {
                        "content": [
                            {
                                **{k: v for k, v in e.items() if k != "id"},
                                "top_logprobs": [{k: v for k, v in a.items() if k != "id"} for a in e["top_logprobs"]],
                            }
                            for e in entries
                        ]
                    },
                    "token_ids": ids,
                }
            ]
        }
        return completion_from_chat(body)

    cand = [BASE[0], entry(4, " result", [(4, " result", -0.3), (3, " answer", -0.32)]), BASE[2]]
    d = diff_completions("s", vllm_like(cand, [1, 4, 6]), vllm_like(BASE, [1, 3, 6]))
    assert d.level == "ids" and d.first_divergence == 1
    assert d.baseline_token_id == 3 and d.candidate_token_id == 4
    assert d.candidate_rank == 2 and d.candidate_logprob == pytest.approx(-0.32)
    assert d.candidate_next.startswith(" result")
