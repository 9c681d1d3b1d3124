"""The lossless verdict on real H200 llama-server recordings (skipped when ../shared/data is absent)."""

from __future__ import annotations

import json

import pytest
from recording_runs import needs_recordings, recording_run

from evalsuite.compare import compare_runs
from evalsuite.diff import DEFAULT_NEAR_TIE_NATS
from evalsuite.errors import NotComparableError

pytestmark = needs_recordings


def test_baseline_is_deterministic() -> None:
    cmp = compare_runs(recording_run("base_f16", 1), recording_run("base_f16", 0))
    assert cmp.token.label == "IDENTICAL"
    assert cmp.summary.startswith("IDENTICAL: 24/24 token-identical")


@pytest.mark.parametrize("name", ["spec_f16_draftq4", "spec_f16_self"])
def test_real_drafters_are_numerical_only_without_a_control(name: str) -> None:
    cmp = compare_runs(recording_run(name), recording_run("base_f16"))
    t = cmp.token
    assert t.label == "NUMERICAL-ONLY", t.reason
    assert (t.identical, t.divergent) == (12, 12)
    assert t.level == "ids"
    divergent = [d for d in cmp.diffs if not d.identical]
    assert all(d.kind == "numerical" and d.explained_by == "near-tie" for d in divergent)
    assert all(0.0 < d.margin < 0.04 and d.margin_source == "baseline" for d in divergent)
    assert all(d.candidate_rank == 2 for d in divergent)  # the baseline's second choice
    assert all(d.gap == d.margin and not d.gap_bound and d.gap_source == "baseline" for d in divergent)
    assert cmp.summary.startswith("NUMERICAL-ONLY: 12/24 token-identical, 12 divergences all at near-ties")


def test_real_drafters_are_numerical_only_with_controls() -> None:
    controls = {"repeat": recording_run("base_f16", 1), "control": recording_run("spec_f16_self")}
    cmp = compare_runs(recording_run("spec_f16_draftq4"), recording_run("base_f16"), controls=controls)
    assert cmp.token.label == "NUMERICAL-ONLY", cmp.token.reason
    assert cmp.token.explained_by_control == 12  # same 12 positions as the perfect-drafter control
    (check,) = cmp.token.rate_checks
    assert (check.candidate_divergent, check.control_divergent) == (12, 12) and not check.more_frequent
    profiles = {c.kind: c for c in cmp.controls}
    assert profiles["repeat"].rate == 0.0 and profiles["control"].rate == 0.5
    # the control's 12 flips (0.002-0.037 nats) allow up to 0.11 nats: a flip at 0.11 is 1 in 100
    assert DEFAULT_NEAR_TIE_NATS < cmp.thresholds.effective < 0.111 and cmp.thresholds.thin


def test_the_control_run_as_its_own_candidate_is_refused() -> None:
    """The perfect-drafter control compared with itself would explain every divergence by construction."""
    controls = {"control": recording_run("spec_f16_self")}
    with pytest.raises(NotComparableError, match="are the same run"):
        compare_runs(recording_run("spec_f16_self"), recording_run("base_f16"), controls=controls)


def test_ngram_drafter_that_drafted_nothing_is_identical() -> None:
    assert compare_runs(recording_run("spec_f16_ngram"), recording_run("base_f16")).token.label == "IDENTICAL"


@pytest.mark.parametrize("with_control", [False, True])
def test_fake_acceptance_is_lossy(with_control: bool) -> None:
    controls = {"control": recording_run("spec_f16_self")} if with_control else None
    cmp = compare_runs(recording_run("synth_f16"), recording_run("base_f16"), controls=controls)
    t = cmp.token
    assert t.label == "LOSSY", t.reason
    assert t.identical == 0 and t.kinds["confident"] >= 20
    assert t.max_gap == pytest.approx(14.75, abs=0.01)
    assert "confident" in t.reason
    if with_control:
        (check,) = t.rate_checks
        assert check.candidate_only == 12 and check.control_only == 0 and check.more_frequent
    assert cmp.summary.startswith("LOSSY: 0/24 token-identical")


def test_json_summary_and_frames_from_real_data() -> None:
    cmp = compare_runs(
        recording_run("spec_f16_draftq4"),
        recording_run("base_f16"),
        controls={"control": recording_run("spec_f16_self")},
    )
    doc = json.loads(cmp.to_json())
    assert doc["schema_version"] == 5
    assert doc["token"]["label"] == "NUMERICAL-ONLY"
    assert [c["kind"] for c in doc["controls"]] == ["control"]
    speedup = doc["speed"]["speedup"]  # the comparison carries the speedup; reports only format it
    assert speedup["n"] == 24 and speedup["geometric_mean"] == pytest.approx(cmp.speed.speedup.geometric_mean)
    assert speedup["low95"] < speedup["geometric_mean"] < speedup["high95"]
    assert set(doc["speed"]["arms"]) == {"baseline", "control", "candidate"}
    assert doc["holm_family"]["size"] == 0  # nothing graded, nothing adjusted
    assert len(doc["divergences"]) == 12
    assert {d["path"] for d in doc["differences"]} >= {"server.args", "target"}
    frame = cmp.samples_frame()
    assert len(frame) == 24 and frame["identical"].sum() == 12
    assert frame.loc["gsm8k-test-0", "first_divergence"] == 82
    assert "[baseline:" in frame.loc["gsm8k-test-0", "window"]
    assert cmp.accuracy == [] and "accuracy not graded" in cmp.summary
