"""The logit-grid rule where evidence could widen it by chance: two alternatives, fp16, a few coarse positions
among fine ones, and logprobs a server rounded to a few decimals.

Each run is built as an engine builds it: logits rounded to bf16 (or fp16), a float32 log-softmax, the top
k kept; the candidate takes the baseline's runner-up at one position, placed a chosen number of steps down.
"""

from __future__ import annotations

import numpy as np
import pytest

from evalsuite.diff import calibrate, classify, diff_completions, logit_resolution
from evalsuite.diff.resolution import EXACT, FINEST_EXPONENT, Reading, ResolutionTally, position_steps, step_at
from evalsuite.engines.parse import trace_from_entries
from evalsuite.records import Completion

VOCAB = 48
AT = 20
"""The position where the candidate diverges."""


def to_bf16(x: np.ndarray) -> np.ndarray:
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def to_fp16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def logits(n: int, seed: int, low: float, high: float, rounding=to_bf16) -> np.ndarray:  # type: ignore[no-untyped-def]
    """`n` positions of logits between `low` and `high`, each with a clear winner near the top of the range."""
    rng = np.random.default_rng(seed)
    rows = rng.uniform(low, low + (high - low) * 0.4, size=(n, VOCAB)).astype(np.float32)
    rows[np.arange(n), rng.integers(0, VOCAB, n)] = rng.uniform(low + (high - low) * 0.7, high * 0.97, n)
    return rounding(rows)


def runner_up(row: np.ndarray, gap: float) -> np.ndarray:
    """The row with its runner-up `gap` below the top logit (both on the row's grid when `gap` is)."""
    row = row.copy()
    top, second = np.argsort(-row, kind="stable")[:2]
    row[second] = row[top] - np.float32(gap)
    return row


def entries(rows: np.ndarray, k: int, decimals: int | None = None) -> list[dict]:
    out = []
    for row in rows:
        z = row.astype(np.float32)
        lp = (z - (z.max() + np.log(np.exp(z - z.max(), dtype=np.float32).sum(dtype=np.float32)))).astype(np.float32)
        if decimals is not None:
            lp = np.round(lp.astype(np.float64), decimals).astype(np.float32)
        top = np.argsort(-lp, kind="stable")[:k]
        alts = [{"id": int(t), "token": f"<{t}>", "logprob": float(lp[t])} for t in top]
        out.append({"id": int(top[0]), "token": f"<{top[0]}>", "logprob": float(lp[top[0]]), "top_logprobs": alts})
    return out


def pair(rows: np.ndarray, gap: float, k: int, decimals: int | None = None) -> tuple[Completion, Completion]:
    """(candidate, baseline): the baseline's runner-up at `AT` placed `gap` below its token, taken by the candidate."""
    rows = rows.copy()
    rows[AT] = runner_up(rows[AT], gap)
    base = entries(rows, k, decimals)
    cand = [dict(e) for e in base]
    second = base[AT]["top_logprobs"][1]
    cand[AT] = {**base[AT], "id": second["id"], "token": second["token"], "logprob": second["logprob"]}
    return completion(cand), completion(base)


def completion(items: list[dict]) -> Completion:
    trace = trace_from_entries(items)
    return Completion(text="".join(trace.pieces), finish_reason="stop", tokens=trace)


def judged(cand: Completion, base: Completion) -> tuple[str, str | None, float]:
    th = calibrate([], resolution=logit_resolution([base.tokens]))
    d = classify(diff_completions("s", cand, base), th)
    assert d.first_divergence == AT
    return d.kind or "", d.explained_by, d.gap


@pytest.mark.parametrize(("steps", "kind"), [(2, "numerical"), (4, "numerical"), (5, "confident"), (8, "confident")])
def test_with_two_alternatives_the_step_is_the_runs_not_the_judged_gaps(steps: int, kind: str) -> None:
    """With top-2 a position's only gap is the one judged: 8 steps of 0.125 (1 nat) fit 0.25, the coarsest step,
    and would allow 4 x 0.25.  The run's common step, read over every position, is 0.125."""
    cand, base = pair(logits(200, 1, 16.0, 32.0), 0.125 * steps, k=2)
    res = logit_resolution([base.tokens])
    assert res.quantized and res.step == 0.125 and res.alternatives == 2
    assert "with 2 alternatives" in res.description
    got, how, gap = judged(cand, base)
    assert gap == pytest.approx(0.125 * steps, abs=1e-5) and got == kind
    if kind == "numerical" and gap >= 0.1:
        assert how == "resolution"


@pytest.mark.parametrize("k", [2, 5])
def test_fp16_logits_lie_on_a_grid_too_fine_to_excuse_half_a_nat(k: int) -> None:
    """fp16 spacing between 16 and 32 is 2^-6: four steps are 0.0625 nats, inside the 0.1-nat default."""
    rows = logits(200, 2, 16.0, 32.0, rounding=to_fp16)
    res = logit_resolution([pair(rows, 0.5, k)[1].tokens])
    assert res.quantized and res.step == 2.0**-6
    for gap, kind in ((0.5, "confident"), (0.75, "confident"), (4 * 2.0**-6, "numerical")):
        assert judged(*pair(rows, gap, k))[0] == kind, gap


