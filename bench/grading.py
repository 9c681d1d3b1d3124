"""Benchmark: grade all 500 MATH-500 gold solutions, parallel grader vs math-verify naively in one process.

Three workloads on the real data:
  solutions: each gold solution graded against its reference (what a good
             model run looks like; most answers match the reference text);
  prose:     the same solutions with every box removed, so the answer is only
             stated in words (the grader's prose fallback does the work);
  shuffled:  each reference graded against another problem's boxed answer
             (every pair goes through the full comparison).
Arms, measured in the same run:
  reference: `verify(parse("\\boxed{gold}"), parse(text))` in a loop in this process,
             starting from cold caches as the grader's fresh workers do;
  grader:    `MathGrader().grade_batch(..., workers=N)`, worker start-up included.
Prints wall seconds, samples/s, CPU seconds (this process plus the grading
workers: a machine loaded by other jobs inflates wall time, not CPU time),
how many were judged correct, and the speed ratio grader / reference.  Target: MATH-500 graded in under 10 s on 2 cores.
Also times the GSM8K graders over the 1,319 GSM8K gold solutions.

    .venv/bin/python bench/grading.py [--workers 2] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from math_verify import parse, verify
from math_verify.parser import parse_expr_cached, parse_latex_cached
from sympy.core.cache import clear_cache

from evalsuite.graders import GradeInput
from evalsuite.graders.boxes import boxed_spans
from evalsuite.graders.gsm8k import GSM8KGrader, LMEvalGSM8KGrader
from evalsuite.graders.math import MathGrader
from evalsuite.records import Sample

ROOT = Path(__file__).resolve().parents[1]


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _cpu() -> float:
    """CPU seconds used so far by this process and its finished children (the grading workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(fn: Callable[[], list[bool]]) -> tuple[float, int, float]:
    """Wall seconds, samples judged correct, CPU seconds (which a loaded machine does not inflate)."""
    cpu, start = _cpu(), time.perf_counter()
    correct = fn()
    return time.perf_counter() - start, sum(correct), _cpu() - cpu


def _math_workload(name: str, pairs: list[tuple[str, str]], workers: int) -> None:
    def reference() -> list[bool]:
        # Start cold, as every grader worker does: math-verify memoises parses.
        parse_latex_cached.cache_clear()
        parse_expr_cached.cache_clear()
        clear_cache()
        return [bool(verify(parse(f"\\boxed{{{gold}}}"), parse(text))) for gold, text in pairs]

    def grader() -> list[bool]:
        items = [GradeInput(Sample(str(i), "math500", (), gold), text) for i, (gold, text) in enumerate(pairs)]
        return [g.correct for g in MathGrader().grade_batch(items, workers=workers)]

    ref_s, ref_ok, ref_cpu = _timed(reference)
    our_s, our_ok, our_cpu = _timed(grader)
    n = len(pairs)
    print(f"MATH-500 {name} ({n} samples)")
    print(
        f"  reference  math-verify, 1 process     {ref_s:7.2f} s  {n / ref_s:8.1f} samples/s  cpu {ref_cpu:6.2f} s  correct {ref_ok}"
    )
    print(
        f"  grader     MathGrader, {workers} workers      {our_s:7.2f} s  {n / our_s:8.1f} samples/s  cpu {our_cpu:6.2f} s  correct {our_ok}"
    )
    print(
        f"  ratio      grader / reference speed  {ref_s / our_s:6.2f}x   target < 10 s: {'met' if our_s < 10 else 'MISSED'}"
    )


def _unboxed(text: str) -> str:
    for start, end, content in reversed(boxed_spans(text)):
        text = text[:start] + content + text[end:]
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--data", type=Path, default=ROOT / ".." / "shared" / "data")
    args = parser.parse_args()
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # the reference arm logs every parse timeout setup

    math_rows = _rows(args.data / "math500" / "test.jsonl")
    _math_workload("gold solutions", [(r["answer"], r["solution"]) for r in math_rows], args.workers)
    _math_workload("solutions without boxes", [(r["answer"], _unboxed(r["solution"])) for r in math_rows], args.workers)
    perm = list(range(len(math_rows)))
    random.Random(1234).shuffle(perm)
    shuffled = [(r["answer"], f"\\boxed{{{math_rows[j]['answer']}}}") for r, j in zip(math_rows, perm)]
    _math_workload("shuffled boxed answers", shuffled, args.workers)

    gsm_rows = _rows(args.data / "gsm8k" / "test.jsonl")
    items = [GradeInput(Sample(str(i), "gsm8k", (), r["answer"]), r["answer"]) for i, r in enumerate(gsm_rows)]
    for grader in (GSM8KGrader(), LMEvalGSM8KGrader()):
        seconds, ok, _ = _timed(lambda g=grader: [x.correct for x in g.grade_batch(items)])
        print(
            f"GSM8K gold solutions, {grader.name:13} {seconds:6.2f} s  {len(items) / seconds:9.0f} samples/s  correct {ok}"
        )


if __name__ == "__main__":
    main()
