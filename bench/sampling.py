"""How many draws? Time per draw on the rig and the TV distance each N can detect, for sample-test.

Draws the largest N once per arm (baseline against TARGET, default dflash) into
a scratch project, then judges the first N draws for each smaller N: the
detectable TV, the tested nodes and the verdict at every N come from the same
draws. Time is reported per draw and as a ratio against one greedy request of
the same length to the same baseline server, measured in the same run.

    .venv/bin/python bench/sampling.py                       # dflash, N = 32 64 128 256, 2 prompts, 8 tokens
    .venv/bin/python bench/sampling.py --target draft --draws 64 128 --prompts 1 --tokens 8
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from projects import copy_project, rig_target  # noqa: E402

from evalsuite.config import load_config  # noqa: E402
from evalsuite.rig.launcher import serve  # noqa: E402
from evalsuite.sampling.plan import DrawSettings  # noqa: E402
from evalsuite.sampling.run import draw_arm, judge_arms, load_arm  # noqa: E402
from evalsuite.sampling.verdict import JudgeSettings  # noqa: E402


def greedy_request_s(tokens: int, repeats: int = 20) -> float:
    """Mean wall time of one greedy chat request of `tokens` tokens to the one-thread rig baseline (the reference)."""
    body = {
        "messages": [{"role": "user", "content": "Natalia sold clips to 48 of her friends."}],
        "max_tokens": tokens,
        "temperature": 0.0,
        "cache_prompt": False,
        "logprobs": True,
        "top_logprobs": 1,
    }
    with serve(["baseline"], threads=1) as servers, httpx.Client(timeout=300) as client:
        url = servers["baseline"].base_url + "/v1/chat/completions"
        client.post(url, json=body).raise_for_status()
        started = time.perf_counter()
        for _ in range(repeats):
            client.post(url, json=body).raise_for_status()
        return (time.perf_counter() - started) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="dflash")
    parser.add_argument("--draws", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=8)
    args = parser.parse_args()
    top = max(args.draws)
    with tempfile.TemporaryDirectory() as tmp:
        config_path = copy_project(
            Path(tmp), rig_target("baseline", baseline=None, control=None) + rig_target(args.target, control=None)
        )
        config = load_config(config_path)
        settings = DrawSettings(draws=top, prompts=args.prompts, max_tokens=args.tokens)
        reference = greedy_request_s(args.tokens)
        times, folders = {}, {}
        for role, name, stream in (("baseline", "baseline", 42), ("candidate", args.target, 43)):
            started = time.perf_counter()
            outcome = draw_arm(config, name, ["gsm8k"], settings, stream=stream)[0]
            times[role], folders[role] = time.perf_counter() - started, outcome.folder
        per_draw = {r: t / (top * args.prompts) for r, t in times.items()}
        print(f"reference: one greedy {args.tokens}-token request to the baseline: {reference * 1000:.1f} ms")
        for role, name in (("baseline", "baseline"), ("candidate", args.target)):
            print(
                f"{role} ({name}): {per_draw[role] * 1000:.1f} ms per draw "
                f"({per_draw[role] / reference:.2f}x the reference; includes the server start)"
            )
        print(f"\n{'N':>6} {'both arms, est.':>16} {'tested nodes':>13} {'detectable TV':>14}  verdict")
        for n in sorted(args.draws):
            test = judge_arms(
                load_arm([folders["baseline"]], draws=n),
                load_arm([folders["candidate"]], draws=n),
                JudgeSettings(max_tv=1.0),
            )
            est = n * args.prompts * sum(per_draw.values())
            print(
                f"{n:>6} {est:>15.0f}s {test.verdict.family:>13} {test.verdict.detectable:>14.3f}  "
                f"{test.verdict.outcome}"
            )


if __name__ == "__main__":
    main()
