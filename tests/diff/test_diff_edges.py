"""The diff at its edges: where outputs end, what a level falls back to, and what a control or grid explains.

Each case has an answer worked out by hand (or by a naive reference, for the
character search) and fails if the rule it pins is changed.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsuite.diff import (
    ALPHA,
    THIN_CEILING_NATS,
    ControlProfile,
    Evidence,
    LogitResolution,
    SampleDiff,
    calibrate,
    classify,
    diff_completions,
    diff_runs,
    logit_resolution,
)
from evalsuite.diff.align import _first_mismatch_joined, _first_mismatch_seq
from evalsuite.diff.classify import NO_EVIDENCE
from evalsuite.diff.resolution import GAP_TOLERANCE, step_at
from evalsuite.engines.parse import trace_from_entries
from evalsuite.records import Completion, Grade, TokenTrace, joined_bytes, joined_pieces
from evalsuite.serialize import to_jsonable
from evalsuite.stats.tails import exceedance_bound


def entry(tid: int | None, text: str, alts: list[tuple[int | None, str, float]] | None, raw: bool = True) -> dict:
    e: dict = {"token": text, "logprob": alts[0][2] if alts else 0.0}
    if raw:
        e["bytes"] = list(text.encode())
    if tid is not None:
        e["id"] = tid
    e["top_logprobs"] = [
        {
            **({"id": i} if i is not None else {}),
            "token": t,
            **({"bytes": list(t.encode())} if raw else {}),
            "logprob": lp,
        }
        for i, t, lp in (alts or [])
    ]
    return e


def completion(entries: list[dict]) -> Completion:
    trace = trace_from_entries(entries)
    return Completion(text="".join(trace.pieces), finish_reason="stop", tokens=trace)


A = entry(1, "The", [(1, "The", -0.1), (2, "A", -2.5)])
B = entry(3, " answer", [(3, " answer", -0.3), (4, " result", -0.8)])
C = entry(6, " is", [(6, " is", -0.01), (7, " was", -5.0)])


def test_an_empty_candidate_against_a_baseline_with_ids_is_compared_by_ids() -> None:
    d = diff_completions("s", completion([]), completion([A, B]))
    assert (d.level, d.first_divergence, d.ended, d.candidate_length) == ("ids", 0, "candidate", 0)
    assert d.baseline_token_id == 1 and d.candidate_token_id is None
    assert d.margin == pytest.approx(2.4, abs=1e-6)
    both_empty = diff_completions("s", completion([]), completion([]))
    assert both_empty.level == "text" and both_empty.identical


def test_a_baseline_that_ended_first_takes_the_candidates_margin() -> None:
    d = diff_completions("s", completion([A, B, C]), completion([A, B]))
    assert (d.first_divergence, d.ended, d.baseline_length, d.candidate_length) == (2, "baseline", 2, 3)
    assert d.margin == pytest.approx(4.99, abs=1e-5) and d.margin_source == "candidate"
    assert d.candidate_rank is None and d.baseline_token_id is None and d.candidate_token_id == 6
    assert d.baseline_next == "" and d.candidate_next == " is"


def test_ids_on_one_side_only_fall_back_to_strings() -> None:
    base = [entry(None, t["token"], [(None, a["token"], a["logprob"]) for a in t["top_logprobs"]]) for t in (A, B)]
    d = diff_completions("s", completion([A, entry(4, " result", None)]), completion(base))
    assert d.level == "strings" and d.first_divergence == 1 and d.candidate_rank == 2
    d = diff_completions("s", completion(base[:1]), completion([A, B]))
    assert d.level == "strings" and d.first_divergence == 1 and d.ended == "candidate"


def test_strings_without_bytes_are_compared_as_strings_and_bytes_decide_when_present() -> None:
    plain = [entry(None, "x", None, raw=False), entry(None, "y", None, raw=False)]
    other = [entry(None, "x", None, raw=False), entry(None, "z", None, raw=False)]
    assert diff_completions("s", completion(other), completion(plain)).first_divergence == 1
    # two halves of one character: the strings are both U+FFFD, the bytes differ
    b1 = [{"token": "\ufffd", "bytes": [0xCF], "logprob": -0.1}, {"token": "\ufffd", "bytes": [0x80], "logprob": -0.1}]
    b2 = [{"token": "\ufffd", "bytes": [0xCF], "logprob": -0.1}, {"token": "\ufffd", "bytes": [0x81], "logprob": -0.1}]
    d = diff_completions("s", completion(b2), completion(b1))
    assert d.level == "strings" and d.first_divergence == 1


def test_bytes_on_one_side_only_compare_the_strings_not_bytes_against_strings() -> None:
    """Two engines without ids, one giving every token's bytes and one none: the same tokens are identical, and
    a different one is found where it is (not at the split character, where bytes would meet strings)."""
    halves = [
        {"token": "\ufffd", "bytes": [0xCF], "logprob": -0.1},
        {"token": "\ufffd", "bytes": [0x80], "logprob": -0.1},
    ]
    with_bytes = [entry(None, "x", None), *halves, entry(None, "y", None)]
    without = [entry(None, t, None, raw=False) for t in ("x", "\ufffd", "\ufffd", "y")]
    assert completion(with_bytes).tokens.exact_bytes and not completion(without).tokens.exact_bytes
    for cand, base in ((without, with_bytes), (with_bytes, without)):
        d = diff_completions("s", completion(cand), completion(base))
        assert d.level == "strings" and d.identical
    changed = without[:3] + [entry(None, "z", None, raw=False)]
    d = diff_completions("s", completion(changed), completion(with_bytes))
    assert (d.identical, d.first_divergence) == (False, 3)


def test_a_single_alternative_or_one_finite_logprob_gives_no_margin() -> None:
    one = [entry(1, "The", [(1, "The", -0.1)]), entry(3, " answer", [(3, " answer", -0.2)])]
    d = diff_completions("s", completion([one[0], entry(4, " x", [(4, " x", -0.1)])]), completion(one))
    assert d.first_divergence == 1 and math.isnan(d.margin) and d.margin_source is None
    trace = trace_from_entries([A, B])
    trace.top_logprobs[1, 1] = np.nan  # the runner-up's logprob lost: one finite value left
    base = Completion(text="The answer", finish_reason="stop", tokens=trace)
    d = diff_completions("s", completion([A, entry(4, " result", None)]), base)
    assert math.isnan(d.margin)


def test_rank_ignores_padding_and_uses_ids_when_names_are_missing() -> None:
    trace = trace_from_entries(
        [A, entry(3, " answer", [(3, " answer", -0.3), (4, " result", -0.8), (5, " sum", -1.0)])]
    )
    trace.top_logprobs[1, 2] = np.nan  # a padded slot (fewer alternatives than asked): must rank last, not first
    trace.top_pieces[1] = []  # alternatives known by id only
    base = Completion(text="The answer", finish_reason="stop", tokens=trace)
    d = diff_completions("s", completion([A, entry(4, " result", None)]), base)
    assert d.level == "ids" and d.candidate_rank == 2 and d.candidate_logprob == pytest.approx(-0.8)


def test_a_missing_grade_on_either_side_gives_no_flags() -> None:
    right = Grade("s", "correct", "42", "match")
    c = completion([A, B])
    for cg, bg in ((right, None), (None, right)):
        d = diff_completions("s", c, c, candidate_grade=cg, baseline_grade=bg)
        assert d.answer_changed is None and d.correctness_flipped is None


def test_text_level_diffs_are_complete_records() -> None:
    base = Completion(text="The answer is 42.", finish_reason="stop")
    right, wrong = Grade("s", "correct", "42", ""), Grade("s", "incorrect", "24", "")
    same = diff_completions("s", base, base, candidate_grade=wrong, baseline_grade=right)
    assert same == SampleDiff("s", "text", True, None, 17, 17, 17, answer_changed=True, correctness_flipped=True)
    cand = Completion(text="The answer is 24.", finish_reason="stop")
    d = diff_completions("s", cand, base, candidate_grade=wrong, baseline_grade=right)
    assert d == SampleDiff(
        "s",
        "text",
        False,
        14,
        14,
        17,
        17,
        char_offset=14,
        context="The answer is ",
        baseline_next="42.",
        candidate_next="24.",
        answer_changed=True,
        correctness_flipped=True,
    )
    long = Completion(text="x" * 100 + "a", finish_reason="stop")
    d = diff_completions("s", Completion(text="x" * 100 + "b", finish_reason="stop"), long)
    assert d.context == "x" * 60 and d.char_offset == 100
    assert diff_completions("s", Completion(text="The", finish_reason="stop"), base).ended == "candidate"
    assert diff_completions("s", base, Completion(text="The", finish_reason="stop")).ended == "baseline"


def test_text_level_first_difference_matches_a_naive_scan() -> None:
    rng = random.Random(7)
    for _ in range(300):
        a = "".join(rng.choice("ab") for _ in range(rng.randrange(0, 12)))
        b = "".join(rng.choice("ab") for _ in range(rng.randrange(0, 12)))
        d = diff_completions("s", Completion(text=b, finish_reason="stop"), Completion(text=a, finish_reason="stop"))
        expected = None if a == b else len(os.path.commonprefix([a, b]))
        assert d.first_divergence == expected, (a, b)


def test_diff_runs_hands_each_samples_grades_to_its_diff() -> None:
    base = {"a": Completion(text="42", finish_reason="stop"), "b": Completion(text="7", finish_reason="stop")}
    cand = {"a": Completion(text="24", finish_reason="stop"), "b": Completion(text="7", finish_reason="stop")}
    cg = {"a": Grade("a", "incorrect", "24", ""), "b": Grade("b", "correct", "7", "")}
    bg = {"a": Grade("a", "correct", "42", ""), "b": Grade("b", "correct", "7", "")}
    a, b = diff_runs(cand, base, candidate_grades=cg, baseline_grades=bg)
    assert (a.answer_changed, a.correctness_flipped) == (True, True)
    assert (b.answer_changed, b.correctness_flipped) == (False, False)


def _text_diff(sid: str, pos: int, nxt: str) -> SampleDiff:
    return SampleDiff(sid, "text", False, pos, pos, 50, 50, candidate_next=nxt)


def test_a_text_level_control_explains_the_same_first_character_only() -> None:
    control = ControlProfile.from_diffs("control:self", "control", [_text_diff("s", 10, "ab"), _text_diff("t", 4, "q")])
    th = calibrate([control])
    assert classify(_text_diff("s", 10, "ac"), th, [control]).explained_by == "control:control:self"
    assert classify(_text_diff("s", 10, "b"), th, [control]).kind == "unknown"
    assert classify(_text_diff("s", 11, "ab"), th, [control]).kind == "unknown"
    assert classify(_text_diff("t", 4, "qq"), th, [control]).kind == "numerical"


def test_a_control_profile_states_itself_in_json() -> None:
    diffs = [SampleDiff("a", "ids", False, 3, 3, 9, 9, gap=m, margin=0.01) for m in (0.5,)] + [
        SampleDiff("b", "ids", False, 2, 2, 9, 9, gap=0.1),
        SampleDiff("c", "ids", False, 2, 2, 9, 9, margin=0.7),  # a margin but no gap: no evidence of a flip's size
        SampleDiff("d", "ids", True, None, 9, 9, 9),
    ]
    elsewhere = Evidence((0.2, 0.9), 30, ("gsm8k",))
    p = ControlProfile.from_diffs("control:self", "control", diffs, elsewhere)
    assert to_jsonable(p) == {
        "name": "control:self",
        "kind": "control",
        "n": 4,
        "divergent": 3,
        "rate": 0.75,
        "max_gap": 0.5,
        "median_gap": pytest.approx(0.3),
        "elsewhere": {"flips": 2, "samples": 30, "tasks": ["gsm8k"]},
        "flips": 4,
        "max_gap_all": 0.9,
    }
    silent = ControlProfile.from_diffs("repeat:base", "repeat", [SampleDiff("c", "ids", False, 2, 2, 9, 9)])
    assert silent.__json__()["max_gap"] is None and silent.__json__()["median_gap"] is None
    assert silent.__json__()["flips"] == 0 and math.isnan(silent.bound(2.0))


GRID = LogitResolution(positions=100, share=1.0, quantized=True, step=0.125, low=0.0625, high=0.25)


@pytest.mark.parametrize(
    ("position_step", "limit"),
    [
        (math.nan, 0.5),  # the position could not be judged: the run's step, 4 x 0.125
        (0.0, 0.5),  # the position lies on no grid: the run's step
        (0.0625, 0.25),  # a finer position: its own step
        (0.25, 0.5),  # a coarser one: never more than the run's common step
        (2.0, 0.5),
    ],
)
def test_the_tie_limit_uses_the_positions_step_never_coarser_than_the_runs(position_step: float, limit: float) -> None:
    assert GRID.tie_limit(position_step) == pytest.approx(limit + GAP_TOLERANCE)  # a grid gap read from float32
    off = LogitResolution(positions=100, share=0.1, quantized=False, step=0.125, low=0.125, high=0.25)
    assert off.tie_limit(position_step) == 0.0


def test_step_at_cannot_judge_what_is_not_there() -> None:
    trace = trace_from_entries([A, entry(3, " answer", None)])
    assert math.isnan(step_at(None, 0))
    assert math.isnan(step_at(trace, 2))  # past the end
    assert math.isnan(step_at(trace, 1))  # an accepted draft token: no alternatives
    assert step_at(trace, 0) == 0.0  # a 2.4-nat gap in float32: on no power-of-two grid
    flat = TokenTrace(
        ids=np.array([1, 2]),
        pieces=["a", "b"],
        raw=[b"a", b"b"],
        logprobs=np.array([-0.5, -0.5], np.float32),
        top_ids=np.zeros((2, 0), np.int64),
        top_logprobs=np.zeros((2, 0), np.float32),
        top_pieces=[[], []],
    )
    assert math.isnan(step_at(flat, 0))
    grid = trace_from_entries([entry(1, "a", [(1, "a", -0.25), (2, "b", -0.75), (3, "c", -1.375)])])
    assert step_at(grid, 0) == 0.125  # gaps of 0.5 and 1.125
    assert step_at(grid, 0, judged=2) == 0.25  # without the 1.125 gap, only 0.5 is left: a coarser grid reads
    assert step_at(grid, 0, judged=1) == 0.125  # without the 0.5 gap: 1.125 alone
    assert math.isnan(step_at(trace_from_entries([A]), 0, judged=1))  # the judged gap was the only one


def _profile(name: str, gaps: list[float], elsewhere: Evidence = NO_EVIDENCE) -> ControlProfile:
    diffs = [SampleDiff(f"s{i}", "ids", False, 1, 1, 5, 5, gap=g) for i, g in enumerate(gaps)]
    return ControlProfile.from_diffs(name, "control", diffs, elsewhere)


# Thirty flips spread as numerics spread them (an exponential's quantiles, largest 0.051): enough for twice the
# largest to stand, with a few flips the bound their number allows stands instead.
SPREAD = [round(-0.0125 * math.log(1 - (i + 0.5) / 30), 5) for i in range(30)]


def test_calibrate_names_the_control_that_set_the_threshold_and_keeps_its_inputs() -> None:
    low = calibrate([_profile("control:a", [x / 2 for x in SPREAD])])  # its bound is below the default
    assert (low.near_tie, low.slack, low.effective, low.thin) == (0.1, 2.0, 0.1, False)
    assert low.source == (
        "near-tie default 0.1 nats (control 'control:a' flipped at gaps up to 0.0256 nats (30 flips in 30 samples))"
    )
    many = [x * 6 for x in SPREAD]  # largest 0.31: twice that is 0.61, above what 30 flips' spread allows
    assert exceedance_bound(many, ALPHA) < 2 * max(many)
    tie = calibrate([_profile("control:a", many), _profile("repeat:b", [0.01, 0.005])], slack=3.0)
    assert tie.effective == pytest.approx(3 * max(many)) and tie.slack == 3.0 and not tie.thin
    assert tie.source == (
        "3 x the largest gap at which control 'control:a' flipped at gaps up to 0.307 nats (30 flips in 30 samples)"
    )
    grid = calibrate([], resolution=GRID)
    assert grid.source == "near-tie default 0.1 nats; " + GRID.description


@pytest.mark.parametrize("flips", [[0.03, 0.01], [0.047, 0.02, 0.01], [0.03, 0.02, 0.02, 0.01]])
def test_a_few_flips_widen_the_threshold_to_what_their_number_allows(flips: list[float]) -> None:
    th = calibrate([_profile("control:a", flips)])
    assert th.thin and th.effective == pytest.approx(exceedance_bound(flips, ALPHA))
    assert 2 * max(flips) < th.effective < THIN_CEILING_NATS
    assert th.effective == pytest.approx(sum(flips) * (ALPHA ** (-1 / len(flips)) - 1))
    assert f"given the {len(flips)} flips of control 'control:a'" in th.source
    assert th.source.endswith("above 2 x the largest: so few flips allow no less")
    wider = calibrate([_profile("control:a", flips[:1])])
    assert wider.effective >= th.effective  # fewer flips, no narrower


@pytest.mark.parametrize("flips", [[0.03], [0.2, 0.1], [0.2, 0.1, 0.05, 0.05]])
def test_a_prediction_from_few_flips_stops_at_the_ceiling(flips: list[float]) -> None:
    assert exceedance_bound(flips, ALPHA) > THIN_CEILING_NATS > 2 * max(flips)
    th = calibrate([_profile("control:a", flips)])
    assert th.thin and th.effective == THIN_CEILING_NATS
    assert th.source.startswith(f"0.5 nats, the most a prediction from the {len(flips)} flips of control 'control:a'")
    assert th.source.endswith("flips further out must be shown by a control")


def test_flips_on_stored_runs_of_the_same_engine_count_with_the_runs_own() -> None:
    alone = calibrate([_profile("control:a", [0.03])])
    stored = Evidence(tuple(4 * x for x in SPREAD[:-1]), 60, ("gsm8k", "livecodebench"))
    pooled = calibrate([_profile("control:a", [0.03], stored)])
    assert pooled.effective < alone.effective and not pooled.thin
    assert pooled.effective == pytest.approx(2 * 4 * max(SPREAD[:-1]))
    assert "30 flips in 61 samples, 29 of them on stored runs of gsm8k, livecodebench" in pooled.source


def test_classify_clears_an_earlier_explanation() -> None:
    th = calibrate([])
    stale = {"explained_by": "near-tie", "kind": "numerical"}
    for diff, kind in (
        (SampleDiff("s", "ids", True, None, 3, 3, 3), "identical"),
        (SampleDiff("s", "ids", False, 1, 1, 3, 3, margin=2.0), "unknown"),  # a margin is no gap
        (SampleDiff("s", "ids", False, 1, 1, 3, 3, gap=2.0), "confident"),
    ):
        got = classify(replace(diff, **stale), th)
        assert (got.kind, got.explained_by) == (kind, None)


def test_an_ids_level_divergence_is_a_complete_record() -> None:
    pre = [entry(10 + k, f" w{k}", [(10 + k, f" w{k}", -0.01), (90 + k, f" v{k}", -3.0)]) for k in range(3)]
    base = completion([*pre, B, C])
    cand = completion([*pre, entry(4, " result", None), C])
    d = diff_completions("s", cand, base)
    assert d == SampleDiff(
        sample_id="s",
        level="ids",
        identical=False,
        first_divergence=3,
        common_prefix=3,
        baseline_length=5,
        candidate_length=5,
        char_offset=9,
        context=" w0 w1 w2",
        baseline_next=" answer is",
        candidate_next=" result is",
        baseline_token_id=3,
        candidate_token_id=4,
        margin=pytest.approx(0.5, abs=1e-6),
        margin_source="baseline",
        gap=pytest.approx(0.5, abs=1e-6),
        gap_source="baseline",
        grid_step=pytest.approx(math.nan, nan_ok=True),  # the judged gap was the position's only one
        baseline_logprob=pytest.approx(-0.3),
        candidate_rank=2,
        candidate_logprob=pytest.approx(-0.8),
    )
    same = diff_completions("s", base, base)
    assert same == SampleDiff("s", "ids", True, None, 5, 5, 5)


def test_levels_without_pieces_or_with_a_one_token_baseline_without_ids() -> None:
    bare = TokenTrace(
        ids=np.array([-1, -1]),
        pieces=[],
        raw=[],
        logprobs=np.zeros(2, np.float32),
        top_ids=np.zeros((2, 0), np.int64),
        top_logprobs=np.zeros((2, 0), np.float32),
        top_pieces=[],
    )
    cand = Completion(text="ab", finish_reason="stop", tokens=bare)
    assert diff_completions("s", cand, completion([A, B])).level == "text"
    one = completion([entry(None, "The", None)])
    assert diff_completions("s", completion([A, B]), one).level == "strings"


def test_a_baseline_ungraded_leaves_correctness_unknown() -> None:
    right, ungraded = Grade("s", "correct", "42", ""), Grade("s", "ungraded", None, "timeout")
    c = completion([A, B])
    d = diff_completions("s", c, c, candidate_grade=right, baseline_grade=ungraded)
    assert d.answer_changed is True and d.correctness_flipped is None


def test_the_candidates_gap_comes_with_the_candidates_grid_step() -> None:
    base = [A, entry(3, " answer", None)]
    cand = [A, entry(4, " result", [(4, " result", -0.25), (3, " answer", -0.75), (5, " sum", -1.25)])]
    d = diff_completions("s", completion(cand), completion(base))
    assert d.margin_source == "candidate" and d.margin == 0.5
    assert (d.gap_source, d.gap, d.gap_bound) == ("candidate", 0.5, False)
    assert d.grid_step == 0.25  # from its other gap, 1.0 (0.25 is the coarsest step tried), not the judged 0.5


def test_the_runs_step_is_its_most_common_one() -> None:
    rows = [[-0.125, -0.25, -1.125]] * 36 + [[-0.25, -0.5, -1.25]] * 4  # 36 positions at 0.125, 4 at 0.25
    trace = trace_from_entries(
        [
            {
                "id": 1,
                "token": "a",
                "logprob": r[0],
                "top_logprobs": [{"id": j, "token": "a", "logprob": v} for j, v in enumerate(r)],
            }
            for r in rows
        ]
    )
    res = logit_resolution([trace], steps=2.0)
    assert res.step == 0.125 and (res.low, res.high) == (0.125, 0.25) and res.steps == 2.0
    assert logit_resolution([], steps=2.0).steps == 2.0


def _first_different(a: list, b: list) -> int | None:
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return min(len(a), len(b)) if first is None and len(a) != len(b) else first


@st.composite
def _edited(draw: st.DrawFn, alphabet: list, size: int) -> tuple[list, list]:
    """Tokens from `alphabet`, and the same with one token changed (or none, past the end), then cut short or
    added to."""
    keys = draw(st.lists(st.sampled_from(alphabet), max_size=size))
    changed = list(keys)
    at = draw(st.integers(0, size + 10))
    if at < len(changed):
        changed[at] = draw(st.sampled_from(alphabet))
    tail = draw(st.lists(st.sampled_from(alphabet), max_size=3))
    return keys, changed[: len(changed) + len(tail)] if at % 2 else changed + tail


CHUNKS = [b"", b"a", b"ab", b"b", b"\xf0\x9f", b"\x98\x80", b"\xf0\x9f\x98\x80"]
PIECES = ["", "a", "ab", "b", "\ud83d", "\ude00", "\ud83d\ude00", "\U0001f600", "\ufffd", "é"]


@settings(max_examples=400, deadline=None)
@given(_edited(CHUNKS, 60))
def test_the_first_differing_token_is_found_in_joined_bytes(pair: tuple[list, list]) -> None:
    """Tokens compared joined: the first position where they differ, or where the shorter ends, even where
    tokens are empty or one token's bytes are two others' (joins that agree byte for byte)."""
    keys, changed = pair
    assert _first_mismatch_joined(joined_bytes(keys), joined_bytes(changed)) == _first_different(keys, changed)
    assert _first_mismatch_seq(keys, changed) == _first_different(keys, changed)


@settings(max_examples=300, deadline=None)
@given(_edited([b"a", b"b", b"\xf0\x9f"], 700))
def test_the_first_differing_token_of_lists_is_found_however_far_in(pair: tuple[list, list]) -> None:
    """Token lists compared a slice at a time: the first position where they differ (or where the shorter ends),
    wherever it falls among the slices."""
    assert _first_mismatch_seq(*pair) == _first_different(*pair)


@settings(max_examples=400, deadline=None)
@given(_edited(PIECES, 60))
def test_the_first_differing_piece_is_found_in_joined_strings(pair: tuple[list, list]) -> None:
    """The same over strings, lone surrogates included: a split emoji's halves are not the emoji."""
    keys, changed = pair
    assert _first_mismatch_joined(joined_pieces(keys), joined_pieces(changed)) == _first_different(keys, changed)


