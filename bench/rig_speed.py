"""Rig figures: speed, acceptance, tau and token identity per configuration, and the learned model's accuracy.

Each configuration runs alone (2 threads) on the same prompts, greedy, with
`cache_prompt: false`; speed is the server's own decode rate
(`timings.predicted_per_second`, averaged over requests) and the ratio is
against the configuration's reference (`baseline`, `learned-baseline`,
`smollm2-baseline`, ...) measured in the same run.  Acceptance is accepted /
drafted tokens, tau the tokens per target forward pass (predicted /
(predicted - accepted)); identity counts prompts whose tokens equal the
reference's, and for the others prints the reference's top-2 margin at the
first divergence.

    .venv/bin/python bench/rig_speed.py                         # constructed + learned configurations
    .venv/bin/python bench/rig_speed.py learned-dflash          # a subset (each reference always runs)
    .venv/bin/python bench/rig_speed.py --smollm2               # the real model's configurations
    .venv/bin/python bench/rig_speed.py --accuracy              # also grade the learned model on the fixture
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from evalsuite.rig.launcher import RIG_CONFIGS, serve

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # rigbuild/: the checkout's rig-building code

from rigbuild.dflash_train import fixture_messages  # noqa: E402
from rigbuild.learned import is_correct, learned_items  # noqa: E402

Messages = list[dict[str, str]]


def _request(
    client: httpx.Client, url: str, messages: Messages, max_tokens: int, logprobs: bool = True
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "seed": 42,
        "top_k": 1,
        "cache_prompt": False,
    }
    if logprobs:
        body |= {"logprobs": True, "top_logprobs": 2}
    response = client.post(url + "/v1/chat/completions", json=body)
    response.raise_for_status()
    return response.json()


@dataclass
class Figures:
    """What one configuration did on the prompts."""

    tok_s: float
    predicted: int
    drafted: int
    accepted: int
    ids: list[list[int]] = field(repr=False)
    margins: list[list[float | None]] = field(repr=False)

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else math.nan

    @property
    def tau(self) -> float:
        return self.predicted / (self.predicted - self.accepted) if self.drafted else math.nan


def measure(name: str, prompts: list[Messages], max_tokens: int, threads: int = 2) -> Figures:
    """Decode speed, draft counts, ids and top-2 margins of one configuration over the prompts."""
    with serve([name], threads=threads) as servers, httpx.Client(timeout=900.0) as client:
        url = servers[name].base_url
        _request(client, url, prompts[0], 8)  # warm-up
        results = [_request(client, url, p, max_tokens) for p in prompts]
    timings = [r["timings"] for r in results]
    ids, margins = [], []
    for r in results:
        content = r["choices"][0]["logprobs"]["content"]
        ids.append([int(t["id"]) for t in content])
        tops = [t.get("top_logprobs") or [] for t in content]
        margins.append([top[0]["logprob"] - top[1]["logprob"] if len(top) >= 2 else None for top in tops])
    return Figures(
        tok_s=statistics.mean(t["predicted_per_second"] for t in timings),
        predicted=sum(t["predicted_n"] for t in timings),
        drafted=sum(t.get("draft_n", 0) for t in timings),
        accepted=sum(t.get("draft_n_accepted", 0) for t in timings),
        ids=ids,
        margins=margins,
    )


def identity(ref: Figures, other: Figures) -> tuple[int, list[str]]:
    """(prompts token-identical to the reference, 'token@margin' at each first divergence)."""
    same, notes = 0, []
    for a, b, m in zip(ref.ids, other.ids, ref.margins):
        at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        if at is None and len(a) == len(b):
            same += 1
            continue
        at = min(len(a), len(b)) if at is None else at
        margin = m[at] if at < len(m) else None
        notes.append(f"{at}@{margin:.3f}" if margin is not None else f"{at}@-")
    return same, notes


def learned_accuracy(max_tokens: int = 1024) -> tuple[int, int, int]:
    """(correct, reproduced exactly, total) of learned-baseline over all fixture problems."""
    items = learned_items()
    correct = exact = 0
    with serve(["learned-baseline"], threads=1) as servers, httpx.Client(timeout=600.0) as client:
        url = servers["learned-baseline"].base_url
        for item in items:
            reply = _request(client, url, list(item.sample.messages), max_tokens, logprobs=False)
            text = reply["choices"][0]["message"]["content"]
            correct += is_correct(item, text)
            exact += text.strip() == item.answer.strip()
    return correct, exact, len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="configurations (default: all but smollm2-*)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--prompts", type=int, default=10, help="prompts per configuration (default 10)")
    parser.add_argument("--smollm2", action="store_true", help="the SmolLM2 configurations")
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        help="threads per server (default 2; use 1 on a busy machine: llama.cpp's threads spin)",
    )
    parser.add_argument("--accuracy", action="store_true", help="grade learned-baseline on the fixture problems")
    args = parser.parse_args()
    names = args.names or [n for n in RIG_CONFIGS if n.startswith("smollm2") == args.smollm2]
    every = fixture_messages()
    step = max(1, len(every) // args.prompts)
    spread = every[::step][: args.prompts]  # all three tasks' fixture problems, evenly
    ordered: list[str] = []
    for name in names:
        ref = RIG_CONFIGS[name].compare_to
        ordered += [ref, name] if ref else [name]
    figures: dict[str, Figures] = {}
    for name in dict.fromkeys(ordered):
        figures[name] = measure(name, spread, args.max_tokens, args.threads)
    print(
        f"{len(spread)} fixture prompts, {args.max_tokens} greedy tokens max, each configuration alone "
        f"({args.threads} thread{'s' if args.threads > 1 else ''})"
    )
    print(
        f"{'config':18s} {'tok/s':>8s} {'x ref':>6s} {'accept':>7s} {'tau':>5s} {'drafted':>8s} {'tokens':>7s} "
        f"{'identical':>9s}  divergences (token@ref margin, nats)"
    )
    for name, f in figures.items():
        ref_name = RIG_CONFIGS[name].compare_to or name
        ref = figures[ref_name]
        same, notes = identity(ref, f)
        accept = "-" if f.drafted == 0 else f"{f.acceptance:.1%}"
        tau = "-" if f.drafted == 0 else f"{f.tau:.2f}"
        print(
            f"{name:18s} {f.tok_s:8.1f} {f.tok_s / ref.tok_s:6.2f} {accept:>7s} {tau:>5s} {f.drafted:8d} "
            f"{f.predicted:7d} {same:>4d}/{len(f.ids):<4d}  {' '.join(notes)}"
        )
    if args.accuracy:
        correct, exact, total = learned_accuracy()
        print(
            f"learned-baseline accuracy on the fixture problems: {correct}/{total} = {correct / total:.1%} "
            f"({exact}/{total} answers reproduced exactly as trained)"
        )


if __name__ == "__main__":
    main()
