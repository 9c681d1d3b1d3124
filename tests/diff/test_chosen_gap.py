"""A divergence is judged on the gap between the two tokens chosen, not on how close the baseline's top two were.

A lossy verifier (one that accepts any draft token inside the target's top-k, a relaxed acceptance rule, a
sampling path leaking into greedy) emits tokens the baseline put far below its own, often exactly where the
baseline's top two were close.  Each case builds the alternatives an engine would list and says which token
each run chose.
"""

from __future__ import annotations

import math

import pytest

from evalsuite.diff import THIN_CEILING_NATS, ControlProfile, calibrate, classify, diff_completions, flip_bound
from evalsuite.engines.parse import trace_from_entries
from evalsuite.records import Completion
from evalsuite.verdict import token_verdict

NEAR_TIE = [(1, " a", -0.70), (2, " b", -0.72), (3, " c", -2.9), (4, " d", -3.6), (5, " e", -4.4)]
"""The baseline's alternatives at the divergence: its top two 0.02 nats apart, the rest several nats below."""


def entry(tid: int, alts: list[tuple[int, str, float]] | None) -> dict:
    chosen = next((lp for i, _, lp in alts or [] if i == tid), 0.0)
    return {
        "id": tid,
        "token": f"<{tid}>",
        "logprob": chosen,
        "top_logprobs": [{"id": i, "token": t, "logprob": lp} for i, t, lp in alts or []],
    }


def completion(entries: list[dict]) -> Completion:
    trace = trace_from_entries(entries)
    return Completion(text="".join(trace.pieces), finish_reason="stop", tokens=trace)


PREFIX = [entry(9, [(9, " x", -0.01), (8, " y", -6.0)])]


def diverge(candidate_token: int, baseline_alts: list | None = NEAR_TIE, candidate_alts: list | None = None):
    """The baseline chose token 1 at position 1; the candidate chose `candidate_token` there."""
    base = completion([*PREFIX, entry(1, baseline_alts), entry(7, None)])
    cand = completion([*PREFIX, entry(candidate_token, candidate_alts), entry(7, None)])
    return diff_completions("s", cand, base)


@pytest.mark.parametrize(("token", "gap"), [(3, 2.2), (4, 2.9), (5, 3.7)])
def test_a_token_far_below_the_baselines_own_is_confident_at_a_near_tie(token: int, gap: float) -> None:
    d = diverge(token)
    assert d.margin == pytest.approx(0.02, abs=1e-6)  # the top two were close: the old evidence said "numerics"
    assert d.gap == pytest.approx(gap, abs=1e-6) and not d.gap_bound and d.gap_source == "baseline"
    got = classify(d, calibrate([]))
    assert got.kind == "confident"
    verdict = token_verdict([got], calibrate([]))
    assert verdict.label == "LOSSY" and f"gap {gap:.3g} nats" in verdict.reason


def test_the_baselines_runner_up_at_a_near_tie_stays_numerical() -> None:
    d = classify(diverge(2), calibrate([]))
    assert d.gap == pytest.approx(0.02, abs=1e-6) and (d.kind, d.explained_by) == ("numerical", "near-tie")


def test_a_token_not_listed_is_at_least_the_last_alternative_below() -> None:
    d = diverge(42)
    assert d.gap_bound and d.gap == pytest.approx(-0.70 + 4.4, abs=1e-6) and d.candidate_rank is None
    got = classify(d, calibrate([]))
    assert got.kind == "confident"
    assert "gap at least 3.7 nats" in token_verdict([got], calibrate([])).reason


def test_an_unlisted_token_where_every_alternative_is_near_tied_is_numerical() -> None:
    flat = [(1, " a", -1.60), (2, " b", -1.61), (3, " c", -1.62), (4, " d", -1.63), (5, " e", -1.64)]
    d = classify(diverge(42, flat), calibrate([]))
    assert d.gap_bound and d.gap == pytest.approx(0.04, abs=1e-6) and d.kind == "numerical"


def test_an_unlisted_token_with_only_the_baselines_own_listed_tells_nothing() -> None:
    d = diverge(42, [(1, " a", -0.7)])
    assert math.isnan(d.gap) and classify(d, calibrate([])).kind == "unknown"


