"""Figures of a speed run: per cell (workload, concurrency, arm) and paired speedups per cell.

Per cell: decode tokens/s per request (one definition, `speed.measure.
TOKENS_PER_S_DEFINITION`), system output throughput (all output tokens over
the wall time the cell's steps took: what a server with several slots
delivers), TTFT, inter-token latency and the gaps between streamed chunks
with p50/p90/p99, end-to-end latency, draft acceptance and mean accepted
length as the engine reports it (`Engine.request_speculation`, e.g.
llama.cpp `timings`, or `Engine.counter_speculation` over the counters read
around each step, e.g. vLLM's `/metrics`), and the agreement of the client's decode
rate with the engine's own.  Outliers (MAD rule on log tokens/s within the
cell) are listed and left out of the figures; a pair with an outlier in
either arm is left out of the speedup.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from evalsuite.engines import Speculation, counter_speculation, request_speculation
from evalsuite.records import Completion
from evalsuite.serialize import to_jsonable
from evalsuite.speed.measure import TOKENS_PER_S_DEFINITION
from evalsuite.speed.robust import mad_outliers, percentiles, ratio_estimate
from evalsuite.speedrun.client import Measurement
from evalsuite.speedrun.session import TURN_PREFIX, parting

VERSION = 1
CellKey = tuple[str, int, str]


def _median(values: Iterable[float]) -> float:
    arr = np.asarray([v for v in values if math.isfinite(v)], dtype=np.float64)
    return float(np.median(arr)) if len(arr) else math.nan


def _wall(ms: Sequence[Measurement]) -> float:
    """Wall time of the steps these requests belong to: per repetition, first send to last answer, summed."""
    by_rep: dict[int, list[Measurement]] = defaultdict(list)
    for m in ms:
        by_rep[m.rep].append(m)
    return sum(max(m.started_at + m.latency_s for m in g) - min(m.started_at for m in g) for g in by_rep.values())


def split_outliers(ms: Sequence[Measurement]) -> tuple[list[Measurement], list[Measurement]]:
    """(kept, outliers) by the MAD rule on decode tokens/s."""
    flags = mad_outliers([m.tokens_per_s for m in ms])
    return [m for m, f in zip(ms, flags) if not f], [m for m, f in zip(ms, flags) if f]


def _speculation(m: Measurement) -> Speculation | None:
    """The request's drafting as its engine reports it in the streamed `timings`."""
    return request_speculation(Completion("", m.finish_reason, timings=m.timings))


def speculation_totals(kept: Sequence[Measurement], steps: Sequence[Measurement]) -> dict[str, Any]:
    """Acceptance and mean accepted length (tau) over requests: from each request's own report (llama.cpp
    `timings`) of `kept`, else from the counters read around the `steps` they belong to (vLLM `/metrics`)."""
    per_request = [_speculation(m) for m in kept]
    counts = [x for x in per_request if x is not None and x.drafted is not None and x.accepted is not None]
    drafted = float(sum(x.drafted or 0 for x in counts))
    accepted = float(sum(x.accepted or 0 for x in counts))
    predicted = float(sum(x.predicted or 0 for x in counts))
    acceptance = accepted / drafted if drafted > 0 else math.nan
    tau = predicted / (predicted - accepted) if drafted > 0 and predicted > accepted else math.nan
    source = counts[0].source if drafted > 0 else None
    counters = [m.counters for m in steps if m.counters]  # vLLM: deltas over whole steps, outliers included
    counted = [counter_speculation(dict.fromkeys(c, 0.0), c) for c in counters]  # stored as deltas already
    spec = [c for c in counted if c is not None]
    if drafted == 0 and spec:
        total = sum(spec[1:], spec[0])
        acceptance, tau = total.acceptance_rate, total.mean_accepted_length
        drafted, source = total.draft_tokens, total.source
    return {"acceptance": acceptance, "mean_accepted_length": tau, "drafted": drafted, "acceptance_source": source}


def cell_figures(ms: Sequence[Measurement]) -> dict[str, Any]:
    """Every figure of one cell from its successful requests."""
    kept, out = split_outliers(ms)
    engine = [(m.tokens_per_s, m.engine_tokens_per_s) for m in kept]
    agree = [c / e for c, e in engine if math.isfinite(c) and math.isfinite(e) and e > 0]
    wall = _wall(kept)
    return {
        "n": len(ms),
        "outliers": len(out),
        "prompt_tokens": _median(m.prompt_tokens for m in kept),
        "output_tokens": _median(m.output_tokens for m in kept),
        "tokens_per_s": _median(m.tokens_per_s for m in kept),
        "tokens_per_s_pct": percentiles(m.tokens_per_s for m in kept),
        "engine_tokens_per_s": _median(e for _, e in engine),
        "client_over_engine": _median(agree),
        "system_tokens_per_s": sum(m.output_tokens for m in kept) / wall if wall > 0 else math.nan,
        "ttft_s": percentiles(m.ttft_s for m in kept),
        "itl_s": percentiles(m.itl_s for m in kept),
        "chunk_gap_s": percentiles(g for m in kept for g in m.gaps_s),
        "latency_s": percentiles(m.latency_s for m in kept),
        **speculation_totals(kept, ms),
    }


