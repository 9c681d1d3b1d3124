"""Runs as processes: one writer per run folder, and SIGTERM or Ctrl-C keep every finished sample.

Real `python -m evalsuite` processes, real signals, the scripted server counting what it is asked.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_server import FakeServer
from projects import make_project

from evalsuite.errors import RunBusyError
from evalsuite.store import RunStore, open_run

N = 240


def _cli(config: Path, *extra: str, command: str = "run") -> list[str]:
    args = ["base", "--no-grade"] if command == "run" else []
    return [sys.executable, "-m", "evalsuite", command, *args, "--config", str(config), "-q", *extra]


def _key(i: int) -> str:
    prompt = f"You are terse.\nQuestion q{i:04d}: what is {i}+1?"
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


def _wait_for(condition: Callable[[], bool], proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert proc.poll() is None, f"the run ended first: {proc.communicate()}"
        assert time.time() < deadline, "timed out"
        time.sleep(0.01)


def _slow_down(fake_server: FakeServer, delay_s: float = 0.5) -> None:
    """Once the run is under way, keep it under way: the step that follows must meet a live run, whatever
    the machine's load (at 0.02 s per answer the whole run takes about 2.4 s)."""
    fake_server.state.delay_s = delay_s


def _folder(tmp_path: Path) -> Path:
    return next((tmp_path / "runs" / "base" / "echo").iterdir())


@pytest.fixture
def slow_project(tmp_path: Path, fake_server: FakeServer) -> Path:
    fake_server.state.delay_s = 0.02
    return make_project(tmp_path, fake_server.base_url, n=N, target_extra="concurrency = 2")


def test_a_second_run_of_the_same_target_and_task_is_refused_naming_the_first_and_asks_for_nothing(
    slow_project: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    first = subprocess.Popen(_cli(slow_project), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: fake_server.state.total >= 10, first)
    _slow_down(fake_server)
    second = subprocess.run(_cli(slow_project), capture_output=True, text=True, timeout=60)
    assert first.poll() is None, "the first run ended before the second was tried"
    _slow_down(fake_server, 0.0)
    assert second.returncode == 5, second.stderr
    assert f"is being written by process {first.pid} (" in second.stderr
    assert "-m evalsuite run base" in second.stderr and "Traceback" not in second.stderr
    assert str(_folder(tmp_path)) in second.stderr

    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert len(open_run(_folder(tmp_path))) == N
    requests = fake_server.state.requests
    assert sum(requests.values()) == N and set(requests.values()) == {1}, "a sample was asked for twice"


def test_grading_a_run_while_it_is_being_generated_is_refused(
    slow_project: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    first = subprocess.Popen(_cli(slow_project), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: fake_server.state.total >= 10, first)
    _slow_down(fake_server)
    grade = subprocess.run(_cli(slow_project, str(_folder(tmp_path)), command="grade"), capture_output=True, text=True)
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=60)
    assert grade.returncode == 5 and f"process {first.pid}" in grade.stderr, grade.stderr
    after = subprocess.run(_cli(slow_project, str(_folder(tmp_path)), command="grade"), capture_output=True, text=True)
    assert after.returncode == 0, after.stderr


def test_the_lock_dies_with_a_killed_writer(slow_project: Path, tmp_path: Path, fake_server: FakeServer) -> None:
    first = subprocess.Popen(_cli(slow_project), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(lambda: fake_server.state.total >= 10, first)
    first.kill()
    first.wait()
    done = subprocess.run(_cli(slow_project), capture_output=True, text=True, timeout=120)
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


@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [(signal.SIGTERM, 143, "stopped (SIGTERM)"), (signal.SIGINT, 130, "interrupted")],
    ids=["sigterm", "ctrl-c"],
)
def test_a_signal_mid_run_keeps_every_finished_sample_and_the_rerun_asks_only_the_rest(
    sig: signal.Signals, code: int, said: str, slow_project: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    proc = subprocess.Popen(_cli(slow_project), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: fake_server.state.total >= 40, proc)
    _slow_down(fake_server)
    proc.send_signal(sig)
    sent = time.time()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert time.time() - sent < 10, "stopping took too long"
    assert said in err and "finished samples are saved" in err and "Traceback" not in err

    store = open_run(_folder(tmp_path))
    stored = store.done_ids()
    assert 0 < len(stored) < N
    last = store.sessions()[-1]
    assert last["outcome"] == "interrupted" and last["recorded"] == len(stored)
    store.close()
    asked_before = dict(fake_server.state.requests)
    assert len(asked_before) - len(stored) <= 2, "more samples were in flight than the concurrency allows"
    fake_server.state.requests.clear()

    _slow_down(fake_server, 0.0)
    done = subprocess.run(_cli(slow_project), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    asked_after = fake_server.state.requests
    assert not {_key(int(s[1:])) for s in stored} & set(asked_after), "a saved sample was asked for again"
    assert sum(asked_after.values()) == N - len(stored)
    assert len(open_run(_folder(tmp_path))) == N


def test_two_runs_started_together_on_a_new_run_folder_make_one_writer(
    slow_project: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    procs = [subprocess.Popen(_cli(slow_project), stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    codes = sorted(p.wait(timeout=120) for p in procs)
    assert codes == [0, 5], [p.communicate() for p in procs]
    requests = fake_server.state.requests
    assert sum(requests.values()) == N and set(requests.values()) == {1}
