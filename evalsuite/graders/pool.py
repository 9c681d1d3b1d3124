"""Run a function over items in worker processes, with a hard deadline per item.

Why not `concurrent.futures`: a process pool cannot stop one stuck task, and
math grading does get stuck (sympy simplifying a pathological expression, a
regex backtracking over a 30k-token response).  Here each worker takes one
item at a time over its own pipe; when an item overruns its deadline the
parent kills that worker, records the item as failed and starts a fresh
worker for the rest.  A worker that dies (segfault, out of memory) costs only
the item it was on.

Workers are fresh interpreters (`python -m evalsuite.graders.pool`), not
`multiprocessing` children: they never re-import the caller's `__main__`
(so a script without an `if __name__ == "__main__"` guard works), and they
are safe to start from a process with threads (the CLI, an asyncio loop).
Items and results travel as length-prefixed pickles over stdin/stdout.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import struct
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import IO, Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_HEADER = struct.Struct("!I")
_STARTUP_FAILURES = 3
"""Workers in a row that may die before they are ready before the pool gives up."""
_STARTUP_TIMEOUT_S = 120.0
"""How long a fresh worker may take to import its modules (a loaded 2-core box is slow)."""


@dataclass(frozen=True)
class Failure:
    """An item that produced no result: why, in a sentence fit for a grade's reason."""

    message: str


class GradingTimeout(BaseException):
    """Raised inside a worker when an item's soft deadline passes.

    A BaseException so that libraries' `except Exception` blocks (math-verify,
    sympy) cannot swallow it and turn a timeout into a wrong answer.
    """


@contextmanager
def soft_deadline(seconds: float) -> Iterator[None]:
    """Raise GradingTimeout in the main thread after `seconds` of wall time.

    Uses SIGALRM, so it works only in a process's main thread (a pool worker);
    with `seconds <= 0` it does nothing.  The parent's hard deadline in
    `run_isolated` still stops code stuck where signals are not checked.
    """
    if seconds <= 0:
        yield
        return

    def _expire(signum: int, frame: object) -> None:
        raise GradingTimeout(f"timed out after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _write(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read(stream: IO[bytes]) -> Any:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the worker closed its pipe")
    (size,) = _HEADER.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the worker closed its pipe mid-message")
    return pickle.loads(data)


def _func_ref(func: Callable[..., Any]) -> str:
    module, name = getattr(func, "__module__", None), getattr(func, "__qualname__", "")
    if not module or module == "__main__" or "<" in name:
        raise ValueError(f"{func!r} must be a module-level function importable by name to run in a worker.")
    return f"{module}:{name}"


def _worker_main(ref: str, preload: list[str]) -> None:
    """Worker loop: read (index, item), write (index, ok, result-or-error), until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    for module in preload:
        importlib.import_module(module)
    module_name, qualname = ref.split(":")
    func: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        func = getattr(func, part)
    # Results go to a private copy of fd 1; fd 1 itself becomes stderr, so stray
    # output (print, C libraries) cannot corrupt the result stream.
    stdin, stdout = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _write(stdout, "ready")
    while True:
        try:
            index, item = _read(stdin)
        except EOFError:
            return
        try:
            reply = (index, True, func(item))
        except BaseException as exc:  # noqa: BLE001 - every failure is reported as data
            reply = (index, False, f"{type(exc).__name__}: {exc}")
        try:
            _write(stdout, reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            _write(stdout, (index, False, f"the result could not be sent back ({type(exc).__name__}: {exc})"))


@dataclass
class _Worker:
    proc: subprocess.Popen[bytes]
    ready: bool = False
    index: int | None = None
    deadline: float = 0.0

    @property
    def waiting(self) -> bool:
        """Owes the parent a message: its ready signal or a result."""
        return not self.ready or self.index is not None

    @staticmethod
    def start(ref: str, preload: Sequence[str]) -> _Worker:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([p or os.getcwd() for p in sys.path])
        cmd = [sys.executable, "-m", "evalsuite.graders.pool", ref, ",".join(preload)]
        # A process group of its own: a terminal's Ctrl-C goes to the parent alone, which stops its workers, and
        # never reaches a worker still importing its modules (before it ignores SIGINT), where it would print a
        # traceback of its own.
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, process_group=0)
        return _Worker(proc, deadline=time.monotonic() + _STARTUP_TIMEOUT_S)

    def send(self, index: int, item: Any, timeout_s: float) -> None:
        assert self.proc.stdin is not None
        self.index = index
        self.deadline = time.monotonic() + timeout_s
        _write(self.proc.stdin, (index, item))

    def stop(self, *, kill: bool) -> None:
        if kill:
            self.proc.kill()
        elif self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()


def run_isolated(
    func: Callable[[T], R],
    items: Sequence[T],
    *,
    workers: int | None = None,
    timeout_s: float = 30.0,
    preload: Sequence[str] = (),
) -> list[R | Failure]:
    """`func(item)` for every item, in order, each in a worker process with a deadline.

    `func` must be importable by name (a module-level function).  An
    exception inside `func`, a worker that dies and an item that runs past
    `timeout_s` each become a `Failure` in that item's place; nothing raises.
    `preload` names modules each worker imports before its first item.
    """
    if not items:
        return []
    ref = _func_ref(func)
    missing = Failure("not graded (interrupted)")
    results: list[R | Failure] = [missing] * len(items)
    pending = deque(range(len(items)))
    pool: list[_Worker] = []
    startup_failures = 0

    def feed(worker: _Worker) -> None:
        if pending:
            index = pending.popleft()
            try:
                worker.send(index, items[index], timeout_s)
            except OSError:  # a dead worker: the read side reports it
                worker.index = index

    def retire(worker: _Worker, message: str) -> None:
        nonlocal startup_failures
        if worker.index is not None:
            results[worker.index] = Failure(message)
        worker.stop(kill=True)
        pool.remove(worker)
        startup_failures = 0 if worker.ready else startup_failures + 1
        if startup_failures >= _STARTUP_FAILURES:
            for index in pending:
                results[index] = Failure(f"grading workers could not start ({message})")
            pending.clear()
        elif pending:
            pool.append(_Worker.start(ref, preload))

    try:
        for _ in range(max(1, min(workers or default_workers(), len(items)))):
            pool.append(_Worker.start(ref, preload))
        while any(w.waiting for w in pool):
            busy = [w for w in pool if w.waiting]
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = wait([w.proc.stdout for w in busy], timeout=timeout)  # type: ignore[misc]
            for worker in busy:
                if worker.proc.stdout in ready:
                    try:
                        message = _read(worker.proc.stdout)  # type: ignore[arg-type]
                    except (EOFError, OSError, pickle.UnpicklingError):
                        code = worker.proc.wait()
                        retire(worker, f"the grading worker exited unexpectedly (exit code {code})")
                        continue
                    if message == "ready":
                        worker.ready = True
                    else:
                        index, ok, value = message
                        results[index] = value if ok else Failure(f"grader error: {value}")
                        worker.index = None
                    feed(worker)
                elif time.monotonic() >= worker.deadline:
                    if worker.ready:
                        retire(worker, f"grading timed out after {timeout_s:g} s (worker stopped)")
                    else:
                        retire(worker, f"the grading worker did not start within {_STARTUP_TIMEOUT_S:g} s")
    finally:
        for worker in pool:
            worker.stop(kill=worker.waiting)
    return results


if __name__ == "__main__":
    _worker_main(sys.argv[1], [m for m in sys.argv[2].split(",") if m])
