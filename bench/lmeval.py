"""Client-side cost of an lm-eval task through the suite, against lm-eval's own run of it.

Both arms evaluate the same documents of lm-eval's `gsm8k` (zero-shot, chat
messages, greedy, cache_prompt false) against the same endpoint, one request
at a time, and both score with lm-eval's filters and metric:
  reference: lm-eval's `simple_evaluate` with `local-chat-completions`
             (prompts, requests, filters, metrics, per-sample logs);
  suite:     the adapter's run: prompts from lm-eval, requests through the
             suite's engine with token ids and top-5 logprobs, durable SQLite
             store, then lm-eval's scoring per sample in the grade stage.
The endpoint is the scripted server in its own process (answers at once, so
the client's cost dominates) unless --base-url names a real one (e.g. a rig
server: `evalsuite rig up baseline`).  lm-eval's task index is built once
before timing and shared by both arms.  Prints wall-clock and process CPU
seconds (user + system, all threads) per arm and the ratios suite / lm-eval,
and checks that both arms agree on every document.

    python bench/lmeval.py [--n 300] [--tokens 32] [--base-url URL]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "lmeval"))

import httpx  # noqa: E402
from parity import differences, lmeval_side, lmeval_task_dir, suite_project, suite_side  # noqa: E402

from evalsuite.lmeval.select import task_manager  # noqa: E402
from evalsuite.tasks.data import read_local  # noqa: E402


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, wall seconds, process CPU seconds) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def documents(folder: Path, n: int) -> Path:
    """n GSM8K-shaped documents: the fixture's problems, numbered so every prompt differs."""
    rows = read_local(ROOT / "fixtures" / "gsm8k.jsonl")
    path = folder / "docs.jsonl"
    with path.open("w") as fh:
        for i in range(n):
            row = rows[i % len(rows)]
            fh.write(json.dumps({"question": f"{row['question']} (problem {i})", "answer": row["answer"]}) + "\n")
    return path


def start_server(tokens: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "fixtures" / "fake_server.py"), "--port", "0", "--tokens", str(tokens)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("ready"), line
    return proc, line.split()[1].rstrip("/").removesuffix("/v1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300, help="documents")
    parser.add_argument("--tokens", type=int, default=32, help="tokens per answer (scripted server)")
    parser.add_argument("--max-gen-toks", type=int, default=32)
    parser.add_argument("--base-url", help="a real server's root URL instead of the scripted server")
    args = parser.parse_args()
    server = None
    if args.base_url:
        url = args.base_url.rstrip("/").removesuffix("/v1")
    else:
        server, url = start_server(args.tokens)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            data = documents(folder, args.n)
            task_dir = lmeval_task_dir(folder / "tasks_lm", "gsm8k_local", "gsm8k", data)
            _, index_s, _ = timed(lambda: task_manager(str(task_dir)))
            model = httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"]
            text = f"lmeval: {{task: gsm8k, num_fewshot: 0, max_gen_toks: {args.max_gen_toks}, include_path: {task_dir}}}\n"
            config = suite_project(folder / "project", url, {"lm": text})
            theirs, lm_wall, lm_cpu = timed(
                lambda: lmeval_side(
                    url, model, task_dir, "gsm8k_local", chat=True, limit=args.n, max_gen_toks=args.max_gen_toks
                )
            )
            ours, su_wall, su_cpu = timed(lambda: suite_side(config, "chat", "lm", data, limit=args.n))
    finally:
        if server is not None:
            server.terminate()
            server.wait()
    problems = differences(theirs, ours)
    print(f"lm-eval task index (built once, shared, not timed): {index_s:.1f} s")
    print(f"{args.n} documents, endpoint {'scripted server' if server else url}, one request at a time")
    print(f"  lm-eval simple_evaluate : wall {lm_wall:7.2f} s   CPU {lm_cpu:7.2f} s")
    print(f"  suite (run + grade)     : wall {su_wall:7.2f} s   CPU {su_cpu:7.2f} s")
    print(f"  ratio suite / lm-eval   : wall {su_wall / lm_wall:5.2f}x   CPU {su_cpu / lm_cpu:5.2f}x")
    print(f"  per-document parity     : {args.n - len(problems)}/{args.n} without a difference")
    if problems:
        print("\n".join(problems[:5]))
        sys.exit(1)


if __name__ == "__main__":
    main()
