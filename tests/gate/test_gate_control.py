"""The gate's decision where it depends on a number: the near-tie default at its boundary, and a control run.

Each sample has one position whose baseline margin is set by hand; a
candidate (or control) that diverges there takes the baseline's second
choice, so the gap between the tokens chosen is that margin.  The expected
outcomes follow from the rules in docs/diff.md (a divergence is numerical
below 0.1 nats, below what the control's flips allow, or where the control
diverged to the same token), not from the code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from stored_runs import _trace, manifest, write_run

from evalsuite.gate.explain import passes
from evalsuite.gate.plugin import GateState
from evalsuite.gate.runs import GatePair
from evalsuite.records import Completion, Sample, SampleResult
from evalsuite.store import RunStore

TOKENS, POS = 8, 4


def _store(
    root: Path, target: str, role: str, margins: dict[int, float], diverge: set[int], grid: float | None = None
) -> RunStore:
    """A run of len(margins) samples; `margins[i]` is sample i's baseline margin at POS, where `diverge` differs.

    `grid`: the other positions' gaps are odd multiples of it (an engine keeping logits in bf16), else on no grid."""
    results, samples = [], []
    for i, margin in sorted(margins.items()):
        sid = f"s{i:02d}"
        ids = np.arange(TOKENS, dtype=np.int64) + 100 * (i + 1)
        top_ids = np.stack([ids, ids + 5000], axis=1)
        top_lp = np.zeros((TOKENS, 2), dtype=np.float32)
        rng = np.random.default_rng(i)
        if grid is None:
            top_lp[:, 1] = -rng.uniform(3.0, 6.0, TOKENS)  # gaps on no grid: fp32-like logits
        else:
            top_lp[:, 1] = -grid * (2 * rng.integers(12, 24, TOKENS) + 1)
        top_lp[POS, 1] = -np.float32(margin)
        if i in diverge:
            ids = ids.copy()
            ids[POS:] = top_ids[POS:, 1]
            top_ids = np.stack([ids, ids + 1], axis=1)
        trace = _trace(ids, top_ids, top_lp, np.ones(TOKENS, bool))
        results.append(
            SampleResult(sid, "gsm8k", {}, Completion(text="".join(trace.pieces), finish_reason="stop", tokens=trace))
        )
        samples.append(Sample(sid, "gsm8k", ({"role": "user", "content": f"q{i}"},), None, {}))
    man = manifest(target, role, "gsm8k")
    return write_run(root / target / "gsm8k" / man["fingerprint"][:16], man, results, [], samples)


def _gate(cand: RunStore, base: RunStore, control: RunStore | None = None) -> tuple[dict[str, bool], GateState]:
    """What the gate's numerical policy says per sample, through the plugin's own state and its default threshold."""
    controls = (("control", str(control.folder)),) if control is not None else ()
    state = GateState([GatePair("gsm8k", str(cand.folder), str(base.folder), controls)], "numerical", None)
    compared = state.compared(0)
    return {sid: passes(d, state.policy) for sid, d in compared.diffs.items()}, state


def test_the_gates_default_threshold_sits_at_one_tenth_of_a_nat(tmp_path: Path) -> None:
    # float32 logprobs: -0.1 is stored as -0.100000001 (just above 0.1), -0.0999 just below it
    margins = {0: 0.0999, 1: 0.1, 2: 0.037, 3: 0.34, 4: 5.0}
    base = _store(tmp_path, "base", "baseline", margins, set())
    cand = _store(tmp_path, "spec", "candidate", margins, {0, 1, 2, 3})
    verdicts, state = _gate(cand, base)
    assert state.near_tie == 0.1
    assert state.compared(0).thresholds.effective == 0.1
    assert verdicts == {"s00": True, "s01": False, "s02": True, "s03": False, "s04": True}
    assert state.compared(0).diffs["s01"].margin == pytest.approx(0.1, abs=1e-8)


def test_a_control_run_changes_the_gates_outcome(tmp_path: Path) -> None:
    """The control diverges on s01 at a 3-nat gap, the very place the candidate does, and on four more samples.

    Without it, s01, s02 and s03 (3, 5 and 7 nats) are confident divergences and fail. With it, s01 is
    explained by the control (same sample, position and token), and the threshold becomes twice the control's
    largest flip, 6 nats, so s02 at 5 nats passes as well and s03 at 7 nats still fails.
    """
    gaps = {0: 0.03, 1: 3.0, 2: 5.0, 3: 7.0, 4: 0.1, 5: 0.2, 6: 0.3, 7: 0.5}
    base = _store(tmp_path, "base", "baseline", gaps, set())
    cand = _store(tmp_path, "spec", "candidate", gaps, {0, 1, 2, 3})
    control = _store(tmp_path, "ctl", "control", gaps, {1, 4, 5, 6, 7})

    alone, _ = _gate(cand, base)
    assert alone == {f"s{i:02d}": i not in (1, 2, 3) for i in range(8)}

    with_control, state = _gate(cand, base, control)
    assert with_control == {f"s{i:02d}": i != 3 for i in range(8)}
    compared = state.compared(0)
    assert compared.thresholds.effective == pytest.approx(6.0) and not compared.thresholds.thin
    assert compared.diffs["s01"].explained_by == "control:control:ctl"
    assert compared.diffs["s02"].explained_by == "near-tie"
    assert compared.diffs["s03"].kind == "confident"


@pytest.mark.parametrize(("grid", "passing"), [(None, False), (0.125, True)])
def test_a_baseline_on_a_logit_grid_widens_the_tie(tmp_path: Path, grid: float | None, passing: bool) -> None:
    """A 3-step margin (0.375 nats on a 0.125 grid) is a tie that bf16 rounding broke; on fp32 logits it is not.

    Six samples of eight positions give the 32 informative positions a grid needs; s01 diverges at 0.375 nats,
    s02 at 0.625 (five steps, past the four-step limit), s00 at 0.05 (below the near-tie default either way).
    """
    margins = {0: 0.05, 1: 0.375, 2: 0.625, 3: 4.125, 4: 4.125, 5: 4.125}
    base = _store(tmp_path, "base", "baseline", margins, set(), grid)
    cand = _store(tmp_path, "spec", "candidate", margins, {0, 1, 2}, grid)
    verdicts, state = _gate(cand, base)
    assert verdicts == {"s00": True, "s01": passing, "s02": False, "s03": True, "s04": True, "s05": True}
    compared = state.compared(0)
    assert compared.thresholds.effective == 0.1
    assert compared.diffs["s01"].kind == ("numerical" if passing else "confident")
    assert compared.diffs["s01"].explained_by == ("resolution" if passing else None)
