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
