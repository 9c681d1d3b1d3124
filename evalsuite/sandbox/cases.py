"""The contract between a code task's adapter and the code grader: what to run and what it must produce.

A task adapter turns one stored reference into `CodeTests` (its
`code_tests(reference)` hook); the code grader hands them to the checker with
the program it extracted.  Nothing downstream knows the dataset: the adapter
decides how the tests are stored, decoded and wrapped around the program.

Two kinds of test, told apart by `fn_name`:

- stdin (`fn_name` None): each case runs the program once with `input` on
  its stdin; its stdout must match `output` line by line.
- functional (`fn_name` set): one execution calls `fn_name` once per case,
  the arguments one JSON text per line of `input`; the return value must
  equal the JSON value `output`.

`prefix` and `suffix` are source placed around the extracted program, for
benchmarks whose test harness is code (HumanEval: the prompt before, its
`check` function and a zero-argument entry after).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalsuite.errors import DatasetError


@dataclass(frozen=True)
class TestCase:
    """One test: stdin text or call arguments (one JSON text per line), and the expected output."""

    __test__ = False  # not a pytest test class, whatever the name says

    input: str
    output: str


@dataclass(frozen=True)
class CodeTests:
    """Everything the checker needs to run one sample's program against its tests."""

    __test__ = False

    cases: tuple[TestCase, ...]
    fn_name: str | None = None
    prefix: str = ""
    suffix: str = ""

    @property
    def kind(self) -> str:
        """`functional` or `stdin`, for grade details."""
        return "functional" if self.fn_name else "stdin"

    def program(self, code: str) -> str:
        """The source that runs: prefix, the extracted program, suffix, each on lines of their own."""
        parts = [self.prefix, code, self.suffix]
        return "".join(p if not p or p.endswith("\n") else p + "\n" for p in parts)

    @classmethod
    def from_mappings(
        cls, tests: Sequence[Mapping[str, Any]], fn_name: str | None = None, where: str = "tests"
    ) -> CodeTests:
        """Cases from `{input, output}` mappings (the plain form datasets and tests write)."""
        cases = []
        for i, test in enumerate(tests):
            if not isinstance(test, Mapping):
                raise DatasetError(
                    f"{where}, test {i}: expected an object with input and output, got {type(test).__name__}."
                )
            missing = [k for k in ("input", "output") if k not in test]
            if missing:
                raise DatasetError(f"{where}, test {i}: missing {', '.join(missing)}.")
            if not all(isinstance(test[k], str) for k in ("input", "output")):
                raise DatasetError(f"{where}, test {i}: input and output must be text.")
            cases.append(TestCase(test["input"], test["output"]))
        return cls(tuple(cases), fn_name or None)
