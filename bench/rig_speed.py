"""Rig figures: tokens/s and draft acceptance per configuration, and the learned model's accuracy.

Each configuration runs alone (2 threads) on the same prompts, greedy, with
`cache_prompt: false`; speed is the server's own decode rate
(`timings.predicted_per_second`, averaged over requests) and the ratio is
against `baseline` (or `learned-baseline`) measured in the same run.

    .venv/bin/python bench/rig_speed.py                 # all configurations
    .venv/bin/python bench/rig_speed.py draft dflash    # a subset (baseline always runs)
    .venv/bin/python bench/rig_speed.py --accuracy      # also grade the learned model on all 65 fixture problems
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from evalsuite.rig.launcher import RIG_CONFIGS, serve
from evalsuite.rig.learned import is_correct, learned_items

REPO = Path(__file__).resolve().parents[1]


def _request(client: httpx.Client, url: str, messages: list[dict[str, str]], max_tokens: int) -> dict[str, Any]:
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0.0, "seed": 42, "cache_prompt": False}
    response = client.post(url + "/v1/chat/completions", json=body)
    response.raise_for_status()
    return response.json()


def measure(name: str, prompts: list[list[dict[str, str]]], max_tokens: int) -> dict[str, float]:
    """Mean decode tok/s, acceptance and wall time of one configuration over the prompts."""
    with serve([name], threads=2) as servers, httpx.Client(timeout=600.0) as client:
        url = servers[name].base_url
        _request(client, url, prompts[0], 8)  # warm-up
        started = time.perf_counter()
        results = [_request(client, url, p, max_tokens) for p in prompts]
        wall = time.perf_counter() - started
    timings = [r["timings"] for r in results]
    drafted = sum(t.get("draft_n", 0) for t in timings)
    accepted = sum(t.get("draft_n_accepted", 0) for t in timings)
    return {
        "tok_s": statistics.mean(t["predicted_per_second"] for t in timings),
        "tokens": sum(t["predicted_n"] for t in timings),
        "acceptance": accepted / drafted if drafted else float("nan"),
        "drafted": drafted,
        "wall_s": wall,
    }


def learned_accuracy(max_tokens: int = 1024) -> tuple[int, int, int]:
    """(correct, reproduced exactly, total) of learned-baseline over all fixture problems."""
    items = learned_items(REPO)
    correct = exact = 0
    with serve(["learned-baseline"], threads=2) as servers, httpx.Client(timeout=600.0) as client:
        url = servers["learned-baseline"].base_url
        for item in items:
            text = _request(client, url, list(item.sample.messages), max_tokens)["choices"][0]["message"]["content"]
            correct += is_correct(item, text)
            exact += text.strip() == item.answer.strip()
    return correct, exact, len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="configurations (default: all)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--accuracy", action="store_true", help="grade learned-baseline on the fixture problems")
    args = parser.parse_args()
    names = args.names or list(RIG_CONFIGS)
    rows = [json.loads(line) for line in (REPO / "fixtures" / "gsm8k.jsonl").read_text().splitlines()[:5]]
    plain = [[{"role": "user", "content": r["question"]}] for r in rows]
    learned = [list(i.sample.messages) for i in learned_items(REPO)[:5]]
    figures: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(["baseline", *names]):
        figures[name] = measure(name, learned if name.startswith("learned") else plain, args.max_tokens)
    print(f"{'config':18s} {'tok/s':>8s} {'x base':>7s} {'accept':>7s} {'drafted':>8s} {'tokens':>7s}")
    for name, f in figures.items():
        ref = figures.get(RIG_CONFIGS[name].compare_to or name, f)
        accept = "-" if f["drafted"] == 0 else f"{f['acceptance']:.1%}"
        print(f"{name:18s} {f['tok_s']:8.1f} {f['tok_s'] / ref['tok_s']:7.2f} {accept:>7s} "
              f"{f['drafted']:8.0f} {f['tokens']:7.0f}")  # fmt: skip
    if args.accuracy:
        correct, exact, total = learned_accuracy()
        print(f"learned-baseline accuracy on the fixture problems: {correct}/{total} = {correct / total:.1%} "
              f"({exact}/{total} answers reproduced exactly as trained)")


if __name__ == "__main__":
    main()
