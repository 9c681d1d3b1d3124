"""HumanEval (Chen et al. 2021) rows: the `humaneval` task adapter.

A row holds the function's `prompt` (signature and docstring, sometimes
helper functions and imports), its `entry_point`, and `test`: Python source
defining `check(candidate)` with asserts.  HumanEval runs
`prompt + completion + test + check(entry_point)` and counts the problem
solved when nothing raises.

Here the model answers with a fenced block (the whole function, or only its
body); the program that runs is the prompt, then that block, then the test
source and a zero-argument entry that calls `check(entry_point)` and
returns True.  The checker calls that entry once through the sandbox's call
protocol, so the result comes from the executor, never from what the
program printed or the code it exited with: a program that exits early, or
swallows the check, does not pass.  A failed assert is a wrong answer; any
other exception is a runtime error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalsuite.errors import DatasetError
from evalsuite.sandbox.cases import CodeTests, TestCase

ADAPTER = "humaneval"  # this adapter's entry-point name, written into every reference
ENTRY = "evalsuite_humaneval_check"
_FIELDS = ("task_id", "prompt", "entry_point", "test")
_FAILED_ASSERT = "a test assertion failed"
_HARNESS = """

def {entry}():
    try:
        check({entry_point})
    except AssertionError:
        return {failed!r}
    return True
"""


def prepare_rows(rows: list[dict[str, Any]], options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Check each row's fields and add `problem` (the number after `HumanEval/`) and `reference`."""
    if options:
        raise DatasetError(f"HumanEval takes no dataset options; got {', '.join(sorted(options))}.")
    out = []
    for index, row in enumerate(rows):
        where = f"HumanEval row {index + 1} ({row.get('task_id', '?')})"
        missing = [f for f in _FIELDS if not isinstance(row.get(f), str) or not row[f].strip()]
        if missing:
            raise DatasetError(f"{where}: missing or empty field(s) {', '.join(missing)}.")
        if not row["entry_point"].isidentifier():
            raise DatasetError(f"{where}: entry_point {row['entry_point']!r} is not a Python name.")
        prepared = dict(row)
        prepared["problem"] = row["task_id"].rsplit("/", 1)[-1]
        prepared["reference"] = {
            "adapter": ADAPTER,
            "prompt": row["prompt"],
            "test": row["test"],
            "entry_point": row["entry_point"],
        }
        out.append(prepared)
    return out


def code_tests(reference: Mapping[str, Any], where: str = "reference") -> CodeTests:
    """One functional case: call the harness entry with no arguments, expect True."""
    fields = {k: reference.get(k) for k in ("prompt", "test", "entry_point")}
    bad = [k for k, v in fields.items() if not isinstance(v, str) or not v.strip()]
    if bad:
        raise DatasetError(f"{where}: the HumanEval reference lacks {', '.join(bad)}.")
    entry_point = str(fields["entry_point"])
    if not entry_point.isidentifier():
        raise DatasetError(f"{where}: entry_point {entry_point!r} is not a Python name.")
    harness = _HARNESS.format(entry=ENTRY, entry_point=entry_point, failed=_FAILED_ASSERT)
    return CodeTests(
        cases=(TestCase(input="", output="true"),),
        fn_name=ENTRY,
        prefix=str(fields["prompt"]),
        suffix=str(fields["test"]) + harness,
    )
