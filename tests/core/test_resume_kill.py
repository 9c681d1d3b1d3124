"""Kill a 200-sample run with SIGKILL at a random point; the re-run must finish it without re-asking."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from fake_server import FakeServer
from projects import make_project, prompt_key
from small_disk import stored

from evalsuite.store import open_run


def _cli(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "evalsuite", "run", "base", "--config", str(config), "--no-grade", "-q", *extra]


def test_sigkill_mid_run_then_resume_gives_exactly_200_records(tmp_path: Path, fake_server: FakeServer) -> None:
    config = make_project(tmp_path, fake_server.base_url, n=200, target_extra="concurrency = 4")
    fake_server.state.delay_s = 0.01
    rng = random.Random(os.environ.get("PYTEST_SEED", "7"))
    target = rng.randint(20, 170)
    fake_server.state.hold_after = target  # the run cannot end before it is killed, however loaded the machine
    proc = subprocess.Popen(_cli(config), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    runs = tmp_path / "runs"
    deadline = time.monotonic() + 120
    while stored(runs) < target:
        assert proc.poll() is None and time.monotonic() < deadline, "the run never stored what the server answered"
        time.sleep(0.01)
    fake_server.state.hold_after = target + 20  # let it run on for up to 20 answers: killed among them, or held
    time.sleep(rng.uniform(0, 0.1))  # not on a commit boundary
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    fake_server.state.hold_after = None

    folder = next((tmp_path / "runs" / "base" / "echo").iterdir())
    stored_before = open_run(folder).done_ids()
    assert target <= len(stored_before) <= target + 20
    asked_before = dict(fake_server.state.requests)
    fake_server.state.requests.clear()

    done = subprocess.run(_cli(config), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    store = open_run(folder)
    assert len(store) == 200 and len(store.done_ids()) == 200
    asked_after = fake_server.state.requests
    stored_keys = {prompt_key(int(sid[1:])) for sid in stored_before}
    assert not stored_keys & set(asked_after), "a sample already stored was requested again"
    assert sum(asked_after.values()) == 200 - len(stored_before), "the re-run asked more than what was missing"
    assert all(asked_before.get(k, 0) >= 1 for k in stored_keys)
