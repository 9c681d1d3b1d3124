"""Benchmark: compare two runs of 1,319 samples x 2,000 tokens with top-5 logprobs (--control adds a numerics control run).

Prints the time and peak memory of `compare_runs` (diff, classification,
verdicts, statistics) and of the diff alone, next to a reference measured in
the same run: a plain Python loop that walks the token ids one by one to find
each first divergence.  Target: under 5 s and under 2 GB.

    .venv/bin/python bench/compare.py [--samples 1319] [--tokens 2000] [--control] [--stored]

--stored writes the runs to run-store folders first and measures, in a fresh
process, `compare_runs` over the folders: the path `evalsuite compare` takes.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from evalsuite.compare import compare_runs
from evalsuite.diff import diff_runs
from evalsuite.records import Completion, Grade, SampleResult, TokenTrace
from evalsuite.store import MemoryRun

VOCAB = [f"tok{i}" for i in range(32_000)]


def _trace(ids: np.ndarray, rng: np.random.Generator, k: int = 5) -> TokenTrace:
    n = len(ids)
    top_ids = np.empty((n, k), np.int64)
    top_ids[:, 0] = ids
    top_ids[:, 1:] = rng.integers(0, len(VOCAB), (n, k - 1))
    top_lp = np.sort(-rng.exponential(3.0, (n, k)).astype(np.float32), axis=1)[:, ::-1].copy()
    pieces = [VOCAB[i] for i in ids.tolist()]
    return TokenTrace(
        ids=ids,
        pieces=pieces,
        raw=[p.encode() for p in pieces],
        logprobs=top_lp[:, 0].copy(),
        top_ids=top_ids,
        top_logprobs=top_lp,
        top_pieces=[[VOCAB[j] for j in row] for row in top_ids.tolist()],
    )


def build(samples: int, tokens: int, names: tuple[str, ...], seed: int = 0) -> list[MemoryRun]:
    """Runs where every other sample diverges at a random position; margins are random (exponential, mean 3)."""
    rng = np.random.default_rng(seed)
    fields = {"task": "gsm8k", "prompt_template": "x", "params": {}, "dataset": {}, "server": {"model": "m"}}
    runs: dict[str, tuple[dict, dict]] = {name: ({}, {}) for name in names}
    for i in range(samples):
        sid = f"gsm8k-test-{i}"
        base_ids = rng.integers(0, len(VOCAB), tokens)
        ok = bool(rng.random() < 0.85)
        for name, (res, grades) in runs.items():
            ids = base_ids.copy()
            if name != "base" and i % 2 == 0:
                ids[rng.integers(10, tokens) :] = rng.integers(0, len(VOCAB))
            res[sid] = SampleResult(sid, "gsm8k", {}, Completion("", "length", _trace(ids, rng)))
            grades[sid] = Grade(sid, "correct" if ok else "incorrect", None, "")
    return [
        MemoryRun({"fingerprint": n, "target": n, "task": "gsm8k", "fingerprint_fields": {**fields, "target": n}}, r, g)
        for n, (r, g) in runs.items()
    ]


def naive_first_divergences(cand: dict[str, SampleResult], base: dict[str, SampleResult]) -> list[int | None]:
    out: list[int | None] = []
    for sid in sorted(cand.keys() & base.keys()):
        a = cand[sid].completion.tokens.ids.tolist()  # type: ignore[union-attr]
        b = base[sid].completion.tokens.ids.tolist()  # type: ignore[union-attr]
        first = None
        for j in range(min(len(a), len(b))):
            if a[j] != b[j]:
                first = j
                break
        out.append(first)
    return out


def compare_stored(folder: str) -> None:
    """In a fresh process: compare the stored runs under `folder` and print time and peak memory."""
    from pathlib import Path

    root = Path(folder)
    controls = {"control": root / "self"} if (root / "self").exists() else None
    t0 = time.perf_counter()
    cmp = compare_runs(root / "spec", root / "base", controls=controls, seed=0)
    elapsed = time.perf_counter() - t0
    # VmHWM, not ru_maxrss: after fork+exec Linux carries the parent's ru_maxrss over to the child
    hwm = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM"))
    rss = int(hwm.split()[1]) / 1024
    print(
        f"compare_runs over stored run folders{' (+ control)' if controls else ''}: {elapsed:.3f} s, "
        f"peak RSS {rss:.0f} MiB for the whole process (targets < 5 s, < 2048 MiB)"
    )
    print(f"verdict: {cmp.summary}")


def write_stored(runs: list[MemoryRun], names: tuple[str, ...], folder: str) -> None:
    from pathlib import Path

    from evalsuite.store import RunStore

    for name, run in zip(names, runs):
        store = RunStore.create(Path(folder) / name, run.manifest)
        writer = store.writer()
        for result in run.results().values():
            writer.put(result)
        writer.close()
        store.write_grades(list(run.grades().values()), "bench", "1")
        store.close()


def main() -> None:
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--compare-stored":
        compare_stored(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1319)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--control", action="store_true", help="also diff a third run as the numerics control")
    parser.add_argument("--stored", action="store_true", help="also measure compare_runs over run-store folders")
    args = parser.parse_args()
    t0 = time.perf_counter()
    names = ("base", "spec", "self") if args.control else ("base", "spec")
    base, spec, *rest = build(args.samples, args.tokens, names)
    built = time.perf_counter() - t0
    rss_data = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    t0 = time.perf_counter()
    ref = naive_first_divergences(spec.results(), base.results())
    naive_s = time.perf_counter() - t0

    cand = {k: r.completion for k, r in spec.results().items()}
    bas = {k: r.completion for k, r in base.results().items()}
    t0 = time.perf_counter()
    diffs = diff_runs(cand, bas)
    diff_s = time.perf_counter() - t0
    assert [d.first_divergence for d in diffs] == ref

    t0 = time.perf_counter()
    cmp = compare_runs(spec, base, controls={"control": rest[0]} if rest else None, seed=0)
    compare_s = time.perf_counter() - t0
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    tokens = args.samples * args.tokens
    print(
        f"runs: {len(names)} x {args.samples} samples x {args.tokens} tokens, top-5 ({tokens:,} tokens per run), built in {built:.1f} s"
    )
    print(f"reference (python loop over ids, first divergences only): {naive_s:.3f} s")
    print(
        f"diff_runs (first divergences, margins, ranks, windows):   {diff_s:.3f} s  "
        f"({naive_s / diff_s:.1f}x faster than the reference)"
    )
    print(
        f"compare_runs (diff + verdicts + statistics{', + control diff' if rest else ''}): {compare_s:.3f} s  "
        "(target < 5 s)"
    )
    print(
        f"peak RSS: {rss_peak:.0f} MiB in all (target < 2048 MiB); the runs' records alone took {rss_data:.0f} MiB, "
        f"so comparing added {rss_peak - rss_data:.0f} MiB"
    )
    print(f"verdict: {cmp.summary}")
    if args.stored:
        import subprocess
        import sys
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            write_stored([base, spec, *rest], names, folder)
            del base, spec, rest, cand, bas, diffs, cmp
            subprocess.run([sys.executable, __file__, "--compare-stored", folder], check=True)


if __name__ == "__main__":
    main()
