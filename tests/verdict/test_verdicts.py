"""Token and accuracy verdicts, and the summary line, on constructed evidence."""

from __future__ import annotations

import numpy as np
import pytest

from evalsuite.diff import ControlProfile, Evidence, LogitResolution, SampleDiff, calibrate, classify_all
from evalsuite.stats import paired_summary
from evalsuite.verdict import accuracy_verdict, summary_line, token_verdict
from evalsuite.verdict.token import gap_text


def sd(sid: str, pos: int | None, margin: float = float("nan"), token: int | None = 7) -> SampleDiff:
    if pos is None:
        return SampleDiff(sid, "ids", True, None, 100, 100, 100)
    return SampleDiff(
        sid, "ids", False, pos, pos, 100, 100, margin=margin, gap=margin, candidate_token_id=token, candidate_next="x"
    )


def judge(diffs: list[SampleDiff], controls: list[ControlProfile] = ()):  # type: ignore[assignment]
    th = calibrate(controls)
    return token_verdict(classify_all(diffs, th, controls), th, controls)


def test_identical() -> None:
    v = judge([sd(f"s{i}", None) for i in range(5)])
    assert v.label == "IDENTICAL" and "5/5" in v.reason


def test_near_ties_without_control_are_numerical_only() -> None:
    v = judge([sd("a", 3, 0.01), sd("b", None), sd("c", 9, 0.05)])
    assert v.label == "NUMERICAL-ONLY" and "near-ties" in v.reason


def test_one_confident_divergence_is_lossy() -> None:
    v = judge([sd("a", 3, 0.01), sd("b", 4, 3.2)])
    assert v.label == "LOSSY" and "3.2 nats" in v.reason and v.kinds["confident"] == 1


def test_quantized_numerics_need_a_control() -> None:
    # A Q4_0 target: numerics flip tokens at gaps up to 2.5 nats.
    ctl_diffs = [sd(f"s{i}", 10 + i, m) for i, m in enumerate([0.3, 1.1, 2.5, 0.7])] + [sd("s9", None)]
    control = ControlProfile.from_diffs("control:self", "control", ctl_diffs)
    cand = [sd("s0", 10, 0.3), sd("s1", 5, 1.9), sd("s2", 12, 2.5), sd("s3", None), sd("s9", None)]
    assert judge(cand).label == "LOSSY"
    v = judge(cand, [control])
    assert v.label == "NUMERICAL-ONLY", v.reason
    # flips this far out are shown by the control itself: 2 x 2.5, the prediction from four flips stops below
    assert v.thresholds.effective == pytest.approx(5.0) and not v.thresholds.thin
    assert v.explained_by_control == 2  # s0 and s2 diverged exactly where the control did


def test_more_frequent_than_the_numerics_control_is_lossy() -> None:
    control = ControlProfile.from_diffs("control:self", "control", [sd(f"s{i}", None) for i in range(20)])
    cand = [sd(f"s{i}", i + 1, 0.01) for i in range(12)] + [sd(f"s{i}", None) for i in range(12, 20)]
    v = judge(cand, [control])
    assert v.label == "LOSSY" and "more often" in v.reason
    assert v.rate_checks[0].p_value == pytest.approx(0.5**12)


def test_repeat_is_not_a_rate_yardstick() -> None:
    control = ControlProfile.from_diffs("repeat:base", "repeat", [sd(f"s{i}", None) for i in range(20)])
    cand = [sd(f"s{i}", i + 1, 0.01) for i in range(12)] + [sd(f"s{i}", None) for i in range(12, 20)]
    assert judge(cand, [control]).label == "NUMERICAL-ONLY"


def test_missing_logprobs_are_undetermined_unless_a_control_explains_them() -> None:
    cand = [sd("a", 3), sd("b", None)]
    assert judge(cand).label == "UNDETERMINED"
    control = ControlProfile.from_diffs("control:self", "control", [sd("a", 3), sd("b", None)])
    assert judge(cand, [control]).label == "NUMERICAL-ONLY"


