"""Runs as processes: one writer per run folder, and Ctrl-C or SIGTERM at any point keep every finished sample.

Real `python -m evalsuite` processes, real signals, the scripted server counting what it is asked.  Every
step that must meet a live run holds the server's answers back (`hold_after`, `hold_probe`) until the step
has happened, so the run cannot end first however slow or loaded the machine is; each wait is for an
event, bounded only so that a run that never gets there fails instead of hanging.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_server import FakeServer
from projects import ECHO_TASK, make_project, prompt_key
from small_disk import stored

from evalsuite.errors import RunBusyError
from evalsuite.store import RunStore, open_run

N = 240
CONCURRENCY = 2
WAIT_S = 120.0
"""The bound on every wait for an event: far past what a loaded machine needs, short of a hung test."""


def _cli(config: Path, *extra: str, command: str = "run", grade: bool = False) -> list[str]:
    args = ["base", *([] if grade else ["--no-grade"])] if command == "run" else []
    return [sys.executable, "-m", "evalsuite", command, *args, "--config", str(config), "-q", *extra]


def _start(command: list[str], *, sigint_ignored: bool = False) -> subprocess.Popen[str]:
    """The command in a process group of its own (a terminal's foreground job, which its Ctrl-C reaches whole);
    `sigint_ignored`: started with SIGINT ignored, as a shell starts a job with `&` in a script."""
    if sigint_ignored:
        command = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *command]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0)


def _wait_for(condition: Callable[[], bool], proc: subprocess.Popen[str] | None, what: str) -> None:
    """Wait until `condition()`; `proc` ending first, or WAIT_S passing, fails the test naming `what`."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert proc is None or proc.poll() is None, f"the run ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S:.0f} s"
        time.sleep(0.01)


def _folder(tmp_path: Path) -> Path:
    return next((tmp_path / "runs" / "base" / "echo").iterdir())


@pytest.fixture
def held_project(tmp_path: Path, fake_server: FakeServer) -> Path:
    """A project of N samples at concurrency 2 whose server answers the first 10 and holds the rest back."""
    fake_server.state.hold_after = 10
    return make_project(tmp_path, fake_server.base_url, n=N, target_extra=f"concurrency = {CONCURRENCY}")


def _waiting(fake_server: FakeServer, count: int = 1) -> Callable[[], bool]:
    return lambda: fake_server.state.held >= count