def test_the_window_holds_the_last_prefix_tokens_and_the_next_few_of_each_side() -> None:
    """A long shared prefix shows only its last 12 tokens; each continuation its next 4."""
    toks = [entry(i, f"t{i}", [(i, f"t{i}", -0.1)]) for i in range(20)]
    base = completion([*toks, *(entry(100 + j, f"b{j}", None) for j in range(8))])
    cand = completion([*toks, *(entry(200 + j, f"c{j}", None) for j in range(8))])
    d = diff_completions("s", cand, base)
    assert d.first_divergence == 20 and d.context == "".join(f"t{i}" for i in range(8, 20))
    assert (d.baseline_next, d.candidate_next) == ("b0b1b2b3", "c0c1c2c3")


def test_tokens_on_one_side_only_are_compared_as_text() -> None:
    """Without the candidate's tokens the outputs are compared character by character."""
    base = completion([entry(1, "ab", None), entry(2, "c", None)])
    d = diff_completions("s", Completion(text="abd", finish_reason="stop"), base)
    assert (d.level, d.first_divergence) == ("text", 2)


def test_a_difference_many_slices_in_is_found() -> None:
    """Lists compared a slice at a time: a difference past the first few slices is still the first found."""
    a = [b"a"] * 1000
    b = list(a)
    b[700] = b"b"
    assert _first_mismatch_seq(a, b) == 700
