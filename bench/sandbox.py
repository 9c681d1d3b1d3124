"""Sandbox executor throughput: the fixture problems' tests, pooled across all cores vs one at a time.

Runs every public test of fixtures/livecodebench.jsonl with its reference
solution (one execution per stdin test, one per functional problem), `--rounds`
times, first one at a time and then through `Sandbox.map` with one worker per
CPU, in the same process.  Prints executions per second for both and their
ratio, plus the cost of an empty program (the sandbox's fixed overhead).
Then the cost of judging one large functional reply (`--elements`, default
300,000 integers): refused from its length header by the checker's cap, parsed
in full as tagged JSON (a reply under the cap), and the previous path
(`ast.literal_eval` of the value's repr) as the reference.

    .venv/bin/python bench/sandbox.py [--rounds 3] [--workers N]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalsuite.sandbox import Program, Sandbox  # noqa: E402
from evalsuite.sandbox.calls import CallDriver, default_cap, parse_reply  # noqa: E402
from evalsuite.tasks.data import read_jsonl  # noqa: E402
from evalsuite.tasks.livecodebench import prepare_rows, tests_of  # noqa: E402


def fixture_programs() -> list[Program]:
    rows = prepare_rows(read_jsonl(ROOT / "fixtures" / "livecodebench.jsonl"), {})
    programs = []
    for row in rows:
        code = (ROOT / "fixtures" / "livecodebench_solutions" / f"{row['question_id']}.py").read_text()
        tests, fn = tests_of(row["reference"]), row["reference"]["fn_name"]
        if fn:
            calls = tuple(tuple(t["input"].split("\n")) for t in tests)
            programs.append(Program(code, mode="functional", fn_name=fn, calls=calls))
        else:
            programs.extend(Program(code, stdin=t["input"].encode()) for t in tests)
    return programs


def timed(sandbox: Sandbox, programs: list[Program], workers: int) -> float:
    started = time.perf_counter()
    results = sandbox.map(programs, workers=workers)
    elapsed = time.perf_counter() - started
    bad = [r for r in results if r.exit_code != 0 or r.timed_out or any("ok" not in c for c in r.calls)]
    if bad:
        raise SystemExit(f"{len(bad)} reference executions failed; first stderr: {bad[0].stderr[-300:]!r}")
    return elapsed


def reply_costs(elements: int) -> dict[str, float]:
    """Seconds to refuse, to parse, and (reference) to literal_eval one reply of `elements` integers."""
    value = list(range(elements))
    data = json.dumps({"i": 0, "ok": value}).encode()
    frame = b"%d\n" % len(data) + data
    driver = CallDriver(calls=[("1",)], caps=[default_cap("[1, 2, 3]", 16 << 20)], cpu_s=6.0, wall_s=17.0)
    driver.feed(b'15\n{"ready": true}', 0.0, 0.0)
    started = time.perf_counter()
    driver.feed(frame[: 1 << 16], 0.0, 0.0)  # the first pipe read already carries the header
    refused = time.perf_counter() - started
    assert driver.results and "oversize" in driver.results[0]
    started = time.perf_counter()
    parse_reply(data)
    parsed = time.perf_counter() - started
    text = repr(value)
    started = time.perf_counter()
    ast.literal_eval(text)
    literal = time.perf_counter() - started
    return {"refused": refused, "parsed": parsed, "literal_eval": literal}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--elements", type=int, default=300_000)
    args = parser.parse_args()
    sandbox = Sandbox()
    programs = fixture_programs() * args.rounds
    empty = [Program("pass")] * 10
    timed(sandbox, programs[:2], 1)  # warm the page cache
    overhead = timed(sandbox, empty, 1) / len(empty)
    serial = timed(sandbox, programs, 1)
    pooled = timed(sandbox, programs, args.workers)
    print(
        json.dumps(
            {
                "isolation": sandbox.isolation,
                "cpus": os.cpu_count(),
                "workers": args.workers,
                "load_avg_1m": round(os.getloadavg()[0], 2),
            }
        )
    )
    print(f"executions:            {len(programs)} ({args.rounds} rounds of the fixture tests)")
    print(f"empty program:         {overhead * 1000:.0f} ms per execution (sandbox fixed cost)")
    print(f"one at a time:         {len(programs) / serial:.2f} executions/s ({serial:.2f} s)")
    print(f"pool of {args.workers}:             {len(programs) / pooled:.2f} executions/s ({pooled:.2f} s)")
    print(f"speed-up pool/serial:  {serial / pooled:.2f}x")
    costs = reply_costs(args.elements)
    print(
        f"reply of {args.elements} ints: refused by the cap {costs['refused'] * 1000:.2f} ms, "
        f"parsed as tagged JSON {costs['parsed'] * 1000:.0f} ms, "
        f"reference ast.literal_eval {costs['literal_eval'] * 1000:.0f} ms "
        f"({costs['literal_eval'] / max(costs['parsed'], 1e-9):.1f}x the JSON parse, "
        f"{costs['literal_eval'] / max(costs['refused'], 1e-9):.0f}x the refusal)"
    )


if __name__ == "__main__":
    main()
