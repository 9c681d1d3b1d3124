"""Benchmark: write the Markdown + HTML reports for a 500-sample comparison read from run stores on disk.

Builds a baseline, a speculative candidate and a numerics control (500 samples
x 1,000 tokens with top-5 logprobs, every other sample diverging, timings with
draft counts) in a temporary folder, compares them, then times
`write_reports` (loading the stores, speed, the viewer's data, rendering,
writing) next to a reference measured in the same run: serialising the same
comparison to JSON (`Comparison.to_json`).  Targets: under 3 s, HTML under 5 MB.

    .venv/bin/python bench/report.py [--samples 500] [--tokens 1000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from evalsuite.compare import compare_runs
from evalsuite.records import Completion, Grade, Sample, SampleResult, TokenTrace
from evalsuite.report import write_reports
from evalsuite.store import RunManifest, RunStore, open_run

SUBJECTS = (
    "Algebra",
    "Counting & Probability",
    "Geometry",
    "Intermediate Algebra",
    "Number Theory",
    "Prealgebra",
    "Precalculus",
)


def _trace(ids: np.ndarray, top_ids: np.ndarray, top_lp: np.ndarray) -> TokenTrace:
    pieces = [f" t{i}" for i in ids.tolist()]
    return TokenTrace(
        ids=ids,
        pieces=pieces,
        raw=[p.encode() for p in pieces],
        logprobs=top_lp[:, 0].copy(),
        top_ids=top_ids,
        top_logprobs=top_lp,
        top_pieces=[[f" t{j}" for j in row] for row in top_ids.tolist()],
    )


def build(root: Path, samples: int, tokens: int, seed: int = 0) -> dict[str, RunStore]:
    rng = np.random.default_rng(seed)
    roles = {"baseline": "base", "candidate": "dflash", "control": "self"}
    fields = {
        "task": "math500",
        "prompt_template": "p",
        "params": {"max_tokens": tokens},
        "dataset": {"rev": "r"},
        "server": {"model": "m", "model_meta": {}},
    }
    stores = {
        r: RunStore.create(root / t, RunManifest(fingerprint=t, fingerprint_fields=fields, target=t, task="math500"))
        for r, t in roles.items()
    }
    writers = {r: s.writer() for r, s in stores.items()}
    grades: dict[str, list[Grade]] = {r: [] for r in roles}
    items = []
    for i in range(samples):
        sid = f"test/{SUBJECTS[i % 7].lower()}/{i}.json"
        strata = {"subject": SUBJECTS[i % 7], "level": str(1 + i % 5)}
        items.append(
            Sample(sid, "math500", ({"role": "user", "content": f"Problem {i} " + "x " * 200},), str(i), strata)
        )
        ids = rng.integers(0, 32_000, tokens)
        top_ids = np.concatenate([ids[:, None], rng.integers(0, 32_000, (tokens, 4))], axis=1)
        top_lp = np.sort(-rng.exponential(3.0, (tokens, 5)).astype(np.float32), axis=1)[:, ::-1].copy()
        right = rng.random() < 0.75
        for role in roles:
            cand_ids = ids.copy()
            if role != "baseline" and i % 2:
                pos = int(rng.integers(0, tokens))
                cand_ids[pos:] = rng.integers(0, 32_000, tokens - pos)
            trace = _trace(cand_ids, top_ids, top_lp)
            tps = 40.0 if role == "baseline" else 95.0
            timings = {"predicted_n": float(tokens), "predicted_ms": 1000 * tokens / tps}
            if role != "baseline":
                timings.update(draft_n=float(tokens), draft_n_accepted=float(tokens * 0.7))
            comp = Completion(
                "".join(trace.pieces), "stop", trace, {"completion_tokens": tokens}, timings, tokens / tps + 0.05, 0.05
            )
            writers[role].put(SampleResult(sid, "math500", strata, comp))
            ok = right if role == "baseline" or i % 10 else not right
            grades[role].append(Grade(sid, "correct" if ok else "incorrect", str(i if ok else -i), "r"))
    for role, store in stores.items():
        writers[role].close()
        store.write_samples(items)
        store.write_grades(grades[role], "bench", "1")
        store.close()
    return {r: open_run(root / t) for r, t in roles.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--tokens", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = build(root / "runs", args.samples, args.tokens)
        t0 = time.perf_counter()
        cmp = compare_runs(runs["candidate"], runs["baseline"], controls={"control": runs["control"]}, n_resamples=2000)
        t_compare = time.perf_counter() - t0
        t0 = time.perf_counter()
        reference = cmp.to_json()
        t_json = time.perf_counter() - t0
        t0 = time.perf_counter()
        paths = write_reports([cmp], root / "report", runs={"math500": runs})
        t_report = time.perf_counter() - t0
        html_mb = paths.html.stat().st_size / 1e6
        divergent = sum(not d.identical for d in cmp.diffs)
        print(
            f"comparison: {args.samples} samples x {args.tokens} tokens, {divergent} divergent (compare_runs {t_compare:.2f} s)"
        )
        print(f"reference  Comparison.to_json: {t_json:.3f} s, {len(reference) / 1e6:.2f} MB")
        print(
            f"write_reports (md + html + json): {t_report:.2f} s  (target < 3 s)  ratio to reference {t_report / t_json:.1f}x"
        )
        print(f"report.html {html_mb:.2f} MB (target < 5 MB), report.md {paths.markdown.stat().st_size / 1e3:.0f} kB")
        print("OK" if t_report < 3 and html_mb < 5 else "OVER TARGET")


if __name__ == "__main__":
    main()
