"""Parity of `evalsuite speed`'s figures with aiperf's and with llama.cpp's own `timings`, on the same endpoint.

One llama-server (the rig's `baseline` unless --url names another), one
workload: N prompts of about --input-tokens tokens cut from the tasks' text
(the speed run's own prompt maker), fixed --output-tokens with ignore_eos,
greedy, no prompt cache, one request at a time.  The suite's streaming client
runs it, then aiperf (`pip install aiperf`, a bench-only tool) on the same
prompts and request fields, then the suite again, so drift on a shared
machine shows as the gap between the suite's two runs.  Printed: each
figure by both tools and their ratio (the target is within 5 %), and the
suite's decode rate against llama.cpp's `predicted_per_second` per request
(the target is within 1 %).

aiperf loads a tokenizer even when told to use the server's token counts
(`--use-server-token-count`); offline it cannot fetch one, so a one-word
placeholder tokenizer is written for it: every count it reports comes
from the server's `usage`.

    .venv/bin/python bench/speed_aiperf.py                      # rig baseline, 16 requests
    .venv/bin/python bench/speed_aiperf.py --url http://127.0.0.1:8080 --requests 50 --input-tokens 1024
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from evalsuite.config import load_config
from evalsuite.speedrun import task_text
from evalsuite.speedrun.client import Measurement, measure
from evalsuite.speedrun.workload import PromptMaker, Tokenizer

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def endpoint(url: str | None, threads: int) -> Iterator[str]:
    if url:
        yield url.rstrip("/").removesuffix("/v1")
        return
    from evalsuite.speedrun.rigslots import serve_slots

    with serve_slots(["baseline"], 1, threads=threads, extra_args=["--metrics"]) as running:
        yield running["baseline"].base_url


def server_clock(root: str) -> dict[str, float]:
    """llama.cpp's Prometheus counters (`--metrics`): decode tokens and seconds, prompt seconds, so far."""
    try:
        text = httpx.get(root + "/metrics", timeout=10.0).text
    except httpx.HTTPError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].startswith("llamacpp:"):
            out[parts[0].removeprefix("llamacpp:")] = float(parts[1])
    return out


def engine_itl_ms(before: dict[str, float], after: dict[str, float], requests: int) -> float:
    """The server's mean inter-token latency over a window: decode seconds / (tokens - one per request)."""
    if not before or not after:
        return float("nan")
    tokens = after["tokens_predicted_total"] - before["tokens_predicted_total"] - requests
    seconds = after["tokens_predicted_seconds_total"] - before["tokens_predicted_seconds_total"]
    return 1000 * seconds / tokens if tokens > 0 else float("nan")


async def model_name(client: httpx.AsyncClient, root: str) -> str:
    data = (await client.get(root + "/v1/models")).json()
    return str(data["data"][0]["id"])


async def make_prompts(root: str, n: int, length: int) -> list[str]:
    config = load_config(REPO / "evalsuite.toml")
    corpus, _ = task_text(config, "draft", config.defaults.tasks, "fixture")
    async with httpx.AsyncClient(timeout=120.0) as client:
        maker = PromptMaker(Tokenizer(client, root, "llamacpp", ""), corpus)
        await maker.prepare()
        maker.overhead = 24  # template and instruction, close enough: both tools get the very same text
        return [(await maker.window(length, 7919 * i + 1))[0] for i in range(n)]


def body(model: str, text: str, output_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": output_tokens,
        "temperature": 0.0,
        "top_k": 1,
        "seed": 42,
        "cache_prompt": False,
        "ignore_eos": True,
    }


async def suite_run(root: str, prompts: list[str], output_tokens: int, warmup: int) -> tuple[list[Measurement], float]:
    async with httpx.AsyncClient(timeout=600.0) as client:
        model = await model_name(client, root)
        url = root + "/v1/chat/completions"
        for i in range(warmup):
            await measure(
                client, url, body(model, prompts[i % len(prompts)], output_tokens), Measurement("w", "w", 1, i, 0)
            )
        start = time.perf_counter()
        out = [
            await measure(client, url, body(model, p, output_tokens), Measurement("suite", "parity", 1, i, 0))
            for i, p in enumerate(prompts)
        ]
        return out, time.perf_counter() - start


