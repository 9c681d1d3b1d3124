"""Unprivileged half of one sandboxed execution: runs the untrusted program.

Started by the launcher as `python -S -P -B runner.py MODE SOLUTION [FN REQ_FD REP_FD]`
(standard library only, no `site`, copied into the job's read-only box):

- `script`: run the solution as `__main__` with the real stdin and stdout.
- `functional`: import the solution as a module, send a `ready` frame on
  REP_FD, then for each request line on REQ_FD (`{"i", "args"}`, each
  argument one JSON text) call `Solution().<FN>` (or a top-level `<FN>`) and
  answer one frame `<length>\\n<json>`: `{"i", "ok": value}` or `{"i",
  "error"}`.  The program's own prints go to stderr.  Expected outputs never
  enter the sandbox, and the executor, not this file, enforces each call's
  CPU limit and checks the order of frames (see evalsuite/sandbox/calls.py).

Values travel as tagged JSON so the executor compares the same Python types
LiveCodeBench compares: tuples, dicts, sets and integers beyond 4,000 digits
carry a tag.  Vetted third-party packages (EVALSUITE_VENDOR: a JSON list of
[name, folder]) are importable through a finder that serves those names
only.  When the executor could not give the program its own network
namespace it sets EVALSUITE_NETGUARD=1 and an audit hook refuses every
socket (a weaker, in-process guard).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

# The same standard-library names LiveCodeBench puts in scope before a solution
# runs (LeetCode stubs use `List` without importing it, for example).
PRELUDE = """\
from string import *
from re import *
from datetime import *
from collections import *
from heapq import *
from bisect import *
from copy import *
from math import *
from random import *
from statistics import *
from itertools import *
from functools import *
from operator import *
from io import *
from sys import *
from json import *
from builtins import *
from typing import *
import string, re, datetime, collections, heapq, bisect, copy, math, random
import statistics, itertools, functools, operator, io, sys, json
sys.setrecursionlimit(50000)
"""


def _exit(code: object = None) -> None:
    """`exit()` / `quit()`: the interpreter runs without `site`, which normally defines them."""
    raise SystemExit(code)


class _VendorFinder:
    """Serves the vetted packages, and nothing else, from their folders."""

    def __init__(self, entries: list[list[str]]) -> None:
        self.folders = {name: os.path.dirname(path) for name, path in entries}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        from importlib.machinery import PathFinder

        if "." in fullname or fullname not in self.folders:
            return None
        return PathFinder.find_spec(fullname, [self.folders[fullname]])


class Unencodable(TypeError):
    """A returned value that cannot be compared with a JSON expected output."""


def _plain(value: object) -> bool:
    """Whether `value` is made of JSON-native values only (lists, str, ints, finite floats, bools, None)."""
    stack: list[Any] = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is list:
            if id(item) in seen:
                return False  # shared or self-containing: let encode() decide
            seen.add(id(item))
            stack.extend(item)
        elif kind is int:
            if item.bit_length() > 13000:
                return False
        elif kind is float:
            if item != item or item in (float("inf"), float("-inf")):
                return False
        elif kind not in (str, bool) and item is not None:
            return False
    return True


def encode(value: object, depth: int = 0) -> object:
    """A Python value as tagged JSON (evalsuite/sandbox/calls.py decodes it)."""
    if depth > 200:
        raise Unencodable("a value nested more than 200 levels deep")
    if depth == 0 and type(value) is list and _plain(value):
        return value
    if value is None or isinstance(value, bool):
        return bool(value) if value is not None else None
    if isinstance(value, int):
        value = int(value)
        return {"$x": format(value, "x")} if value.bit_length() > 13000 else value
    if isinstance(value, float):
        value = float(value)
        return value if value == value and abs(value) != float("inf") else {"$f": repr(value)}
    if isinstance(value, str):
        return str(value)
    if isinstance(value, list):
        return [encode(x, depth + 1) for x in value]
    if isinstance(value, tuple):
        return {"$t": [encode(x, depth + 1) for x in value]}
    if isinstance(value, dict):
        return {"$d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, frozenset):
        return {"$fs": [encode(x, depth + 1) for x in value]}
    if isinstance(value, set):
        return {"$s": [encode(x, depth + 1) for x in value]}
    if isinstance(value, complex):
        return {"$c": [value.real, value.imag]}
    if isinstance(value, (bytes, bytearray)):
        return {"$b": [bytes(value).decode("latin-1")]}
    raise Unencodable(f"returned a {type(value).__name__}, which cannot be compared with the expected output")


def _netguard(event: str, args: tuple) -> None:
    if event.startswith("socket.") or event in {"_socket.socket", "socket.__new__"}:
        raise PermissionError("network access is disabled in the sandbox")


def _namespace(name: str, path: str) -> dict:
    scope: dict = {"__name__": name, "__file__": path, "__builtins__": __builtins__}
    exec(compile(PRELUDE, "<prelude>", "exec"), scope)
    return scope


def run_script(path: str) -> None:
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    scope = _namespace("__main__", path)
    sys.argv = [path]
    exec(compile(source, path, "exec"), scope)


def _send(fd: int, record: dict) -> None:
    data = json.dumps(record, allow_nan=True).encode("utf-8")
    view = memoryview(b"%d\n" % len(data) + data)
    while view:
        view = view[os.write(fd, view) :]


def run_functional(path: str, name: str, req_fd: int, rep_fd: int) -> None:
    os.dup2(2, 1)  # the program's prints go to stderr; results go only through rep_fd
    sys.stdout = os.fdopen(1, "w", encoding="utf-8", closefd=False)
    requests = os.fdopen(req_fd, "rb")
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    scope = _namespace("solution", path)
    exec(compile(source, path, "exec"), scope)
    _send(rep_fd, {"ready": True})
    for line in requests:
        message = json.loads(line)
        record: dict = {"i": message["i"]}
        try:
            args = [json.loads(a) for a in message["args"]]
            owner = scope.get("Solution")
            target = getattr(owner(), name) if isinstance(owner, type) else scope[name]
            result = target(*args)
            if isinstance(result, tuple):
                result = list(result)
            try:
                record["ok"] = encode(result)
            except (Unencodable, RecursionError, ValueError) as exc:
                record = {"i": message["i"], "unencodable": str(exc)[:200]}
        except BaseException as exc:  # noqa: BLE001 - the program's failure is data here
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            record = {"i": message["i"], "error": text[-2000:]}
        _send(rep_fd, record)


def main() -> None:
    import builtins

    # Without `site` these names do not exist; the program gets plain functions in their place.
    builtins.exit = builtins.quit = _exit  # type: ignore[assignment]
    vendor = os.environ.pop("EVALSUITE_VENDOR", "")
    if vendor:
        sys.meta_path.append(_VendorFinder(json.loads(vendor)))
    if os.environ.pop("EVALSUITE_NETGUARD", "") == "1":
        sys.addaudithook(_netguard)
    mode, path = sys.argv[1], sys.argv[2]
    try:
        if mode == "script":
            run_script(path)
        else:
            run_functional(path, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - print as Python would, then fail
        try:
            traceback.print_exc()
            sys.stderr.flush()
            sys.stdout.flush()
        finally:
            os._exit(1)


if __name__ == "__main__":
    main()