def test_without_the_baselines_logprobs_there_the_candidates_own_decide() -> None:
    cand_alts = [(42, " q", -0.2), (1, " a", -3.2), (6, " r", -3.5)]
    d = diverge(42, None, cand_alts)
    assert (d.gap_source, d.gap, d.gap_bound) == ("candidate", pytest.approx(3.0, abs=1e-6), False)
    assert classify(d, calibrate([])).kind == "confident"
    near = diverge(42, None, [(42, " q", -0.2), (1, " a", -0.23)])
    assert near.gap == pytest.approx(0.03, abs=1e-6) and classify(near, calibrate([])).kind == "numerical"
    unlisted = diverge(42, None, [(42, " q", -0.2), (6, " r", -2.7)])
    assert unlisted.gap_bound and unlisted.gap == pytest.approx(2.5, abs=1e-6)


def test_an_output_that_ended_is_at_least_the_baselines_nearest_alternative_below() -> None:
    base = completion([*PREFIX, entry(1, NEAR_TIE), entry(7, None)])
    d = diff_completions("s", completion(PREFIX), base)
    assert d.ended == "candidate" and d.gap_bound and d.gap == pytest.approx(0.02, abs=1e-6)
    sure = completion([*PREFIX, entry(1, [(1, " a", -0.01), (2, " b", -5.0)])])
    d = diff_completions("s", completion(PREFIX), sure)
    assert classify(d, calibrate([])).kind == "confident" and d.gap == pytest.approx(4.99, abs=1e-6)


def test_a_control_at_the_same_place_but_to_another_token_does_not_explain_a_far_one() -> None:
    """The control flips the near-tie to the runner-up; a candidate that goes to the fourth choice there is no
    numerics, although it diverges exactly where and as often as the control."""
    control = ControlProfile.from_diffs("control:self", "control", [diverge(2)])
    th = calibrate([control])
    far = classify(diverge(4), th, [control])
    assert far.kind == "confident" and th.effective < far.gap
    same = classify(diverge(2), th, [control])
    assert same.explained_by == "control:control:self"


def test_a_controls_flips_are_measured_as_gaps_too() -> None:
    """A control that flipped to a far token raises the threshold by that gap, not by the top-two margin."""
    far = ControlProfile.from_diffs("control:self", "control", [diverge(5)])
    assert far.own_gaps.tolist() == pytest.approx([3.7], abs=1e-6)


ONE_NAT = [(1, " a", -0.70), (2, " b", -0.72), (3, " c", -1.75), (4, " d", -3.6)]
"""A near-tie whose third choice lies about one nat below the baseline's own."""


def test_one_control_flip_cannot_excuse_a_token_a_nat_below() -> None:
    """A single flip predicts little; the prediction from it stops at the ceiling, so a candidate that diverges
    as rarely as the control, a nat below the baseline's token, is still a loss."""
    control = ControlProfile.from_diffs("control:self", "control", [diverge(2)])
    th = calibrate([control])
    assert th.thin and th.effective == pytest.approx(THIN_CEILING_NATS) and "most a prediction" in th.source
    far = classify(diverge(3, ONE_NAT), th, [control])
    assert far.kind == "confident" and far.gap == pytest.approx(1.05, abs=1e-6)
    assert token_verdict([far], th, [control]).label == "LOSSY"


def test_the_ceiling_never_lowers_what_a_control_showed() -> None:
    """A control that flipped far itself sets the threshold at twice that, above the ceiling."""
    assert flip_bound([0.4], 2.0) == pytest.approx(0.8)
    assert flip_bound([0.01], 2.0) == pytest.approx(THIN_CEILING_NATS)
    many = [0.01 * i for i in range(1, 31)]
    assert flip_bound(many, 2.0) == pytest.approx(0.6)  # enough flips: twice the largest, no prediction needed
    assert math.isnan(flip_bound([], 2.0))


def test_a_divergence_no_side_lists_alternatives_at_has_no_gap_at_all() -> None:
    """Neither run gave logprobs at the divergence: no gap, so it is neither a bound nor anyone's."""
    d = diverge(3, None, None)
    assert math.isnan(d.gap) and not d.gap_bound and d.gap_source is None and math.isnan(d.grid_step)