def test_a_few_coarse_positions_do_not_widen_the_limit_at_the_fine_ones() -> None:
    """12 % of positions have logits past 32 (step 0.25): the run's common step stays 0.125, and a divergence
    at a 0.125 position whose other gaps happen to be multiples of 0.25 is held to 4 x 0.125."""
    fine, coarse = logits(176, 3, 16.0, 32.0), logits(24, 4, 32.0, 64.0)
    rows = np.concatenate([fine, coarse])
    top = int(np.argmax(rows[AT]))
    others = [j for j in np.argsort(-rows[AT], kind="stable") if j != top][1:4]
    for n, j in enumerate(others, start=1):  # its other listed gaps: 1, 2 and 3 nats, all on the 0.25 grid
        rows[AT, j] = rows[AT, top] - np.float32(n + 0.5 if n == 3 else n)
    cand, base = pair(rows, 0.75, k=5)
    res = logit_resolution([base.tokens])
    assert res.quantized and res.step == 0.125 and res.high == 0.25
    assert diff_completions("s", cand, base).grid_step == 0.25  # the position's own gaps read coarse
    assert judged(cand, base)[0] == "confident"  # 6 steps of 0.125, not 3 of 0.25
    assert judged(*pair(rows, 0.5, k=5))[:2] == ("numerical", "resolution")


@pytest.mark.parametrize("decimals", [2, 3, 4])
def test_logprobs_rounded_to_a_few_decimals_are_read_within_the_rounding(decimals: int) -> None:
    rows = logits(200, 5, 16.0, 32.0)
    res = logit_resolution([pair(rows, 0.25, 5, decimals)[1].tokens])
    assert res.quantized and res.decimals == decimals and res.step == 0.125
    assert f"rounded to {decimals} decimals" in res.description
    assert judged(*pair(rows, 0.25, 5, decimals))[:2] == ("numerical", "resolution")
    assert judged(*pair(rows, 1.0, 5, decimals))[0] == "confident"


def test_logprobs_rounded_to_one_decimal_show_no_grid_and_say_so() -> None:
    rows = logits(200, 6, 16.0, 32.0)
    cand, base = pair(rows, 0.25, 5, 1)
    res = logit_resolution([base.tokens])
    assert res.unreadable and not res.quantized and res.decimals == 1
    assert "rounded to 1 decimal, too coarse to show the grid" in res.description
    th = calibrate([], resolution=res)
    assert res.description in th.source
    assert classify(diff_completions("s", cand, base), th).kind == "confident"


def test_fp32_logits_rounded_to_three_decimals_show_no_grid() -> None:
    rows = logits(200, 7, 16.0, 32.0, rounding=lambda x: x)
    res = logit_resolution([pair(rows, 0.25, 5, 3)[1].tokens])
    assert not res.quantized and res.decimals == 3 and res.share < 0.2


@pytest.mark.parametrize("decimals", [1, 2, 3, 4])
def test_a_roundings_finest_step_is_the_finest_power_of_two_over_twice_its_tolerance(decimals: int) -> None:
    """One nearest multiple per gap needs a finest step over twice the tolerance, and no finer step is tried than
    that (nor than the finest grid at all)."""
    r = Reading.rounded_to(decimals)
    assert r.decimals == decimals and r.tolerance == pytest.approx(10.0**-decimals + 1e-5, rel=1e-9)
    assert 2.0**-r.finest > 2 * r.tolerance
    assert r.finest == FINEST_EXPONENT or 2.0 ** -(r.finest + 1) <= 2 * r.tolerance


def test_a_gap_one_unit_of_the_last_decimal_off_the_grid_still_fits_it() -> None:
    """Two logprobs rounded to 4 decimals put their gap up to 1e-4 off the grid, and a little more after float32
    storage: 0.125 + 1.095e-4 is still on the 0.125 grid, 0.125 + 1.2e-4 is not."""
    reading = Reading.rounded_to(4)
    assert position_steps(np.array([[0.0, -(0.125 + 1.095e-4)]]), reading)[0] == 0.125
    assert position_steps(np.array([[0.0, -(0.125 + 1.2e-4)]]), reading)[0] == 0.0


def rounded_trace(n: int = 40) -> list[dict]:
    """A trace whose logprobs a server rounded to 3 decimals: a 0.125-nat gap shows as 0.126."""
    alts = [{"id": 1, "token": "<1>", "logprob": -0.1}, {"id": 2, "token": "<2>", "logprob": -0.226}]
    return [{"id": 1, "token": "<1>", "logprob": -0.1, "top_logprobs": alts} for _ in range(n)]


def test_a_positions_step_is_read_within_its_traces_rounding() -> None:
    """Read exactly, 0.126 fits only the finest grid; read within the 3-decimal rounding it is the 0.125 step."""
    trace = trace_from_entries(rounded_trace())
    assert step_at(trace, 0) == 0.125
    assert position_steps(trace.top_logprobs[:1], EXACT)[0] == 2.0**-FINEST_EXPONENT


def exact_trace(n: int = 40, seed: int = 0) -> list[dict]:
    """A trace of unrounded logprobs."""
    return entries(logits(n, seed, 20.0, 30.0), 5)


def test_a_run_is_read_the_way_most_of_its_traces_are() -> None:
    """Two exact traces outvote one rounded one, and two rounded ones outvote one exact; the run's tolerance is
    the reading's that won."""
    tally = ResolutionTally()
    for items in (exact_trace(seed=1), exact_trace(seed=2), rounded_trace()):
        tally.add(trace_from_entries(items))
    res = tally.result()
    assert res.decimals is None and res.tolerance == EXACT.tolerance
    tally = ResolutionTally()
    for items in (rounded_trace(), exact_trace(seed=1), rounded_trace()):
        tally.add(trace_from_entries(items))
    res = tally.result()
    assert res.decimals == 3 and res.tolerance == pytest.approx(Reading.rounded_to(3).tolerance)
