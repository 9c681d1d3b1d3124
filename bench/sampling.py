"""How many draws? Time per draw on the rig and the TV distance each N can detect, for sample-test.

Draws the largest N once per arm (baseline against TARGET, default the learned
model against its DFlash drafter) into a scratch project, then judges the
first N draws for each smaller N: the detectable TV, the tested nodes and the
verdict at every N come from the same draws. Time is reported per draw and as
a ratio against one greedy request of the same length to the same baseline
server, measured in the same run. Settings default to the shipped config's
[targets.baseline.sampling] table (the learned model's); flags override.

`--branching` measures where a model branches before any draw is spent: along
the baseline's greedy answer to every fixture prompt of every task, the share
of the next-token mass (top 20 alternatives, at the sampling temperature) off
the first choice, per position. A sampling test only sees nodes where that
share is large.

    .venv/bin/python bench/sampling.py                          # learned-dflash, N = 32 64 128 256
    .venv/bin/python bench/sampling.py --branching              # where the learned model branches
    .venv/bin/python bench/sampling.py --target synthetic --baseline baseline --task gsm8k --temperature 0.7 --top-k 8
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from projects import copy_project, rig_target, shipped_sampling  # noqa: E402

from evalsuite.config import Config, load_config  # noqa: E402
from evalsuite.engines import make_engine  # noqa: E402
from evalsuite.rig.launcher import serve  # noqa: E402
from evalsuite.runner import plan_run  # noqa: E402
from evalsuite.sampling.plan import resolve_settings  # noqa: E402
from evalsuite.sampling.run import draw_arm, judge_arms, load_arm  # noqa: E402
from evalsuite.sampling.verdict import JudgeSettings  # noqa: E402


def greedy_request_s(baseline: str, tokens: int, repeats: int = 20) -> float:
    """Mean wall time of one greedy chat request of `tokens` tokens to the one-thread baseline (the reference)."""
    body = {
        "messages": [{"role": "user", "content": "Natalia sold clips to 48 of her friends."}],
        "max_tokens": tokens,
        "temperature": 0.0,
        "cache_prompt": False,
        "logprobs": True,
        "top_logprobs": 1,
    }
    with serve([baseline], threads=1) as servers, httpx.Client(timeout=300) as client:
        url = servers[baseline].base_url + "/v1/chat/completions"
        client.post(url, json=body).raise_for_status()
        started = time.perf_counter()
        for _ in range(repeats):
            client.post(url, json=body).raise_for_status()
        return (time.perf_counter() - started) / repeats


def off_first_choice(top_logprobs: np.ndarray, temperature: float) -> np.ndarray:
    """Per position, the probability mass off the most likely token, from the top alternatives at `temperature`."""
    out = []
    for row in top_logprobs.astype(float):
        row = row[np.isfinite(row)]
        w = np.exp((row - row.max()) / temperature)
        out.append(1.0 - w.max() / w.sum())
    return np.array(out)


def branching(config: Config, baseline: str, tasks: list[str], temperature: float, depth: int) -> None:
    """Print, per task, how much mass lies off the greedy choice along the baseline's greedy answers."""
    print(f"mass off the first choice at temperature {temperature:g}, first {depth} greedy tokens, top 20 alternatives")
    print(
        f"{'task':<15} {'prompts':>7} {'max, any position':>18} {'per prompt max, first 8':>24}  mean entropy, first 8"
    )
    with serve([baseline], threads=1) as servers:
        for task in tasks:
            plan = plan_run(config, baseline, task)
            engine = make_engine(plan.target, base_url=servers[baseline].base_url)
            params = replace(plan.params, max_tokens=depth, top_logprobs=20, temperature=0.0, top_k=1)

            async def answers(plan=plan, engine=engine, params=params):  # type: ignore[no-untyped-def]
                try:
                    return [await engine.generate(s, params) for s in plan.samples]
                finally:
                    await engine.aclose()

            off, first8, entropy = [], [], []
            for completion in asyncio.run(answers()):
                top = completion.tokens.top_logprobs
                share = off_first_choice(top, temperature)
                off.append(share.max(initial=0.0))
                first8.append(share[:8].max(initial=0.0))
                rows = [r[np.isfinite(r)] / temperature for r in top[:8].astype(float)]
                entropy.append(sum(float(-(np.exp(r - _lse(r)) * (r - _lse(r))).sum()) for r in rows))
            print(
                f"{task:<15} {len(off):>7} {max(off):>17.1%} {min(first8):>11.0%} to {max(first8):>4.0%}"
                f"  {np.mean(entropy):.2f} nats"
            )