def test_a_second_run_of_the_same_target_and_task_is_refused_naming_the_first_and_asks_for_nothing(
    held_project: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    first = _start(_cli(held_project))
    _wait_for(_waiting(fake_server), first, "a request held")
    second = subprocess.run(_cli(held_project), capture_output=True, text=True, timeout=WAIT_S)
    assert first.poll() is None, "the first run ended before the second was tried"
    fake_server.state.hold_after = None
    assert second.returncode == 5, second.stderr
    assert f"is being written by process {first.pid} (" in second.stderr
    assert "-m evalsuite run base" in second.stderr and "Traceback" not in second.stderr
    assert str(_folder(tmp_path)) in second.stderr

    out, err = first.communicate(timeout=WAIT_S)
    assert first.returncode == 0, err
    assert len(open_run(_folder(tmp_path))) == N
    requests = fake_server.state.requests
    assert sum(requests.values()) == N and set(requests.values()) == {1}, "a sample was asked for twice"


def test_grading_a_run_while_it_is_being_generated_is_refused(
    held_project: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    first = _start(_cli(held_project))
    _wait_for(_waiting(fake_server), first, "a request held")
    grade = subprocess.run(_cli(held_project, str(_folder(tmp_path)), command="grade"), capture_output=True, text=True)
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=WAIT_S)
    assert grade.returncode == 5 and f"process {first.pid}" in grade.stderr, grade.stderr
    after = subprocess.run(_cli(held_project, str(_folder(tmp_path)), command="grade"), capture_output=True, text=True)
    assert after.returncode == 0, after.stderr


def test_the_lock_dies_with_a_killed_writer(held_project: Path, tmp_path: Path, fake_server: FakeServer) -> None:
    first = _start(_cli(held_project))
    _wait_for(_waiting(fake_server), first, "a request held")
    first.kill()
    first.wait()
    fake_server.state.hold_after = None
    done = subprocess.run(_cli(held_project), capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    assert len(open_run(_folder(tmp_path))) == N


HOLD = """
import sys, time
from pathlib import Path
from evalsuite.store import RunStore
store = RunStore.create(Path(sys.argv[1]), {"fingerprint": "f" * 64, "task": "t", "target": "x"})
print("held", flush=True)
time.sleep(600)
"""


def test_the_store_refuses_a_writer_of_another_process_and_shares_its_own(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    manifest = {"fingerprint": "f" * 64, "task": "t", "target": "x"}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunBusyError, match=f"process {holder.pid} "):
            RunStore.create(folder, manifest)
        with pytest.raises(RunBusyError):
            open_run(folder, write=True)
        reader = open_run(folder)  # readers never wait for a writer
        assert len(reader) == 0 and not reader.writing
        reader.close()
    finally:
        holder.kill()
        holder.wait()
    first = RunStore.create(folder, manifest)
    again = RunStore.create(folder, manifest)  # the same process opening its run twice is one writer
    assert first.writing and again.writing
    first.close()
    again.close()


def test_two_runs_started_together_on_a_new_run_folder_make_one_writer(
    held_project: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    """The one that takes the lock first is held by the server until the other has been refused: neither can
    finish before the other has started, however the two are scheduled."""
    procs = [_start(_cli(held_project)) for _ in range(2)]
    _wait_for(lambda: any(p.poll() is not None for p in procs), None, "either run ending")
    fake_server.state.hold_after = None
    codes = sorted(p.wait(timeout=WAIT_S) for p in procs)
    assert codes == [0, 5], [p.communicate() for p in procs]
    requests = fake_server.state.requests
    assert sum(requests.values()) == N and set(requests.values()) == {1}


def _grading_project(tmp_path: Path) -> None:
    """The echo task graded by the math grader, whose worker processes take seconds to start: a window
    that the test sees open (a worker exists) and that the signal lands in."""
    math = ECHO_TASK.replace(
        "name: gsm8k\n  extraction: [hash_line, last_number]", "name: math\n  extraction: [last_boxed]"
    )
    assert math != ECHO_TASK
    (tmp_path / "tasks" / "echo.yaml").write_text(math)


def _grading_workers(pid: int) -> list[int]:
    """The grading worker processes among `pid`'s children."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid and b"evalsuite.graders.pool" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


class _WriteLock:
    """The run database's write lock, held by this test: the run's next commit waits inside SQLite for it."""

    def __init__(self, db: Path):
        self.conn = sqlite3.connect(db, isolation_level=None, timeout=WAIT_S)
        self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def _in_a_commit(pid: int) -> bool:
    """Whether the run's main thread sleeps in SQLite's wait for the write lock (the event loop otherwise
    sleeps in epoll_wait, never in nanosleep)."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() in ("hrtimer_nanosleep", "do_nanosleep")
    except OSError:
        return False


POINTS = {
    "start-up": "while the run probes the server, before its store exists",
    "first request": "with both workers waiting for their first answer, nothing stored yet",
    "mid-run": "with 97 samples answered and both workers waiting for the next",
    "last requests": "with the last two requests outstanding",
    "commit": "while the run's commit waits for the database",
    "grading": "while the grading workers start, every sample stored",
}
HOLD_AFTER = {"first request": 0, "mid-run": 97, "last requests": N - 2}
SIGNALS = {
    "ctrl-c": (signal.SIGINT, 130, "interrupted", False),
    "sigterm": (signal.SIGTERM, 143, "stopped (SIGTERM)", False),
    "ctrl-c-in-a-background-job": (signal.SIGINT, 130, "interrupted", True),
}
CASES = [(point, "ctrl-c") for point in POINTS] + [
    ("mid-run", "sigterm"),
    ("commit", "sigterm"),
    ("start-up", "ctrl-c-in-a-background-job"),
    ("mid-run", "ctrl-c-in-a-background-job"),
]


@pytest.mark.parametrize(("point", "how"), CASES, ids=[f"{how}-{point.replace(' ', '-')}" for point, how in CASES])
def test_a_signal_at_any_point_stops_the_run_keeping_every_finished_sample_and_the_rerun_asks_only_the_rest(
    point: str, how: str, tmp_path: Path, fake_server: FakeServer
) -> None:
    sig, code, said, background = SIGNALS[how]
    state = fake_server.state
    config = make_project(tmp_path, fake_server.base_url, n=N, target_extra=f"concurrency = {CONCURRENCY}")
    state.hold_probe = point == "start-up"
    state.hold_after = HOLD_AFTER.get(point, 60 if point == "commit" else None)
    if point == "grading":
        _grading_project(tmp_path)
    proc = _start(_cli(config, grade=point == "grading"), sigint_ignored=background)

    lock = None
    if point == "start-up":
        _wait_for(_waiting(fake_server), proc, "the probe")
    elif point == "grading":
        _wait_for(lambda: bool(_grading_workers(proc.pid)), proc, "a grading worker")
    else:
        _wait_for(_waiting(fake_server, CONCURRENCY), proc, "both workers waiting")
    if point == "commit":  # every answer so far committed; then the next commit meets the test's lock
        _wait_for(lambda: stored(tmp_path / "runs") == 60, proc, "60 results committed")
        lock = _WriteLock(next((tmp_path / "runs" / "base" / "echo").glob("*/records.sqlite")))
        state.hold_after = 120
        _wait_for(lambda: _in_a_commit(proc.pid), proc, "a commit waiting for the database")

    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # what a terminal's Ctrl-C does: the whole foreground job
    else:
        proc.send_signal(sig)
    if lock is not None:
        lock.release()
    _, err = proc.communicate(timeout=WAIT_S)  # the held server never lets a run that ignored it finish
    assert proc.returncode == code, err
    assert said in err and "finished samples are saved" in err and "Traceback" not in err

    if point == "start-up":
        assert not (tmp_path / "runs" / "base").exists() and state.total == 0
        kept: set[str] = set()
    else:
        store = open_run(_folder(tmp_path))
        kept = store.done_ids()
        last = store.sessions()[-1]
        store.close()
        assert last["recorded"] == len(kept), "the session's record is not what was stored"
        if point == "grading":
            assert len(kept) == N and last["outcome"] == "complete"
        elif point == "commit":  # the result that waited in the commit is kept; answers left unread are not samples
            assert 60 < len(kept) <= state.answered
            assert last["outcome"] == "interrupted"
        else:  # both workers were waiting on held requests: every answer sent had been read
            assert len(kept) == state.answered == HOLD_AFTER[point]
            assert last["outcome"] == "interrupted"
    assert {prompt_key(int(s[1:])) for s in kept} <= set(state.requests)

    state.requests.clear()
    state.hold_probe, state.hold_after = False, None
    done = subprocess.run(_cli(config), capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    asked_after = state.requests
    assert not {prompt_key(int(s[1:])) for s in kept} & set(asked_after), "a saved sample was asked for again"
    assert sum(asked_after.values()) == N - len(kept)
    assert len(open_run(_folder(tmp_path))) == N
