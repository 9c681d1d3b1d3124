"""Per-request overhead of the run pipeline against an instant local endpoint.

Both arms send the same requests to the same scripted server (a separate
process, so it does not share the client's event loop):
  reference: a minimal asyncio + httpx loop that posts each body and parses the JSON
             (httpx's default transport and Python's json, as a bare loop would);
  suite:     `evalsuite.runner.execute` (prompt building, retries, token parsing,
             durable SQLite commits, progress callback), over the engine's own client:
             httpx on asyncio sockets (engines/transport.py), orjson parsing.
Prints, per request, the wall-clock time and the client process's CPU time
(user + system, all threads: the part the suite itself costs, less sensitive
to other load on the machine) for each arm, and the ratios suite / reference,
at concurrency 1 and 8 (target: under 1.10x).

    python bench/overhead.py [--n 400] [--repeats 7]

Single repeats move by +-0.2 on a shared two-core machine: read the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures"))
sys.path.insert(0, str(ROOT / "tests"))

from projects import make_project  # noqa: E402

from evalsuite.config import load_config  # noqa: E402
from evalsuite.engines import make_engine  # noqa: E402
from evalsuite.engines.transport import PlainTransport  # noqa: E402
from evalsuite.runner import execute, plan_run  # noqa: E402


def start_server(port: int, tokens: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "fixtures" / "fake_server.py"), "--port", str(port), "--tokens", str(tokens)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
    return proc


async def _reference(url: str, bodies: list[dict], concurrency: int, transport: str) -> None:
    it = iter(bodies)
    limits = httpx.Limits(max_connections=concurrency)
    own = PlainTransport(limits) if transport == "engine" else None
    async with httpx.AsyncClient(limits=limits, transport=own) as client:

        async def worker() -> None:
            for body in it:
                resp = await client.post(f"{url}/chat/completions", json=body)
                json.loads(resp.content)

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call, from a collected heap.

    A full garbage collection of this process costs ~40 ms (0.1 ms a request over 400) and falls
    on whichever call allocates past the collector's threshold: collecting before each call keeps
    the garbage one arm left from being collected in the other arm's time.
    """
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def reference_loop(url: str, bodies: list[dict], concurrency: int, transport: str = "httpx") -> tuple[float, float]:
    """The least a client can do: post, await, parse."""
    return timed(lambda: asyncio.run(_reference(url, bodies, concurrency, transport)))


def suite_run(config_path: Path, runs_dir: Path) -> tuple[float, float]:
    config = load_config(config_path)
    plan = plan_run(config, "base", "echo")
    plan.runs_dir = runs_dir
    outcomes = []
    elapsed = timed(lambda: outcomes.append(asyncio.run(execute(plan, progress=lambda done, total: None))))
    assert outcomes[0].recorded == len(plan.samples)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=400, help="requests per measurement")
    parser.add_argument("--repeats", type=int, default=7, help="alternating runs of each arm; medians are printed")
    parser.add_argument("--tokens", type=int, default=32, help="tokens per fake completion (top-5 logprobs each)")
    parser.add_argument("--port", type=int, default=18099)
    parser.add_argument(
        "--reference-transport",
        choices=["httpx", "engine"],
        default="httpx",
        help="the bare loop over httpx's default transport (the target), or over the engine's own: "
        "what the pipeline costs beyond its HTTP client",
    )
    args = parser.parse_args()
    server = start_server(args.port, args.tokens)
    url = f"http://127.0.0.1:{args.port}/v1"
    try:
        print(
            f"{args.n} requests x {args.tokens} tokens with top-5 logprobs, instant endpoint; median of {args.repeats}; "
            f"reference over {args.reference_transport}'s transport"
        )
        print(
            f"{'concurrency':>11}  {'wall ms/req: reference':>22}  {'suite':>7}  {'ratio':>6}   "
            f"{'client CPU ms/req: reference':>28}  {'suite':>7}  {'ratio':>6}"
        )
        runs: list[str] = []
        for concurrency in (1, 8):
            with tempfile.TemporaryDirectory() as tmp:
                config = make_project(Path(tmp), url, n=args.n, target_extra=f"concurrency = {concurrency}")
                cfg = load_config(config)
                plan = plan_run(cfg, "base", "echo")
                engine = make_engine(cfg.target("base"))
                engine.model = "fake-model"
                bodies = [engine.request_body(s, plan.params) for s in plan.samples]
                ref, suite = [], []
                for r in range(args.repeats):
                    ref.append(reference_loop(url, bodies, concurrency, args.reference_transport))
                    suite.append(suite_run(config, Path(tmp) / f"runs{r}"))
            row = [statistics.median(x[i] for x in arm) / args.n * 1e3 for i in (0, 1) for arm in (ref, suite)]
            print(
                f"{concurrency:>11}  {row[0]:>22.3f}  {row[1]:>7.3f}  {row[1] / row[0]:>5.2f}x   "
                f"{row[2]:>28.3f}  {row[3]:>7.3f}  {row[3] / row[2]:>5.2f}x"
            )
            paired = [s[1] / r[1] for r, s in zip(ref, suite)]
            runs.append(
                f"c{concurrency}: "
                + " ".join(f"{x:.2f}" for x in paired)
                + f" (median {statistics.median(paired):.2f})"
            )
        print("client CPU ratio of each repeat, in order:", "; ".join(runs))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