def analyze(
    record_plan: dict[str, Any],
    servers: dict[str, Any],
    notes: list[str],
    measurements: Sequence[Measurement],
    *,
    seed: int = 0,
) -> dict[str, Any]:
    """The speed run's summary as plain JSON-ready data (see the module docstring)."""
    ok = [m for m in measurements if m.error is None and m.arm in ("baseline", "candidate")]
    failed = [m for m in measurements if m.error is not None and m.arm in ("baseline", "candidate")]
    cells: dict[CellKey, list[Measurement]] = defaultdict(list)
    for m in ok:
        cells[(m.workload, m.concurrency, m.arm)].append(m)
    rows, outliers, speedups = [], [], []
    flagged: set[tuple[str, tuple[str, int, int, int]]] = set()
    for (workload, conc, arm), ms in sorted(cells.items(), key=lambda kv: (_order(kv[0][0]), kv[0][1], kv[0][2])):
        rows.append({"workload": workload, "concurrency": conc, "arm": arm, **cell_figures(ms)})
        for m in split_outliers(ms)[1]:
            flagged.add((arm, m.key))
            outliers.append(
                {
                    "workload": workload,
                    "concurrency": conc,
                    "arm": arm,
                    "rep": m.rep,
                    "slot": m.slot,
                    "tokens_per_s": m.tokens_per_s,
                    "cell_median": _median(x.tokens_per_s for x in ms),
                }
            )
    groups = sorted({(w, c) for w, c, _ in cells}, key=lambda wc: (_order(wc[0]), wc[1]))
    pooled: list[float] = []  # every kept pair at concurrency 1, across workloads
    for workload, conc in groups:
        base = {m.key: m for m in cells.get((workload, conc, "baseline"), [])}
        cand = {m.key: m for m in cells.get((workload, conc, "candidate"), [])}
        keys = [
            k
            for k in sorted(base.keys() & cand.keys())
            if ("baseline", k) not in flagged and ("candidate", k) not in flagged
        ]
        ratios = [cand[k].tokens_per_s / base[k].tokens_per_s for k in keys]
        decode = ratio_estimate(ratios, seed=seed)
        pooled += ratios if conc == 1 else []
        e2e = ratio_estimate([base[k].latency_s / cand[k].latency_s for k in keys], seed=seed)
        ttft = ratio_estimate([base[k].ttft_s / cand[k].ttft_s for k in keys], seed=seed)
        speedups.append(
            {
                "workload": workload,
                "concurrency": conc,
                "input_tokens": _median(base[k].prompt_tokens for k in keys),
                "decode": decode,
                "latency": e2e,
                "ttft": ttft,
                "excluded": len(base.keys() & cand.keys()) - len(keys),
            }
        )
    return to_jsonable(
        {
            "version": VERSION,
            "kind": "speed",
            "definition": TOKENS_PER_S_DEFINITION,
            "speedup_definition": "geometric mean over paired requests (same prompt, both arms) of candidate over "
            "baseline decode tokens/s, with a 95 % BCa bootstrap interval (scipy.stats.bootstrap); "
            "latency and TTFT speedups are baseline over candidate time",
            "outlier_rule": "modified z-score |0.6745 (log x - median) / MAD| > 3.5 within a cell (MAD floored at 0.05)",
            "plan": record_plan,
            "servers": servers,
            "notes": notes,
            "cells": rows,
            "speedups": speedups,
            "outliers": outliers,
            "overall": _overall(cells, flagged, pooled, seed),
            "session": _session(ok) if record_plan.get("session") else None,
            "failed": [
                {"arm": m.arm, "workload": m.workload, "concurrency": m.concurrency, "rep": m.rep, "error": m.error}
                for m in failed
            ],
        }
    )


def _overall(
    cells: dict[CellKey, list[Measurement]],
    flagged: set[tuple[str, tuple[str, int, int, int]]],
    pooled: list[float],
    seed: int,
) -> dict[str, Any]:
    """One figure for the whole run: the decode speedup over every kept pair at concurrency 1 (all workloads
    pooled), and the candidate's acceptance and tau over those requests."""
    cand = [m for (_, conc, arm), ms in cells.items() if arm == "candidate" and conc == 1 for m in ms]
    kept = [m for m in cand if ("candidate", m.key) not in flagged]
    return {
        "definition": "geometric mean of the paired decode speedups of every workload at concurrency 1 "
        "(outliers' pairs left out), with its 95 % bootstrap interval",
        "decode": ratio_estimate(pooled, seed=seed),
        **speculation_totals(kept, cand),
    }


def _session(ok: Sequence[Measurement]) -> dict[str, Any]:
    """Where the arms' session histories part, repetition by repetition (`speedrun.session.parting`)."""
    texts: dict[str, dict[int, dict[int, str]]] = defaultdict(lambda: defaultdict(dict))
    for m in ok:
        if m.workload.startswith(TURN_PREFIX):
            texts[m.arm][m.rep][int(m.workload[len(TURN_PREFIX) :]) - 1] = m.text
    return {"parting": parting(texts)}


def _order(workload: str) -> tuple[int, int]:
    """Length workloads by length, then the tasks workload, then the session's turns in order."""
    if workload.startswith("in-"):
        return (0, int(workload[3:]))
    if workload.startswith(TURN_PREFIX):
        return (2, int(workload[len(TURN_PREFIX) :]))
    return (1, 0)