def _lse(row: np.ndarray) -> float:
    m = float(row.max())
    return m + math.log(float(np.exp(row - m).sum()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="learned-dflash", help="rig configuration to test")
    parser.add_argument("--baseline", default="learned-baseline", help="rig configuration it is compared with")
    parser.add_argument("--draws", type=int, nargs="+", help="N values (default: 32 64 128 and the table's)")
    parser.add_argument("--prompts", type=int)
    parser.add_argument("--tokens", type=int)
    parser.add_argument("--task", action="append")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--top-k", type=int)
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--branching", action="store_true", help="measure where the baseline branches; no draws")
    parser.add_argument("--depth", type=int, default=64, help="greedy tokens examined by --branching")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        targets = rig_target(args.baseline, baseline=None, control=None, extra=shipped_sampling("baseline"))
        targets += rig_target(args.target, baseline=args.baseline, control=None)
        config = load_config(copy_project(Path(tmp), targets, tasks='["math500", "gsm8k", "livecodebench"]'))
        flags = {"prompts": args.prompts, "tokens": args.tokens, "temperature": args.temperature}
        flags |= {"top_k": args.top_k, "top_p": args.top_p, "tasks": args.task}
        resolved = resolve_settings(
            config, args.target, args.baseline, {**flags, "draws": max(args.draws) if args.draws else None}
        )
        if args.branching:
            tasks = args.task or ["math500", "gsm8k", "livecodebench"]
            branching(config, args.baseline, tasks, resolved.settings.temperature, args.depth)
            return
        settings, tasks = resolved.settings, resolved.tasks
        sizes = sorted(set(args.draws or [32, 64, 128, settings.draws]))
        top = settings.draws
        print(
            f"{args.target} vs {args.baseline}: tasks {', '.join(tasks)}, {settings.prompts} prompts, "
            f"{settings.max_tokens} tokens, temperature {settings.temperature:g}, top-p {settings.top_p:g}, "
            f"top-k {settings.top_k or 'off'}"
        )
        reference = greedy_request_s(args.baseline, settings.max_tokens)
        times, folders, drafted = {}, {}, ""
        for role, name, stream in (("baseline", args.baseline, 42), ("candidate", args.target, 43)):
            started = time.perf_counter()
            outcomes = draw_arm(config, name, tasks, settings, stream=stream)
            times[role], folders[role] = time.perf_counter() - started, [o.folder for o in outcomes]
        per_draw = {r: t / (top * settings.prompts * len(tasks)) for r, t in times.items()}
        print(f"reference: one greedy {settings.max_tokens}-token request to the baseline: {reference * 1000:.1f} ms")
        for role, name in (("baseline", args.baseline), ("candidate", args.target)):
            print(
                f"{role} ({name}): {per_draw[role] * 1000:.1f} ms per draw "
                f"({per_draw[role] / reference:.2f}x the reference; includes the server start)"
            )
        print(f"\n{'N':>6} {'both arms, est.':>16} {'tested nodes':>13} {'detectable TV':>14}  verdict  acceptance")
        for n in sizes:
            test = judge_arms(
                load_arm(folders["baseline"], draws=n),
                load_arm(folders["candidate"], draws=n),
                JudgeSettings(max_tv=1.0),
            )
            c = test.candidate
            drafted = f"{c.accepted}/{c.drafted} ({c.accepted / c.drafted:.0%})" if c.drafted else "no drafts"
            est = n * settings.prompts * len(tasks) * sum(per_draw.values())
            print(
                f"{n:>6} {est:>15.0f}s {test.verdict.family:>13} {test.verdict.detectable:>14.3f}  "
                f"{test.verdict.outcome:<8} {drafted}"
            )


if __name__ == "__main__":
    main()
