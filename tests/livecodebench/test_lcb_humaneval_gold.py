"""Gold check of the call-based runner: HumanEval's canonical solutions pass their own asserts.

Each `assert candidate(args) == expected` with JSON-exact literals becomes a
functional test (arguments one JSON value per line, as LiveCodeBench writes
them); every problem with at least one such test is run, at every isolation
level (root's three and an unprivileged user's): the verdicts must not
depend on the level.  Skips when ../shared/data is absent.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
from typing import Any

import pytest
from as_user import LEVELS, UserSandbox, sandbox_at
from lcb_helpers import shared_data_dir

from evalsuite.sandbox import Limits
from evalsuite.sandbox.checker import Checker

pytestmark = pytest.mark.gold


def _json_exact(value: Any) -> bool:
    try:
        return json.loads(json.dumps(value)) == value and "(" not in repr(value)
    except (TypeError, ValueError):
        return False


def functional_tests(test_source: str) -> list[dict[str, str]]:
    tests = []
    for node in ast.walk(ast.parse(test_source)):
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
            continue
        call, ops, rights = node.test.left, node.test.ops, node.test.comparators
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "candidate"):
            continue
        if len(ops) != 1 or not isinstance(ops[0], ast.Eq) or call.keywords:
            continue
        try:
            args = [ast.literal_eval(a) for a in call.args]
            expected = ast.literal_eval(rights[0])
        except (ValueError, SyntaxError):
            continue
        if all(_json_exact(a) for a in args) and _json_exact(expected) and not isinstance(expected, float):
            tests.append(
                {
                    "input": "\n".join(json.dumps(a) for a in args),
                    "output": json.dumps(expected),
                    "testtype": "functional",
                }
            )
    return tests


@pytest.fixture(scope="module")
def problems() -> list[dict[str, Any]]:
    path = shared_data_dir() / "humaneval" / "HumanEval.jsonl.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    if os.geteuid() != 0:
        pytest.skip("the sandbox tests run as root (as in CI)")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [r | {"tests": functional_tests(r["test"])} for r in rows]


@pytest.mark.parametrize("level", LEVELS)
def test_canonical_solutions_pass_and_broken_ones_fail(problems: list[dict[str, Any]], level: str) -> None:
    usable = [p for p in problems if p["tests"]]
    assert len(usable) >= 120, "the assert conversion lost most of HumanEval"
    sandbox = sandbox_at(level, Limits(memory_mb=512, processes=8))
    checker = Checker(sandbox, timeout_s=5.0, stop_on_first_failure=False)
    from concurrent.futures import ThreadPoolExecutor

    def check(p: dict[str, Any]) -> tuple[str, list[str], list[str]]:
        good = checker.run(p["prompt"] + p["canonical_solution"], p["tests"], p["entry_point"])
        broken = checker.run(p["prompt"] + "    return None\n", p["tests"][:1], p["entry_point"])
        return p["task_id"], [o.outcome for o in good], [o.outcome for o in broken]

    try:
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(check, usable))
    finally:
        if isinstance(sandbox, UserSandbox):
            sandbox.close()
    failing = {tid: good for tid, good, _ in results if set(good) != {"passed"}}
    assert failing == {}
    # `return None` is right for a few problems whose first test expects null; all others must fail.
    wrong = [tid for tid, _, broken in results if broken != ["wrong_answer"]]
    assert len(wrong) <= 3, wrong
