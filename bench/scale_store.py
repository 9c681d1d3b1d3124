"""Benchmark: store size per token, and compare + report of four long-output arms from run stores on disk.

Builds a baseline, its repeat, a control and a candidate (top-5 logprobs on
bf16's grid, as vLLM and SGLang return them on GPUs: the costlier case for the
baseline's resolution tally; Zipf-distributed token ids; mostly identical
arms: one sample in 25 diverges in the candidate, one in 50 in the control, or
one in SCALE_STORE_DIVERGE, 1 for an engine that diverges everywhere) by
writing generated arrays through the run store's writer, then measures, each
in a fresh child process:

- store bytes per token, next to the raw arrays a token carries (ids,
  logprob, top-k ids and logprobs at 4 bytes each);
- `compare_roles` over the four folders: wall time and peak RSS, next to a
  reference read in the same run: every arm's token ids read once;
- `compare_roles` + `write_reports` (what `evalsuite report` does): the
  report's wall time and the process's peak RSS.

Peak RSS is `resource.getrusage(RUSAGE_CHILDREN).ru_maxrss` read by a small
meter process around each measured child, so no measurement carries another's
memory.  Targets at the full size: compare and report under 5 s each, peak
RSS under 1 GiB.

    .venv/bin/python bench/scale_store.py                   # 40 samples x 2,000 tokens x 4 arms
    SCALE_STORE=full .venv/bin/python bench/scale_store.py  # 500 samples x 16,000 tokens x 4 arms
    SCALE_STORE=SAMPLESxTOKENS ...                         # any size, e.g. 200x8000
    SCALE_STORE_DIVERGE=1 ...                              # every candidate output diverges (control: 1 in 2)
    SCALE_STORE_IDS=0 ...                                  # tokens without ids, named by text (as some APIs do)
    SCALE_STORE_IDS=chosen ...                             # ids for the chosen tokens only (vLLM's alternatives)

SCALE_STORE_DIR keeps the runs in that folder (built once, reused) instead of a temporary folder.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROLES = {"baseline": "base", "repeat": "base-again", "control": "self", "candidate": "dflash"}
TOP_K = 5
VOCAB_SIZE = 32_000
GRID = 0.125  # bf16's spacing for logits between 16 and 32: every top-k gap a multiple of it


def _size() -> tuple[int, int]:
    spec = os.environ.get("SCALE_STORE", "")
    if spec == "full":
        return 500, 16_000
    if "x" in spec:
        samples, tokens = spec.split("x")
        return int(samples), int(tokens)
    return 40, 2_000


def _diverge_every() -> int:
    """One candidate output in this many diverges (SCALE_STORE_DIVERGE, default 25); one control output in twice
    as many."""
    spec = os.environ.get("SCALE_STORE_DIVERGE", "25")
    if not spec.isdigit() or int(spec) < 1:
        raise SystemExit(f"SCALE_STORE_DIVERGE must be a whole number of samples, 1 or more, not {spec!r}.")
    return int(spec)


IDS = {"1": "", "0": ", tokens without ids", "chosen": ", ids for the chosen tokens only"}
"""SCALE_STORE_IDS: every token and alternative with its id, none, or the chosen tokens' alone (vLLM's shape)."""


def build(root: Path, samples: int, tokens: int, seed: int = 0, every: int = 25, ids_given: str = "1") -> None:
    """Write the four arms' run folders under `root` through the store's writer."""
    import numpy as np

    from evalsuite.records import Completion, Grade, Sample, SampleResult, TokenTrace
    from evalsuite.store import RunManifest, RunStore

    rng = np.random.default_rng(seed)
    vocab = [f" w{i}" if i % 7 else f"\n{i}" for i in range(VOCAB_SIZE)]
    fields = {
        "task": "math500",
        "prompt_template": "p",
        "params": {"max_tokens": tokens, "top_logprobs": TOP_K},
        "dataset": {"revision": "r"},
        "server": {"model": "m"},
    }
    stores = {}
    for role, target in ROLES.items():
        repeat = {"repeat": 1} if role == "repeat" else {}
        manifest = RunManifest(
            fingerprint=target,
            target="base" if role == "repeat" else target,
            task="math500",
            fingerprint_fields={**fields, "target": "base" if role == "repeat" else target, **repeat},
            target_config={"name": target, "baseline": None if role in ("baseline", "repeat") else "base"},
        )
        stores[role] = RunStore.create(root / target, manifest)
    writers = {role: store.writer() for role, store in stores.items()}
    ranks = 1.0 / np.arange(1, VOCAB_SIZE + 1) ** 1.1
    zipf = ranks / ranks.sum()
    items, grades = [], {role: [] for role in ROLES}
    for i in range(samples):
        sid = f"test/{i}.json"
        items.append(Sample(sid, "math500", ({"role": "user", "content": f"Problem {i}"},), str(i), {"level": "1"}))
        ids = rng.choice(VOCAB_SIZE, size=tokens, p=zipf)
        top_ids = np.concatenate([ids[:, None], rng.choice(VOCAB_SIZE, size=(tokens, TOP_K - 1), p=zipf)], axis=1)
        top_lp = np.sort(-np.round(rng.exponential(2.0, (tokens, TOP_K)) / GRID) * GRID, axis=1)[:, ::-1]
        top_lp = (top_lp - rng.uniform(0.01, 0.2, (tokens, 1))).astype(np.float32)  # a position's log-sum-exp
        for role in ROLES:
            arm_ids = ids
            if (role == "candidate" and i % every == 1 % every) or (role == "control" and i % (2 * every) == 1):
                arm_ids = ids.copy()
                arm_ids[int(rng.integers(0, tokens)) :] = top_ids[0, 1]
            pieces = [vocab[t] for t in arm_ids.tolist()]
            trace = TokenTrace(
                ids=np.full(tokens, -1, np.int64) if ids_given == "0" else arm_ids,
                pieces=pieces,
                raw=[p.encode() for p in pieces],
                logprobs=top_lp[:, 0].copy(),
                top_ids=top_ids if ids_given == "1" else np.full_like(top_ids, -1),
                top_logprobs=top_lp,
                top_pieces=[[vocab[t] for t in row] for row in top_ids.tolist()],
            )
            tps = 40.0 if role in ("baseline", "repeat") else 90.0
            timings = {"predicted_n": float(tokens), "predicted_ms": 1000 * tokens / tps}
            completion = Completion("".join(pieces), "length", trace, {"completion_tokens": tokens}, timings)
            writers[role].put(SampleResult(sid, "math500", {"level": "1"}, completion))
            grades[role].append(Grade(sid, "correct" if i % 3 else "incorrect", str(i), "r"))
    for role, store in stores.items():
        writers[role].close()
        store.write_samples(items)
        store.write_grades(grades[role], "bench", "1")
        store.close()


def _store_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.name.startswith("records.sqlite"))


def measure(step: str, root: Path) -> None:
    """In a child process: run one step over the stored runs and print its wall time (imports excluded) as JSON."""
    import sqlite3

    import numpy as np

    from evalsuite.compare import compare_roles
    from evalsuite.report import write_reports
    from evalsuite.store import open_run

    t0 = time.perf_counter()
    if step == "ids":  # the reference: every arm's token ids read once, nothing else
        count = 0
        for target in ROLES.values():
            conn = sqlite3.connect(root / target / "records.sqlite")
            table = (
                "tokens" if "tokens" in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")} else "results"
            )
            for (blob,) in conn.execute(f"SELECT ids FROM {table}"):
                count += len(np.frombuffer(blob, "<i4"))
            conn.close()
        print(json.dumps({"seconds": time.perf_counter() - t0, "tokens": count}))
        return
    runs = {role: open_run(root / target) for role, target in ROLES.items()}
    comparison = compare_roles(runs, n_resamples=2000)
    compare_s = time.perf_counter() - t0
    out = {"seconds": compare_s, "summary": comparison.summary}
    if step == "report":
        t0 = time.perf_counter()
        paths = write_reports([comparison], root / "report", runs={"math500": runs})
        out = {"seconds": time.perf_counter() - t0, "html_mb": paths.html.stat().st_size / 1e6}
    print(json.dumps(out))


def meter(command: list[str]) -> None:
    """Run `command` as this small process's only child and print its result and peak RSS (KiB) as JSON."""
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps({**result, "rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))


def _metered(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--meter", sys.executable, __file__, *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--meter":
        meter(sys.argv[2:])
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--measure":
        measure(sys.argv[2], Path(sys.argv[3]))
        return
    if len(sys.argv) == 7 and sys.argv[1] == "--build":
        build(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), every=int(sys.argv[5]), ids_given=sys.argv[6])
        return
    samples, tokens = _size()
    every = _diverge_every()
    ids_given = os.environ.get("SCALE_STORE_IDS", "1")
    if ids_given not in IDS:
        raise SystemExit(f"SCALE_STORE_IDS must be one of {', '.join(IDS)}, not {ids_given!r}.")
    keep = os.environ.get("SCALE_STORE_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(keep) if keep else Path(tmp)
        built = root / f"{samples}x{tokens}-{every}{ {'1': '', '0': '-no-ids', 'chosen': '-chosen-ids'}[ids_given] }"
        t0 = time.perf_counter()
        if not (built / ROLES["candidate"] / "records.sqlite").exists():
            command = [sys.executable, __file__, "--build", str(built), str(samples), str(tokens), str(every)]
            command.append(ids_given)
            subprocess.run(command, check=True)
        build_s = time.perf_counter() - t0
        total = samples * tokens * len(ROLES)
        stored = sum(_store_bytes(built / target) for target in ROLES.values())
        raw = 4 * (2 + 2 * TOP_K)
        print(
            f"runs: {len(ROLES)} arms x {samples} samples x {tokens:,} tokens, top-{TOP_K}, one candidate output in "
            f"{every} diverging{IDS[ids_given]} (ready in {build_s:.1f} s)"
        )
        print(
            f"store: {stored / total:.1f} bytes/token ({stored / 1e6:.0f} MB for {total:,} tokens); reference: the "
            f"raw arrays, {raw} bytes/token; ratio {stored / total / raw:.2f}x"
        )
        ids = _metered("--measure", "ids", str(built))
        compare = _metered("--measure", "compare", str(built))
        report = _metered("--measure", "report", str(built))
        floor = ids["rss_kib"] / 1024
        print(
            f"reference, every arm's token ids read once (same imports): {ids['seconds']:.2f} s, peak RSS {floor:.0f} MiB"
        )
        print(
            f"compare (4 arms): {compare['seconds']:.2f} s ({compare['seconds'] / ids['seconds']:.1f}x the reference), "
            f"peak RSS {compare['rss_kib'] / 1024:.0f} MiB, {compare['rss_kib'] / 1024 - floor:+.0f} MiB over the "
            "reference (targets at 500 x 16k: < 5 s, < 1024 MiB)"
        )
        print(
            f"report (md + html + json, after compare): {report['seconds']:.2f} s, peak RSS of compare + report "
            f"{report['rss_kib'] / 1024:.0f} MiB, {report['rss_kib'] / 1024 - floor:+.0f} MiB over the reference, "
            f"report.html {report['html_mb']:.2f} MB"
        )
        print(f"verdict: {compare['summary']}")


if __name__ == "__main__":
    main()
