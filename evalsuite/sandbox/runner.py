"""Unprivileged half of one sandboxed execution: runs the untrusted program.

Started by the launcher as `python -S -P -B runner.py MODE SOLUTION [CALLS]`
(standard library only, no `site`, copied into the job's read-only box):

- `script`: run the solution as `__main__` with the real stdin and stdout.
- `functional`: import the solution as a module, then for each call in the
  CALLS file (a JSON list of argument lists, each argument one JSON text)
  call `Solution().<fn>` (or a top-level `<fn>`) and write one JSON line per
  call to the original stdout: `{"i", "ok": repr(result)}`, `{"i", "error"}`
  or `{"i", "timeout"}`.  The program's own prints go to stderr.  Expected
  outputs never enter the sandbox: the executor compares.

A MemoryError anywhere ends the process with exit code 102 so the executor
can tell a memory limit from any other crash.  When the executor could not
give the program its own network namespace it sets EVALSUITE_NETGUARD=1 and
an audit hook refuses every socket (a weaker, in-process guard).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback

EXIT_MEMORY = 102

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


class CallTimeout(BaseException):
    """Raised in the program when one functional call overruns (BaseException: `except Exception` won't hide it)."""


def _exit(code: object = None) -> None:
    """`exit()` / `quit()`: the interpreter runs without `site`, which normally defines them."""
    raise SystemExit(code)


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


def _on_alarm(signum: int, frame: object) -> None:
    raise CallTimeout()


def run_functional(path: str, calls_path: str) -> None:
    with open(calls_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", encoding="utf-8", closefd=False)
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    scope = _namespace("solution", path)
    exec(compile(source, path, "exec"), scope)
    name = spec["fn_name"]
    signal.signal(signal.SIGALRM, _on_alarm)
    for i, raw_args in enumerate(spec["calls"]):
        record: dict = {"i": i}
        try:
            args = [json.loads(a) for a in raw_args]
            owner = scope.get("Solution")
            target = getattr(owner(), name) if isinstance(owner, type) else scope[name]
            started = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, spec["timeout_s"])
            try:
                result = target(*args)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            record["t"] = time.perf_counter() - started
            if isinstance(result, tuple):
                result = list(result)
            record["ok"] = repr(result)
        except CallTimeout:
            record["timeout"] = True
        except MemoryError:
            raise
        except BaseException as exc:  # noqa: BLE001 - the program's failure is data here
            record["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:]
        out.write(json.dumps(record) + "\n")
        out.flush()
        if "timeout" in record:
            break


def main() -> None:
    import builtins

    builtins.exit = builtins.quit = _exit  # type: ignore[attr-defined]
    if os.environ.get("EVALSUITE_NETGUARD") == "1":
        sys.addaudithook(_netguard)
    mode, path = sys.argv[1], sys.argv[2]
    try:
        if mode == "script":
            run_script(path)
        else:
            run_functional(path, sys.argv[3])
    except MemoryError:
        os.write(2, b"\nMemoryError\n")
        os._exit(EXIT_MEMORY)
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - print as Python would, then fail
        traceback.print_exc()
        sys.stderr.flush()
        try:
            sys.stdout.flush()
        finally:
            os._exit(1)


if __name__ == "__main__":
    main()