def _arms(n: int, flips_down: int, flips_up: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = (rng.random(n) < 0.87).astype(float)
    cand = base.copy()
    right, wrong = np.flatnonzero(base == 1), np.flatnonzero(base == 0)
    cand[right[:flips_down]] = 0
    cand[wrong[:flips_up]] = 1
    return cand, base


def test_accuracy_equivalent() -> None:
    s = paired_summary(*_arms(500, 2, 1), delta=0.02, n_resamples=500)
    v = accuracy_verdict(s)
    assert v.label == "EQUIVALENT" and "±2 points" in v.reason


def test_accuracy_different() -> None:
    s = paired_summary(*_arms(500, 30, 2), delta=0.02, n_resamples=500)
    v = accuracy_verdict(s)
    assert v.label == "DIFFERENT" and "McNemar" in v.reason


def test_small_stratum_is_inconclusive_with_the_n_that_would_settle_it() -> None:
    s = paired_summary(*_arms(38, 0, 0), delta=0.02, n_resamples=500)
    v = accuracy_verdict(s)
    assert v.label == "INCONCLUSIVE"
    assert "even perfect agreement" in v.reason and v.n_to_settle and v.n_to_settle > 38


def test_summary_line_reads_like_the_spec() -> None:
    diffs = [sd(f"s{i}", None) for i in range(493)] + [sd(f"d{i}", 5, 0.01) for i in range(7)]
    tv = judge(diffs)
    s = paired_summary(*_arms(500, 2, 1), delta=0.02, n_resamples=500)
    line = summary_line(tv, [("math500", s, accuracy_verdict(s))])
    assert line.startswith("NUMERICAL-ONLY: 493/500 token-identical, 7 divergences all at near-ties; accuracy ")
    assert line.endswith("equivalent within ±2 points")


@pytest.mark.parametrize(
    ("margin", "kind", "label"),
    [
        (float(np.nextafter(0.1, 0.0)), "numerical", "NUMERICAL-ONLY"),  # just below 0.1 nats: a near-tie
        (0.1, "confident", "LOSSY"),  # the threshold itself is not below the threshold
        (0.037, "numerical", "NUMERICAL-ONLY"),  # the largest numerics flip on the H200 recordings (docs/diff.md)
        (0.34, "confident", "LOSSY"),  # the smallest fake-acceptance divergence there
    ],
)
def test_the_default_near_tie_threshold_is_one_tenth_of_a_nat_exclusive(margin: float, kind: str, label: str) -> None:
    """Pins the default, 0.1 nats, from both sides: a default anywhere else moves one of the first two cases."""
    v = judge([sd("a", 3, margin), sd("b", None)])
    assert v.thresholds.effective == 0.1 and v.thresholds.source == "near-tie default 0.1 nats"
    assert v.kinds[kind] == 1
    assert v.label == label


def _table(n: int, lost: int, gained: int, both_wrong: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-item scores with the paired table given: `lost` only the baseline right, `gained` only the candidate."""
    b, c = np.ones(n), np.ones(n)
    c[:lost] = 0
    b[lost : lost + gained] = 0
    b[lost + gained : lost + gained + both_wrong] = c[lost + gained : lost + gained + both_wrong] = 0
    return c, b


def test_accuracy_reasons_state_the_numbers_that_decided() -> None:
    from dataclasses import replace

    from scipy.stats import binomtest

    s = paired_summary(*_table(500, 30, 2, 60), delta=0.02, n_resamples=200)
    assert s.p_value == pytest.approx(binomtest(2, 32, 0.5).pvalue)
    v = accuracy_verdict(s)
    assert (v.label, v.delta, v.n_to_settle) == ("DIFFERENT", 0.02, None)
    assert v.reason == (
        "The candidate is -5.6 points vs the baseline on 500 items (2 gained, 30 lost; "
        "exact McNemar (binomial on discordant pairs), p = 2.5e-07)."
    )
    adjusted = accuracy_verdict(s.with_adjusted(0.0123, "holm"))
    assert adjusted.reason.endswith("Holm-adjusted p = 0.012).")

    eq = paired_summary(*_table(2000, 60, 20, 100), delta=0.05, n_resamples=200)
    assert accuracy_verdict(eq).reason == (
        "The 90 % tango-score interval [-2.8, -1.3] points lies inside ±5 points; "
        "the difference is nonetheless significant (p = 8.6e-06)."
    )
    assert accuracy_verdict(eq.with_adjusted(0.05, "holm")).reason == (
        "The 90 % tango-score interval [-2.8, -1.3] points lies inside ±5 points."  # 0.05 is not below 0.05
    )

    inc = paired_summary(*_table(200, 10, 1, 0), delta=0.05, n_resamples=200).with_adjusted(0.09375, "holm")
    v = accuracy_verdict(inc)
    assert (v.label, v.n_to_settle) == ("INCONCLUSIVE", inc.n_to_settle)
    assert v.reason == (
        "The 90 % interval [-7.8, -2.1] points crosses ±5 points and Holm-adjusted p = 0.094; "
        f"about {inc.n_to_settle:,} items at this discordance (5.5 %) would settle it."
    )
    assert accuracy_verdict(replace(inc, p_adjusted=0.05)).label == "INCONCLUSIVE"  # the boundary is not significant
    assert accuracy_verdict(replace(inc, p_adjusted=0.0499)).label == "DIFFERENT"

    small = paired_summary(*_table(38, 0, 0, 5), delta=0.02, n_resamples=200)
    assert accuracy_verdict(small).reason == (
        "With 38 items even perfect agreement only shows equivalence within ±6.6 points, so ±2 cannot be shown; "
        "about 133 items at this discordance (0.0 %) would settle it."
    )
    at_margin = accuracy_verdict(replace(inc, min_equivalence_margin=0.05))  # exactly the margin: cannot be shown
    assert "even perfect agreement only shows equivalence within ±5.0 points" in at_margin.reason


def test_accuracy_verdict_on_one_item_and_on_none() -> None:
    one = paired_summary(np.array([1.0]), np.array([1.0]), delta=0.02, n_resamples=200)
    v = accuracy_verdict(one)
    assert v.label == "INCONCLUSIVE" and v.reason.startswith("With 1 items even perfect agreement")
    none = accuracy_verdict(paired_summary(np.array([]), np.array([]), delta=0.02))
    assert none == type(none)("INCONCLUSIVE", "No item was graded in both runs.", 0.02, None)


def test_token_verdict_json_is_the_reports_contract() -> None:
    control = ControlProfile.from_diffs("control:self", "control", [sd(f"s{i}", None) for i in range(20)])
    cand = [sd(f"s{i}", i + 1, 0.01) for i in range(12)] + [sd(f"s{i}", None) for i in range(12, 20)]
    v = judge(cand, [control])
    doc = v.__json__()
    assert doc == {
        "label": "LOSSY",
        "reason": v.reason,
        "n": 20,
        "identical": 8,
        "divergent": 12,
        "kinds": {"identical": 8, "numerical": 12, "confident": 0, "unknown": 0},
        "level": "ids",
        "thresholds": v.thresholds,
        "max_gap": 0.01,
        "explained_by_control": 0,
        "rate_checks": v.rate_checks,
    }
    assert v.rate_checks[0].__json__() == {
        "control": "control:self",
        "candidate_divergent": 12,
        "control_divergent": 0,
        "n": 20,
        "candidate_only": 12,
        "control_only": 0,
        "p_value": 0.5**12,
        "more_frequent": True,
        "test": "exact one-sided sign test",
    }


def test_every_token_verdict_and_summary_line_reads_as_specified() -> None:
    """Each branch of the token verdict, word for word, and the summary line built from it (docs/diff.md)."""
    ctl = ControlProfile.from_diffs("control:self", "control", [sd("a", 3, 0.02)] + [sd(x, None) for x in "bcd"])
    cases = [
        (
            judge([]),
            "UNDETERMINED",
            "No sample was answered by both runs.",
            "UNDETERMINED: 0/0 token-identical, 0 divergences without logprobs",
        ),
        (
            judge([sd("a", None)]),
            "IDENTICAL",
            "All 1/1 outputs are token-identical to the baseline (compared at the ids level).",
            "IDENTICAL: 1/1 token-identical",
        ),
        (
            judge([sd("a", 3, 0.02), sd("b", None)]),
            "NUMERICAL-ONLY",
            "1 of 2 outputs diverge, all at near-ties (the tokens chosen at most 0.02 nats apart, threshold 0.1).",
            "NUMERICAL-ONLY: 1/2 token-identical, 1 divergence all at near-ties",
        ),
        (
            judge([sd("a", 3, 0.02)] + [sd(x, None) for x in "bcd"], [ctl]),
            "NUMERICAL-ONLY",
            "1 of 4 outputs diverge, all at the same positions where a control run also diverged; "
            "no more often than the control 'control:self' (1/4).",
            "NUMERICAL-ONLY: 3/4 token-identical, 1 divergence all where a control run also diverged",
        ),
        (
            judge([sd("a", 3, 0.02), sd("b", 5, 0.03), sd("c", None), sd("d", None)], [ctl]),
            "NUMERICAL-ONLY",
            "2 of 4 outputs diverge, all at near-ties (the tokens chosen at most 0.03 nats apart, threshold 0.5), "
            "1 at the same positions as a control run; no more often than the control 'control:self' (1/4).",
            "NUMERICAL-ONLY: 2/4 token-identical, 2 divergences all at near-ties or where a control run also diverged",
        ),
        (
            judge([sd("a", 3, 2.5), sd("b", None)]),
            "LOSSY",
            "1 of 1 divergences are confident: the candidate chose a token the baseline held well below its own "
            "(gap 2.5 nats, above the "
            "0.1-nat threshold: near-tie default 0.1 nats).",
            "LOSSY: 1/2 token-identical, 1 divergence to a token the baseline held well below its own "
            "(gap up to 2.5 nats)",
        ),
        (
            judge([sd("a", 3, 2.5), sd("b", 4, 0.5), sd("c", 6, 0.01)]),
            "LOSSY",
            "2 of 3 divergences are confident: the candidate chose a token the baseline held well below its own "
            "(gap 2.5 nats, above the "
            "0.1-nat threshold: near-tie default 0.1 nats).",
            "LOSSY: 0/3 token-identical, 2 divergences to a token the baseline held well below its own "
            "(gap up to 2.5 nats)",
        ),
        (
            judge([sd("a", 3), sd("b", 4), sd("c", None)]),
            "UNDETERMINED",
            "2 of 2 divergences have no logprobs at the divergence and no control diverged there, so numerics "
            "cannot be told from a lossy drafter; request logprobs or add a control run.",
            "UNDETERMINED: 1/3 token-identical, 2 divergences without logprobs",
        ),
    ]
    for verdict, label, reason, line in cases:
        assert (verdict.label, verdict.reason) == (label, reason)
        assert summary_line(verdict) == f"{line}; accuracy not graded"
    rate_ctl = ControlProfile.from_diffs("control:self", "control", [sd(f"s{i}", None) for i in range(20)])
    rate = judge([sd(f"s{i}", i + 1, 0.01) for i in range(12)] + [sd(f"s{i}", None) for i in range(12, 20)], [rate_ctl])
    assert (
        summary_line(rate) == "LOSSY: 8/20 token-identical, diverging more often than the control; accuracy not graded"
    )
    assert rate.reason == (
        "The candidate diverges on 12/20 samples against 0/20 for the control 'control:self' "
        "(exact one-sided sign test p = 0.00024), more often than engine numerics explain."
    )


def test_a_confident_divergence_on_a_bf16_grid_says_it_is_beyond_the_grid() -> None:
    grid = LogitResolution(positions=100, share=1.0, quantized=True, step=0.125, low=0.125, high=0.125)
    th = calibrate([], resolution=grid)
    v = token_verdict(classify_all([sd("a", 3, 2.5), sd("b", 4, 0.25)], th), th)
    assert v.label == "LOSSY" and "above the 0.1-nat threshold and beyond 4 steps of the logits' grid" in v.reason
    ok = token_verdict(classify_all([sd("a", 3, 0.25), sd("b", 4, 0.05)], th), th)
    assert ok.reason == (
        "2 of 2 outputs diverge, all at near-ties (the tokens chosen at most 0.25 nats apart, threshold 0.1; "
        "1 within 4 steps of the logits' bf16-like grid)."
    )


def test_summary_line_accuracy_parts_for_one_and_several_tasks() -> None:
    near = judge([sd("a", 3, 0.02), sd("b", None)])
    head = "NUMERICAL-ONLY: 1/2 token-identical, 1 divergence all at near-ties; "
    lost = paired_summary(*_table(500, 30, 2, 60), delta=0.02, n_resamples=200)  # 410 vs 438 of 500 right
    assert summary_line(near, [("math500", lost, accuracy_verdict(lost))]) == (
        head + "accuracy 82.0 % vs 87.6 %, different (-5.6 points, p = 2.5e-07)"
    )
    held = lost.with_adjusted(0.0123, "holm")
    assert summary_line(near, [("math500", held, accuracy_verdict(held))]).endswith("(-5.6 points, p = 0.012)")
    open_ = paired_summary(*_table(200, 10, 1, 0), delta=0.05, n_resamples=200).with_adjusted(0.09375, "holm")
    same = paired_summary(*_table(500, 2, 1, 60), delta=0.02, n_resamples=200)
    line = summary_line(near, [("math500", open_, accuracy_verdict(open_)), ("gsm8k", same, accuracy_verdict(same))])
    assert line == (
        head + f"math500 accuracy 95.0 % vs 99.5 %, inconclusive at ±5 points (about {open_.n_to_settle:,} items "
        "would settle it); gsm8k accuracy 87.6 % vs 87.8 %, equivalent within ±2 points"
    )


def test_token_verdict_counts_and_levels_at_its_edges() -> None:
    with pytest.raises(
        ValueError, match="token_verdict needs classified diffs; call evalsuite.diff.classify_all first"
    ):
        token_verdict([sd("a", 3, 0.01)], calibrate([]))
    assert judge([]).level == "none"
    assert judge([sd("a", 3, 0.02), sd("b", 4)]).max_gap == 0.02  # a divergence without a gap is not a NaN max
    text = SampleDiff("t", "text", False, 4, 4, 9, 9)
    assert judge([sd("a", 3, 0.02), text]).level == "ids+text"
    grid = LogitResolution(positions=100, share=1.0, quantized=True, step=0.125, low=0.125, high=0.125)
    th = calibrate([], resolution=grid)
    two = token_verdict(classify_all([sd("a", 3, 0.25), sd("b", 4, 0.05), sd("c", 5, 0.06)], th), th)
    assert two.reason.endswith("threshold 0.1; 1 within 4 steps of the logits' bf16-like grid).")
    flat = LogitResolution(positions=100, share=0.0, quantized=False, step=0.0, low=0.0, high=0.0)
    th = calibrate([], resolution=flat)
    assert token_verdict(classify_all([sd("a", 3, 0.05)], th), th).reason == (
        "1 of 1 outputs diverge, all at near-ties (the tokens chosen at most 0.05 nats apart, threshold 0.1)."
    )


def test_gap_text_says_when_the_candidates_logprobs_gave_the_gap() -> None:
    """Reports name the candidate's logprobs as the gap's source, and say nothing for the baseline's."""
    d = SampleDiff("s", "ids", False, 1, 1, 5, 5, gap=2.25, gap_bound=True, gap_source="candidate")
    assert gap_text(d) == "at least 2.25 nats by the candidate's logprobs"
    assert gap_text(SampleDiff("s", "ids", False, 1, 1, 5, 5, gap=2.25, gap_source="baseline")) == "2.25 nats"


def _control(flips: int, elsewhere: Evidence | None = None) -> ControlProfile:
    diffs = [SampleDiff(f"s{i}", "ids", False, 1, 1, 5, 5, gap=0.02) for i in range(flips)]
    return ControlProfile.from_diffs("control:a", "control", diffs, elsewhere or Evidence())


def test_a_controls_flips_are_counted_in_words_that_agree() -> None:
    """'1 flip', '2 flips'; stored runs compared without a flip still count their samples."""
    assert "; 1 flip in 1 samples)" in calibrate([_control(1)]).source
    assert "; 2 flips in 2 samples)" in calibrate([_control(2)]).source
    stored = calibrate([_control(2, Evidence((), 40, ("gsm8k",)))]).source
    assert "2 flips in 42 samples, 0 of them on stored runs of gsm8k" in stored