def placeholder_tokenizer(folder: Path) -> Path:
    """A one-word tokenizer aiperf can load offline (counts come from the server's usage instead)."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers

    tok = HFTokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 10**7})
    )
    return folder


def aiperf_executable() -> str | None:
    exe = Path(sys.executable).with_name("aiperf")
    return str(exe) if exe.exists() else shutil.which("aiperf")


def aiperf_run(
    root: str, model: str, prompts: list[str], output_tokens: int, warmup: int, work: Path
) -> list[dict[str, Any]]:
    exe = aiperf_executable()
    assert exe is not None
    inputs = work / "prompts.jsonl"
    inputs.write_text("".join(json.dumps({"text": p}) + "\n" for p in prompts))
    extra = [
        f"max_tokens:{output_tokens}",
        "ignore_eos:true",
        "cache_prompt:false",
        "top_k:1",
        "temperature:0",
        "seed:42",
    ]
    args = [
        exe,
        "profile",
        "--model",
        model,
        "--url",
        root,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--input-file",
        str(inputs),
        "--custom-dataset-type",
        "single_turn",
        "--request-count",
        str(len(prompts)),
        "--concurrency",
        "1",
        *(["--warmup-request-count", str(warmup)] if warmup else []),
        "--tokenizer",
        str(placeholder_tokenizer(work / "tok")),
        "--use-server-token-count",
        "--artifact-dir",
        str(work / "aiperf"),
        "--ui",
        "none",
        "--dataset-sampling-strategy",
        "sequential",
        # llama-server drops idle keep-alive connections; aiperf's pool then reuses a closed one and
        # records the request as a failure (it does not retry), so each request gets its own connection
        "--connection-reuse-strategy",
        "never",
    ]
    for e in extra:
        args += ["--extra-inputs", e]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    records = work / "aiperf" / "profile_export.jsonl"
    if proc.returncode != 0 or not records.exists():
        sys.exit(f"aiperf failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in records.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("metadata", {}).get("benchmark_phase") == "profiling" and not r.get("error")]


def metric(record: dict[str, Any], name: str) -> float:
    """A per-request aiperf metric in seconds (times) or its own unit (counts, rates)."""
    m = record["metrics"][name]
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}.get(str(m.get("unit")), 1.0)
    return float(m["value"]) * scale


def summarize_suite(ms: list[Measurement], wall: float) -> dict[str, float]:
    return {
        "TTFT mean (ms)": 1000 * statistics.mean(m.ttft_s for m in ms),
        "ITL mean (ms)": 1000 * statistics.mean(m.itl_s for m in ms),
        "request latency mean (ms)": 1000 * statistics.mean(m.latency_s for m in ms),
        "per-user tokens/s mean": statistics.mean(m.tokens_per_s for m in ms),
        "output tokens/s (system)": sum(m.output_tokens for m in ms) / wall,
    }


def summarize_aiperf(records: list[dict[str, Any]]) -> dict[str, float]:
    starts = [r["metadata"]["request_start_ns"] for r in records]
    ends = [r["metadata"]["request_end_ns"] for r in records]
    tokens = sum(metric(r, "output_sequence_length") for r in records)
    return {
        "TTFT mean (ms)": 1000 * statistics.mean(metric(r, "time_to_first_token") for r in records),
        "ITL mean (ms)": 1000 * statistics.mean(metric(r, "inter_token_latency") for r in records),
        "request latency mean (ms)": 1000 * statistics.mean(metric(r, "request_latency") for r in records),
        "per-user tokens/s mean": statistics.mean(metric(r, "output_token_throughput_per_user") for r in records),
        "output tokens/s (system)": tokens / ((max(ends) - min(starts)) * 1e-9),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running llama-server (default: start the rig's baseline)")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--input-tokens", type=int, default=512)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="rig server threads (default 1: aiperf's worker processes need a core of their own, "
        "or on two cores they slow the server they measure)",
    )
    args = parser.parse_args()
    if aiperf_executable() is None:
        print("skipped: aiperf is not installed (`.venv/bin/pip install -e '.[bench]'`; a bench-only tool).")
        return
    with endpoint(args.url, args.threads) as root, tempfile.TemporaryDirectory() as tmp:
        prompts = asyncio.run(make_prompts(root, args.requests, args.input_tokens))
        asyncio.run(suite_run(prompts=prompts[: args.warmup], root=root, output_tokens=args.output_tokens, warmup=0))
        clocks = [server_clock(root)]
        first, wall1 = asyncio.run(suite_run(root, prompts, args.output_tokens, 0))
        clocks.append(server_clock(root))
        model = asyncio.run(_model(root))
        records = aiperf_run(root, model, prompts, args.output_tokens, 0, Path(tmp))
        clocks.append(server_clock(root))
        second, wall2 = asyncio.run(suite_run(root, prompts, args.output_tokens, 0))
        clocks.append(server_clock(root))
    bad = [m.error for m in first + second if m.error]
    if bad or len(records) != len(prompts):
        sys.exit(f"incomplete runs: suite errors {bad[:3]}, aiperf {len(records)}/{len(prompts)} requests")
    s1, s2, a = summarize_suite(first, wall1), summarize_suite(second, wall2), summarize_aiperf(records)
    print(
        f"workload: {len(prompts)} requests, ~{args.input_tokens} input tokens "
        f"(median server count {statistics.median(m.prompt_tokens for m in first):.0f}), "
        f"{args.output_tokens} output tokens, concurrency 1"
    )
    print(f"{'figure':28s} {'suite 1':>10s} {'aiperf':>10s} {'suite 2':>10s} {'aiperf/suite':>13s}")
    figures: dict[str, Any] = {"suite_1": s1, "aiperf": a, "suite_2": s2}
    for name in s1:
        mean_suite = (s1[name] + s2[name]) / 2
        print(f"{name:28s} {s1[name]:10.2f} {a[name]:10.2f} {s2[name]:10.2f} {a[name] / mean_suite:13.4f}")
    n = len(prompts)
    engine_itl = [engine_itl_ms(clocks[i], clocks[i + 1], n) for i in range(3)]
    print(
        "ITL against the server's own clock over the same requests (llama.cpp --metrics: decode seconds over "
        "tokens after each request's first), which load cannot separate:"
    )
    for label, tool, eng in (
        ("suite 1", s1, engine_itl[0]),
        ("aiperf", a, engine_itl[1]),
        ("suite 2", s2, engine_itl[2]),
    ):
        print(
            f"  {label:8s} tool {tool['ITL mean (ms)']:9.3f} ms, server {eng:9.3f} ms, tool/server "
            f"{tool['ITL mean (ms)'] / eng:.4f}"
        )
    figures["engine_itl_ms"] = engine_itl
    both = first + second
    engine = [m.tokens_per_s / m.engine_tokens_per_s for m in both]
    llama = [
        m.engine_tokens_per_s / m.timings["predicted_per_second"] for m in both if m.timings.get("predicted_per_second")
    ]
    old = [
        (m.timings["predicted_n"] / m.timings["predicted_ms"] * 1000) / m.timings["predicted_per_second"]
        for m in both
        if m.timings.get("predicted_per_second")
    ]
    print(
        f"suite decode tokens/s over llama.cpp's (predicted_n - 1) / predicted_ms, per request: median "
        f"{statistics.median(engine):.4f}, range {min(engine):.4f}-{max(engine):.4f}"
    )
    if llama:
        print(
            f"(predicted_n - 1) / predicted_ms over llama.cpp's predicted_per_second: median {statistics.median(llama):.6f}; "
            f"the old predicted_n / predicted_ms was {statistics.median(old):.4f}x it"
        )
    figures["client_over_engine"] = {"median": statistics.median(engine), "min": min(engine), "max": max(engine)}
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


async def _model(root: str) -> str:
    async with httpx.AsyncClient(timeout=30.0) as client:
        return await model_name(client, root)


if __name__ == "__main__":
    main()
