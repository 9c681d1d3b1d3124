"""Benchmark: false alarms and misses of the near-tie threshold when a control's evidence is thin.

A control run's flips set the threshold a divergence's gap is judged against.  With k flips, the threshold
is the largest of the 0.1-nat default, 2 x the largest flip, and the gap a further numerics flip exceeds
with probability 1 % (`evalsuite.stats.tails`), that prediction capped at 0.5 nats.  This draws k of an
engine's control flips at random, many times, and counts in the same run, for that rule and for 2 x the
largest flip alone (the reference):

- false alarms: the share of divergences of lossless configurations (numerics by construction: a drafter
  on the same target, the target drafting for itself, n-gram lookup) whose gap lies above the threshold,
  and the share of their runs with any such divergence (a LOSSY verdict on a lossless engine);
- misses: the share of lossy divergences at or below it, and of lossy runs with none above it.

Sources: the H200 llama-server recordings in shared/data (fp32 logits; lossy: fake acceptance, and the
baseline's 3rd, 4th and 5th choice at every place the control flipped a near-tie), and, with --runs, the
runs a rig eval stored (`evalsuite eval dflash --limit all`, then the other targets against the same
baseline and control; names below).  Sources that are absent are said to be, and skipped.

    .venv/bin/python bench/thresholds.py [--runs PROJECT/runs] [--draws 4000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalsuite.compare.walk import walk_runs
from evalsuite.diff import DEFAULT_CONTROL_SLACK, DEFAULT_NEAR_TIE_NATS, flip_bound
from evalsuite.engines.parse import completion_from_chat
from evalsuite.records import SampleResult
from evalsuite.store import MemoryRun, open_run

ROOT = Path(__file__).resolve().parent.parent
KS = (1, 2, 3, 5, 8, 13, 21)
RIG = {
    "llama.cpp rig (SmolLM2, fp32 logits)": (
        "baseline",
        "control",
        ("dflash", "draft", "ngram"),
        ("smollm2-synthetic",),
    ),
    "vLLM rig (SmolLM2, bf16)": ("vllm-baseline", "vllm-control", ("vllm-ngram", "vllm-draft"), ("vllm-rtn4",)),
}


@dataclass
class Source:
    """One engine's evidence: the control's flips, and the gaps of each lossless and lossy run's divergences."""

    name: str
    flips: list[float] = field(default_factory=list)
    lossless: dict[str, list[float]] = field(default_factory=dict)
    lossy: dict[str, list[float]] = field(default_factory=dict)


def _gaps(base: MemoryRun, other: MemoryRun) -> list[float]:
    ids = {"baseline": base.result_ids(), "candidate": other.result_ids()}
    walk = walk_runs({"baseline": base, "candidate": other}, ids, {}, {})
    return [d.gap for d in walk.diffs if not d.identical and math.isfinite(d.gap)]


def _recording(folder: Path, name: str) -> MemoryRun:
    with gzip.open(folder / f"{name}.json.gz", "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    results = {
        f"q{e['index']}": SampleResult(f"q{e['index']}", "gsm8k", {}, completion_from_chat(e["response"]))
        for e in data["responses"]
        if e["pass"] == 0
    }
    manifest = {"fingerprint": name, "target": name, "task": "gsm8k"}
    return MemoryRun(manifest, results)


def recordings(folder: Path) -> Source | None:
    if not (folder / "base_f16.json.gz").exists():
        return None
    base = _recording(folder, "base_f16")
    control = _recording(folder, "spec_f16_self")
    source = Source("H200 recordings (llama.cpp, fp32 logits)", flips=_gaps(base, control))
    source.lossless["spec_f16_draftq4"] = _gaps(base, _recording(folder, "spec_f16_draftq4"))
    source.lossy["synth_f16"] = _gaps(base, _recording(folder, "synth_f16"))
    for rank in (3, 4, 5):
        source.lossy[f"choice {rank} at the control's flips"] = _far(base, control, rank)
    return source


def _far(base: MemoryRun, control: MemoryRun, rank: int) -> list[float]:
    """The gap to the baseline's `rank`-th choice at each place the control flipped."""
    out = []
    for sid, result in control.results().items():
        b, c = base.results()[sid].completion.tokens, result.completion.tokens
        assert b is not None and c is not None
        n = min(len(b), len(c))
        differ = np.flatnonzero(b.ids[:n] != c.ids[:n])
        if len(differ):
            row = np.sort(b.top_logprobs[int(differ[0])])[::-1]
            out.append(float(b.logprobs[int(differ[0])] - row[rank - 1]))
    return out


