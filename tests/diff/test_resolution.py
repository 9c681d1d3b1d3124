"""The logit grid read off logprobs: bf16-like runs widen the near-tie threshold by whole grid steps, fp32 runs don't.

The traces are built the way an engine produces them: logits rounded to
bf16 (or kept in fp32), then a float32 log-softmax, the top five kept.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsuite.compare import compare_runs
from evalsuite.diff import LogitResolution, SampleDiff, calibrate, classify, diff_completions, logit_resolution
from evalsuite.diff.resolution import (
    COARSEST_EXPONENT,
    FINEST_EXPONENT,
    GAP_TOLERANCE,
    MIN_POSITIONS,
    position_steps,
)
from evalsuite.engines.parse import trace_from_entries
from evalsuite.records import Completion, SampleResult, TokenTrace
from evalsuite.store import MemoryRun
from evalsuite.verdict import token_verdict

VOCAB = 64
TOP = 5


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bf16 (ties to even), as an engine's bf16 matmul output is."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def log_softmax32(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float32)
    m = z.max()
    return (z - (m + np.log(np.exp(z - m, dtype=np.float32).sum(dtype=np.float32)))).astype(np.float32)


def logit_rows(n: int, seed: int, *, bf16: bool) -> np.ndarray:
    """`n` positions of logits between 16 and 32 (bf16 spacing 0.125 there), each with a clear winner."""
    rng = np.random.default_rng(seed)
    rows = rng.uniform(16.0, 22.0, size=(n, VOCAB)).astype(np.float32)
    rows[np.arange(n), rng.integers(0, VOCAB, n)] = rng.uniform(27.0, 30.0, n).astype(np.float32)
    return to_bf16(rows) if bf16 else rows


def entries(rows: np.ndarray) -> list[dict]:
    out = []
    for row in rows:
        lp = log_softmax32(row)
        top = np.argsort(-lp, kind="stable")[:TOP]
        alts = [{"id": int(t), "token": f"<{t}>", "logprob": float(lp[t])} for t in top]
        out.append({"id": int(top[0]), "token": f"<{top[0]}>", "logprob": float(lp[top[0]]), "top_logprobs": alts})
    return out


def completion(rows: np.ndarray) -> Completion:
    trace = trace_from_entries(entries(rows))
    return Completion(text="".join(trace.pieces), finish_reason="stop", tokens=trace)


def with_margin(row: np.ndarray, margin: float) -> np.ndarray:
    """The row with its runner-up placed `margin` nats below the top logit (both on the row's grid)."""
    row = row.copy()
    top, second = np.argsort(-row, kind="stable")[:2]
    row[second] = row[top] - np.float32(margin)
    return row


def test_bf16_logits_are_seen_on_their_grid_and_fp32_logits_are_not() -> None:
    bf = logit_resolution([completion(logit_rows(200, 1, bf16=True)).tokens])
    fp = logit_resolution([completion(logit_rows(200, 1, bf16=False)).tokens])
    assert bf.quantized and bf.share > 0.95 and bf.step == pytest.approx(0.125)
    assert "0.125" in bf.description and "bf16" in bf.description
    assert not fp.quantized and fp.share < 0.05
    assert fp.tie_limit(0.125) == 0.0


def test_position_steps_reads_the_coarsest_grid_and_marks_what_it_cannot_judge() -> None:
    rows = np.array(
        [
            [-0.1, -0.35, -0.6, -1.1, -2.1],  # gaps 0.25, 0.5, 1.0, 2.0: every gap a multiple of 0.25
            [-0.1, -0.2374, -0.913, -1.77, -3.3],  # fp32-like gaps
            [-0.5, -0.5, np.nan, np.nan, np.nan],  # a tie and nothing else: no gap to judge
        ],
        dtype=np.float32,
    )
    steps = position_steps(rows)
    assert steps[0] == 0.25 and steps[1] == 0.0 and math.isnan(steps[2])


def test_too_few_positions_are_no_evidence() -> None:
    few = logit_resolution([completion(logit_rows(MIN_POSITIONS - 1, 2, bf16=True)).tokens])
    assert not few.quantized and few.share > 0.95


def _diff(gap: float, step: float) -> SampleDiff:
    return SampleDiff("s", "ids", False, 3, 3, 10, 10, gap=gap, grid_step=step, candidate_token_id=5)


@pytest.mark.parametrize(
    ("margin", "kind"),
    [
        (0.0, "numerical"),
        (0.125, "numerical"),
        (0.25, "numerical"),
        (0.5, "numerical"),  # four steps of 0.125: the boundary itself is a tie
        (float(np.float32(-0.8315) - np.float32(-1.3315)), "numerical"),  # 0.50000006: the same, read from float32
        (0.625, "confident"),  # one step beyond it is not
        (1.0, "confident"),
    ],
)
def test_a_bf16_baseline_makes_margins_within_four_steps_ties(margin: float, kind: str) -> None:
    res = logit_resolution([completion(logit_rows(200, 3, bf16=True)).tokens])
    th = calibrate([], resolution=res)
    got = classify(_diff(margin, 0.125), th)
    assert got.kind == kind
    if kind == "numerical" and margin >= th.effective:
        assert got.explained_by == "resolution"


def test_a_continuous_baseline_keeps_the_default_threshold() -> None:
    res = logit_resolution([completion(logit_rows(200, 3, bf16=False)).tokens])
    th = calibrate([], resolution=res)
    assert classify(_diff(0.25, 0.125), th).kind == "confident"
    assert classify(_diff(0.5, 0.125), th).kind == "confident"
    assert classify(_diff(0.05, math.nan), th).kind == "numerical"


def test_a_position_that_looks_coarse_by_chance_is_capped_at_the_runs_common_step() -> None:
    res = logit_resolution([completion(logit_rows(300, 4, bf16=True)).tokens])
    th = calibrate([], resolution=res)
    # A position whose five gaps happened to be multiples of 1 nat would allow 4 nats; the cap keeps 4 x 0.125.
    assert res.step == 0.125
    assert th.tie_limit(_diff(1.5, 1.0)) == pytest.approx(0.5, abs=1e-3)
    assert classify(_diff(1.5, 1.0), th).kind == "confident"


def test_diff_records_the_grid_step_at_the_divergence() -> None:
    rows = logit_rows(8, 5, bf16=True)
    base_rows = rows.copy()
    base_rows[4] = with_margin(rows[4], 0.25)
    base = completion(base_rows)
    cand_entries = entries(base_rows)
    second = cand_entries[4]["top_logprobs"][1]
    cand_entries[4] = {**cand_entries[4], "id": second["id"], "token": second["token"]}
    cand_trace = trace_from_entries(cand_entries)
    cand = Completion(text="".join(cand_trace.pieces), finish_reason="stop", tokens=cand_trace)
    d = diff_completions("s", cand, base)
    assert d.first_divergence == 4 and d.margin == pytest.approx(0.25, abs=1e-5) and d.gap == d.margin
    assert d.grid_step == pytest.approx(0.125) or d.grid_step == pytest.approx(0.25)


FIELDS = {
    "task": "gsm8k",
    "prompt_template": "t",
    "params": {"max_tokens": 64, "temperature": 0.0, "seed": 42},
    "dataset": {"revision": "main", "rows": 40},
    "server": {"model": "smollm2", "build_info": "0.32.0"},
}


def _run(name: str, completions: dict[str, Completion]) -> MemoryRun:
    results = {sid: SampleResult(sid, "gsm8k", {}, c) for sid, c in completions.items()}
    fields = {**FIELDS, "target": name}
    manifest = {"fingerprint": f"fp-{name}", "fingerprint_fields": fields, "target": name, "task": "gsm8k"}
    return MemoryRun(manifest, results)


def _pair(bf16: bool, margins: dict[int, float]) -> tuple[MemoryRun, MemoryRun]:
    """A baseline of 40 samples and a candidate that takes the runner-up where `margins` puts one."""
    base, cand = {}, {}
    for i in range(40):
        rows = logit_rows(16, 100 + i, bf16=bf16)
        if i in margins:
            rows[6] = with_margin(rows[6], margins[i])
        sid = f"g{i:02d}"
        base[sid] = completion(rows)
        ce = entries(rows)
        if i in margins:
            alt = ce[6]["top_logprobs"][1]
            ce = ce[:6] + [{**ce[6], "id": alt["id"], "token": alt["token"]}]
        trace = trace_from_entries(ce)
        cand[sid] = Completion(text="".join(trace.pieces), finish_reason="stop", tokens=trace)
    return _run("cand", cand), _run("base", base)


def test_compare_without_a_control_calls_bf16_rounding_ties_numerical_and_says_why() -> None:
    cand, base = _pair(True, {3: 0.0, 7: 0.125, 11: 0.25})
    c = compare_runs(cand, base)
    assert c.token.label == "NUMERICAL-ONLY", c.token.reason
    assert c.thresholds.resolution is not None and c.thresholds.resolution.quantized
    assert "steps of 0.125 nats" in c.thresholds.source
    assert "grid" in c.token.reason
    payload = c.to_json()
    assert '"resolution"' in payload and '"quantized": true' in payload


def test_compare_still_calls_whole_nat_margins_on_a_bf16_engine_lossy() -> None:
    cand, base = _pair(True, {3: 0.125, 7: 2.0})
    c = compare_runs(cand, base)
    assert c.token.label == "LOSSY" and "2 nats" in c.token.reason
    assert "grid" in c.token.reason


def test_compare_on_fp32_logits_is_unchanged_by_the_rule() -> None:
    cand, base = _pair(False, {3: 0.01, 7: 0.25})
    c = compare_runs(cand, base)
    assert c.thresholds.resolution is not None and not c.thresholds.resolution.quantized
    assert c.token.label == "LOSSY"


def test_verdict_counts_resolution_ties_apart() -> None:
    res = logit_resolution([completion(logit_rows(200, 6, bf16=True)).tokens])
    th = calibrate([], resolution=res)
    diffs = [classify(_diff(0.25, 0.125), th), classify(_diff(0.05, 0.125), th)]
    v = token_verdict(diffs, th)
    assert v.label == "NUMERICAL-ONLY" and "1 within 4 steps" in v.reason


def test_a_grid_coarser_than_bf16_makes_is_read_as_its_coarsest_step() -> None:
    """Gaps of whole nats (hand-written logprobs, or logits past 64) never let a tie span more than 1 nat."""
    rows = np.array([[-0.05 - 3.0 * j for j in range(TOP)] for _ in range(64)], dtype=np.float32)
    res = logit_resolution(
        [
            trace_from_entries(
                [
                    {
                        "token": "x",
                        "logprob": float(r[0]),
                        "top_logprobs": [{"token": f"t{j}", "logprob": float(v)} for j, v in enumerate(r)],
                    }
                    for r in rows
                ]
            )
        ]
    )
    assert res.quantized and res.step == 0.25
    th = calibrate([], resolution=res)
    assert classify(_diff(1.0, 1.0), th).kind == "numerical"
    assert classify(_diff(3.0, 1.0), th).kind == "confident"


def _grid_trace(on_grid: int, off_grid: int) -> TokenTrace:
    """Positions whose top-3 gaps are exact multiples of 0.125 nats, then positions on no grid."""
    rows = [[-0.125, -0.25, -1.125] for _ in range(on_grid)] + [[-0.1, -0.2374, -0.913] for _ in range(off_grid)]
    return trace_from_entries(
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


@pytest.mark.parametrize(
    ("on_grid", "off_grid", "quantized"),
    [
        (MIN_POSITIONS, 0, True),  # exactly the positions needed
        (MIN_POSITIONS - 1, 0, False),
        (36, 4, True),  # exactly 90 % on the grid
        (35, 5, False),
    ],
)
def test_the_grid_needs_32_positions_and_90_percent_of_them_inclusive(
    on_grid: int, off_grid: int, quantized: bool
) -> None:
    res = logit_resolution([_grid_trace(on_grid, off_grid)])
    assert res.positions == on_grid + off_grid and res.share == on_grid / (on_grid + off_grid)
    assert res.quantized is quantized
    assert res.step == 0.125 and (res.low, res.high) == (0.125, 0.125)


def test_no_evidence_gives_an_empty_resolution_and_off_grid_runs_say_so() -> None:
    empty = LogitResolution(0, 0.0, False, 0.0, 0.0, 0.0, 4.0)
    assert logit_resolution([]) == empty
    assert logit_resolution([None]) == empty
    assert logit_resolution([None, _grid_trace(40, 0)]).quantized
    off = logit_resolution([_grid_trace(0, 40)])
    assert (off.positions, off.share, off.quantized, off.step, off.alternatives) == (40, 0.0, False, 0.0, 3)
    assert "lie on no coarse grid" in off.description
    assert logit_resolution([_grid_trace(0, 40)], steps=2.0).steps == 2.0


def test_position_steps_at_its_edges() -> None:
    rows = np.array(
        [
            [0.0, -2.0, -4.0],  # multiples of 2 nats: 0.25, bf16's step below 64, is the coarsest tried
            [0.0, -1.0, -3.0],
            [0.0, -0.5, np.nan],  # a padded slot is not a gap
            [-0.5, -1.0, -np.inf],
        ],
        dtype=np.float32,
    )
    assert position_steps(rows).tolist() == [0.25, 0.25, 0.25, 0.25]
    assert position_steps(np.array([[0.0, -0.125]])).tolist() == [0.125]  # two alternatives are enough
    assert np.isnan(position_steps(np.zeros((3, 1)))).all() and len(position_steps(np.zeros((3, 1)))) == 3
    assert len(position_steps(np.zeros((0, 5)))) == 0


def _reference_resolution(traces: list[TokenTrace]) -> tuple[int, float, float, float, float]:
    """The resolution's figures from every position's step at once: the most common step (the finer on a tie)."""
    found = np.concatenate([position_steps(t.top_logprobs[t.has_top]) for t in traces])
    judged = found[np.isfinite(found)]
    on_grid = judged[judged > 0]
    values, counts = np.unique(on_grid, return_counts=True)
    common = float(values[np.flatnonzero(counts == counts.max())[0]])
    return len(judged), len(on_grid) / len(judged), common, on_grid.min(), on_grid.max()


@pytest.mark.parametrize("seed", range(6))
def test_the_resolution_tallied_trace_by_trace_equals_numpy_over_the_whole_run(seed: int) -> None:
    """Compare streams the baseline one sample at a time; its figures must be those of the whole run at once."""
    rng = np.random.default_rng(seed)
    traces = []
    for _ in range(int(rng.integers(2, 6))):
        n = int(rng.integers(1, 60))
        exponents = rng.integers(2, 11, size=(n, 1))  # each position on its own grid, 2^-2 .. 2^-10
        gaps = rng.integers(1, 9, size=(n, TOP - 1)) * 2.0 ** -exponents.astype(float)
        rows = np.concatenate([np.zeros((n, 1)), -np.cumsum(gaps, axis=1)], axis=1) - 0.5
        rows[rng.random(n) < 0.2, 1:] += rng.uniform(0.001, 0.002)  # some positions off every grid
        traces.append(_grid_trace_of(rows.astype(np.float32)))
    res = logit_resolution(traces)
    assert (res.positions, res.share, res.step, res.low, res.high) == _reference_resolution(traces)


def _grid_trace_of(top_logprobs: np.ndarray) -> TokenTrace:
    n = len(top_logprobs)
    ids = np.arange(n, dtype=np.int64)
    top_ids = np.tile(np.arange(top_logprobs.shape[1], dtype=np.int64), (n, 1))
    return TokenTrace(ids, [], [], top_logprobs[:, 0].copy(), top_ids, top_logprobs, [])


@pytest.mark.parametrize(
    ("steps", "common"),
    [
        ([0.125] * 2 + [0.25] * 3, 0.25),
        ([0.125] * 3 + [0.25] * 2, 0.125),
        ([0.125] * 2 + [0.25] * 2, 0.125),  # a tie goes to the finer step
        ([0.0625, 0.125, 0.25, 0.25, 0.25, 0.25, 0.25], 0.25),
        ([0.03125, 0.0625, 0.125, 0.25], 0.03125),
    ],
)
def test_the_runs_step_is_the_most_common_one_and_a_tie_goes_to_the_finer(steps: list[float], common: float) -> None:
    """Each row's only gap is three steps (odd, so the step is exactly that power of two)."""
    rows = np.array([[0.0, -3 * step] for step in steps], dtype=np.float32)
    np.testing.assert_array_equal(position_steps(rows), steps)
    got = logit_resolution([_grid_trace_of(rows)])
    assert got.step == common and (got.low, got.high) == (min(steps), max(steps))


def _stepwise_steps(top_logprobs: np.ndarray) -> np.ndarray:
    """`position_steps` by its definition: each step from the finest to the coarsest tried, in turn, while every
    gap of a position still lies within GAP_TOLERANCE of one of its multiples."""
    rows = np.asarray(top_logprobs, dtype=np.float64)
    rows = np.where(np.isfinite(rows), rows, -np.inf)
    gaps = rows.max(axis=1, keepdims=True) - rows
    usable = np.isfinite(gaps) & (gaps > GAP_TOLERANCE)
    gaps = np.where(usable, gaps, 0.0)
    steps = np.where(usable.any(axis=1), 0.0, np.nan)
    still = usable.any(axis=1)  # fits every step tried so far
    for exponent in range(FINEST_EXPONENT, COARSEST_EXPONENT - 1, -1):
        step = 2.0**-exponent
        still &= (np.abs(gaps - np.round(gaps / step) * step) <= GAP_TOLERANCE).all(axis=1)
        steps[still] = step
    return steps


_GAP = st.one_of(
    st.integers(1, 5000).map(lambda n: n * 2.0**-FINEST_EXPONENT),  # on some grid, any multiple
    st.sampled_from([0.25, 0.5, 2.0, 64.0, 2.0**40, 2.0**60, 1e300, 1.7e308]),  # coarser than the coarsest step tried
    st.floats(0.0, 50.0),  # anywhere
    st.sampled_from([GAP_TOLERANCE, 2 * GAP_TOLERANCE, 0.5 * 2.0**-FINEST_EXPONENT]),  # the edges
)
_NUDGE = st.sampled_from([0.0, 0.0, 0.0, GAP_TOLERANCE, -GAP_TOLERANCE, 0.99 * GAP_TOLERANCE, 1e-6, -3e-5])
_EMPTY = st.sampled_from([np.nan, -np.inf, np.inf])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(-40.0, 0.0),
            st.lists(st.one_of(st.tuples(_GAP, _NUDGE), _EMPTY), min_size=1, max_size=5),
        ),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([np.float32, np.float64]),
)
def test_position_steps_is_the_step_by_step_definition_exactly(positions: list, dtype: type) -> None:
    """The grid read off each fitting gap's whole number of finest steps is the grid the steps tried one at a
    time find, on any values: grids of every coarseness, gaps near the tolerance, off every grid, huge,
    padded, infinite."""
    width = 1 + max(len(alts) for _, alts in positions)
    rows = np.full((len(positions), width), np.nan)
    for i, (top, alts) in enumerate(positions):
        rows[i, 0] = top
        for j, alt in enumerate(alts, start=1):
            rows[i, j] = alt if isinstance(alt, float) else top - alt[0] - alt[1]
    with np.errstate(over="ignore", invalid="ignore"):
        rows = rows.astype(dtype)
        np.testing.assert_array_equal(position_steps(rows), _stepwise_steps(rows))