def test_an_unlisted_token_beside_a_sides_own_alone_is_no_bound() -> None:
    """A side that lists only its own token bounds nothing, whichever side's logprobs are read."""
    d = diverge(42, [(1, " a", -0.7)])
    assert math.isnan(d.gap) and not d.gap_bound and d.gap_source is None
    d = diverge(42, None, [(42, " q", -0.2)])
    assert math.isnan(d.gap) and not d.gap_bound and d.gap_source is None


def test_an_output_that_ended_where_the_other_listed_only_its_own_token_has_no_bound() -> None:
    """The ended output's end is below the other's token, but no alternative says how far: no gap, no bound."""
    base = completion([*PREFIX, entry(1, [(1, " a", -0.7)]), entry(7, None)])
    d = diff_completions("s", completion(PREFIX), base)
    assert d.ended == "candidate" and math.isnan(d.gap) and not d.gap_bound
    cand = completion([*PREFIX, entry(1, [(1, " a", -0.7)]), entry(7, None)])
    d = diff_completions("s", cand, completion(PREFIX))
    assert d.ended == "baseline" and math.isnan(d.gap) and not d.gap_bound


GRID = [(1, " a", -0.5), (2, " b", -0.625), (3, " c", -1.0), (4, " d", -1.5)]
"""Alternatives on a 0.125-nat grid (bf16 logits): gaps 0.125, 0.5 and 1.0 below the baseline's token."""


def test_an_unlisted_tokens_bound_comes_with_the_step_of_the_baselines_alternatives() -> None:
    """A bound read from the last alternative is judged against the grid the baseline's row shows."""
    d = diverge(42, GRID)
    assert d.gap_bound and d.gap == pytest.approx(1.0, abs=1e-6) and d.grid_step == pytest.approx(0.125)


def test_an_ended_outputs_step_is_read_without_the_nearest_alternative_it_is_judged_on() -> None:
    """The ended output is judged on the nearest alternative below (0.1 nats, off any grid); the step comes from
    the other alternatives (0.25 and 0.5 nats: a 0.25 grid), never from the gap being judged."""
    row = [(1, " a", -0.5), (2, " b", -0.6), (3, " c", -0.75), (4, " d", -1.0)]
    base = completion([*PREFIX, entry(1, row), entry(7, None)])
    d = diff_completions("s", completion(PREFIX), base)
    assert d.gap_bound and d.gap == pytest.approx(0.1, abs=1e-6) and d.grid_step == pytest.approx(0.25)


def test_the_candidates_rank_is_by_logprob_at_the_divergence_not_by_listing_order() -> None:
    """An engine may list alternatives out of order; the rank is the candidate's place among the baseline's
    logprobs at the divergence (second here, though listed third)."""
    shuffled = [(1, " a", -0.70), (3, " c", -2.9), (2, " b", -0.72)]
    d = diverge(2, shuffled)
    assert d.candidate_rank == 2 and d.candidate_logprob == pytest.approx(-0.72, abs=1e-6)


def strings_entry(text: str, alts: list[tuple[str, float]] | None) -> dict:
    """A token as an engine without ids lists it: its string and its alternatives' strings only."""
    chosen = next((lp for t, lp in alts or [] if t == text), 0.0)
    return {"token": text, "logprob": chosen, "top_logprobs": [{"token": t, "logprob": lp} for t, lp in alts or []]}


def test_without_ids_a_token_not_among_the_alternatives_names_is_at_least_the_last_below() -> None:
    """At the strings level the candidate's token is looked up by name; one not listed is a bound, as by id."""
    alts = [(" a", -0.7), (" b", -0.72), (" c", -2.9)]
    base = completion([strings_entry(" x", [(" x", -0.01)]), strings_entry(" a", alts), strings_entry(" z", None)])
    cand = completion([strings_entry(" x", [(" x", -0.01)]), strings_entry(" q", None), strings_entry(" z", None)])
    d = diff_completions("s", cand, base)
    assert d.level == "strings" and d.first_divergence == 1 and d.candidate_rank is None
    assert d.gap_bound and d.gap == pytest.approx(2.2, abs=1e-6) and d.gap_source == "baseline"
    listed = diff_completions(
        "s",
        completion([strings_entry(" x", [(" x", -0.01)]), strings_entry(" c", None), strings_entry(" z", None)]),
        base,
    )
    assert not listed.gap_bound and listed.gap == pytest.approx(2.2, abs=1e-6) and listed.candidate_rank == 3