def stored(runs: Path, name: str, base: str, control: str, lossless: Sequence[str], lossy: Sequence[str]) -> Source:
    """The gaps of every task the baseline ran, against each named target's run of that task."""
    source = Source(name)
    for task_dir in sorted(runs.glob(f"{base}/*")):
        folders = {t: sorted((runs / t / task_dir.name).glob("*/manifest.json")) for t in (control, *lossless, *lossy)}
        base_folder = next(iter(sorted(task_dir.glob("*/manifest.json"))), None)
        if base_folder is None:
            continue
        base_run = open_run(base_folder.parent)
        for target, manifests in folders.items():
            for manifest in manifests:
                gaps = _gaps(base_run, open_run(manifest.parent))  # type: ignore[arg-type]
                if target == control:
                    source.flips += gaps
                else:
                    bucket = source.lossless if target in lossless else source.lossy
                    bucket.setdefault(target, []).extend(gaps)
    return source


def _thresholds(flips: np.ndarray, k: int, draws: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per draw of k flips: the reference (2 x the largest, at least the default) and the rule."""
    picks = np.array([rng.choice(flips, size=k, replace=False) for _ in range(draws)])
    reference = np.maximum(DEFAULT_NEAR_TIE_NATS, DEFAULT_CONTROL_SLACK * picks.max(axis=1))
    bound = np.array([flip_bound(p.tolist(), DEFAULT_CONTROL_SLACK) for p in picks])
    return reference, np.maximum(reference, bound)


def _rates(runs: dict[str, list[float]], th: np.ndarray, above: bool) -> tuple[float, float]:
    """Share of divergences above (or at or below) the thresholds, and of runs with any (or none) above."""
    gaps = [g for gs in runs.values() for g in gs]
    if not gaps:
        return math.nan, math.nan
    per_div = float(np.mean([(np.array(gaps) > t).mean() for t in th]))
    per_run = float(np.mean([np.mean([(np.array(gs) > t).any() for gs in runs.values() if gs]) for t in th]))
    return (per_div, per_run) if above else (1 - per_div, 1 - per_run)


def report(source: Source, draws: int, seed: int) -> None:
    flips = np.array(source.flips)
    lossless = sum(len(g) for g in source.lossless.values())
    lossy = sum(len(g) for g in source.lossy.values())
    print(
        f"\n{source.name}: {len(flips)} control flips (gaps {_span(flips)}), "
        f"{lossless} lossless divergences in {len(source.lossless)} runs, {lossy} lossy ones in {len(source.lossy)}"
    )
    if not len(flips):
        print("  no control flips: the default threshold stands, nothing to measure")
        return
    rng = np.random.default_rng(seed)
    print(
        f"  {'k':>3} {'rule':<16} {'threshold (median)':>19} {'false alarm /div':>17} {'/run':>7} "
        f"{'miss /div':>10} {'/run':>7}"
    )
    for k in [k for k in KS if k < len(flips)] + [len(flips)]:
        for name, th in zip(("2 x largest", "rule"), _thresholds(flips, k, draws, rng)):
            fa = _rates(source.lossless, th, above=True)
            miss = _rates(source.lossy, th, above=False)
            print(
                f"  {k:>3} {name:<16} {np.median(th):>19.3g} {fa[0]:>17.2%} {fa[1]:>7.1%} "
                f"{miss[0]:>10.1%} {miss[1]:>7.1%}"
            )


def _span(values: np.ndarray) -> str:
    return f"{values.min():.3g}-{values.max():.3g} nats" if len(values) else "none"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, help="a project's runs folder holding the rig targets' runs")
    parser.add_argument("--draws", type=int, default=4000, help="random draws of k flips per row")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = Path(os.environ.get("EVALSUITE_SHARED_DATA", ROOT.parent / "shared" / "data"))
    sources = [recordings(data / "recordings" / "llamacpp-cuda-h200")]
    if sources[0] is None:
        print(f"recordings not found under {data}: that source is not measured")
    if args.runs is not None:
        sources += [stored(args.runs, name, *names) for name, names in RIG.items() if (args.runs / names[0]).is_dir()]
    else:
        print("no --runs folder: the rig sources are not measured")
    for source in sources:
        if source is not None:
            report(source, args.draws, args.seed)


if __name__ == "__main__":
    main()
