"""A machine that cannot write (full disk, runs folder not writable, read-only filesystem) is exit 4, not bad input.

Real conditions, not mocks: a small tmpfs filled with a ballast file in a
private mount namespace, a read-only tmpfs, and a folder whose permission
bits apply to an unprivileged process (`fixtures/small_disk.py`).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fake_server import FakeServer
from projects import ROOT, make_project, prompt_key
from small_disk import as_nobody, mount_namespace

from evalsuite.cli.failures import input_error
from evalsuite.errors import HostError, host_error
from evalsuite.store import open_run

N = 400


def _cli(config: Path) -> list[str]:
    return [sys.executable, "-m", "evalsuite", "run", "base", "--config", str(config), "--no-grade", "-q"]


def _needs(prefix: list[str] | None, what: str) -> list[str]:
    if prefix is None:
        pytest.skip(f"this system lets no test process {what}")
    return prefix


def test_a_disk_that_fills_mid_run_is_exit_4_keeps_what_was_committed_and_resumes_once_freed(
    tmp_path: Path, fake_server: FakeServer
) -> None:
    """The server answers 30 samples and holds the rest until the disk is full, so the run meets the full disk
    whatever the machine's load; then every sample the run had committed is kept and never asked again."""
    namespace = _needs(mount_namespace(), "mount a small filesystem of its own")
    fake_server.state.delay_s = 0.01
    fake_server.state.hold_after = 30
    config = make_project(tmp_path, fake_server.base_url, n=N, target_extra="concurrency = 4")
    out = tmp_path / "copied"
    episode = [sys.executable, str(ROOT / "fixtures" / "small_disk.py"), "episode", "--runs", str(tmp_path / "runs")]
    episode += ["--out", str(out), "--min-stored", "30", "--size", "4m"]
    episode += ["--release", fake_server.base_url.removesuffix("/v1") + "/script"]
    done = subprocess.run([*namespace, *episode, "--", *_cli(config)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)

    full = report["full"]
    assert full["rc"] == 4, full["stderr"]
    assert "the disk is full" in full["stderr"] and "records.sqlite" in full["stderr"]
    assert "new samples were saved before it; re-run the same command to resume" in full["stderr"]
    assert "Traceback" not in full["stderr"]
    kept = set(report["stored_after_full"])
    assert report["stored_before_full"] == 30 and 30 <= len(kept) < N

    still = report["still_full"]  # refused before asking the endpoint for anything
    assert still["rc"] == 4 and "the disk is full" in still["stderr"], still["stderr"]
    assert "writer.lock" in still["stderr"]

    assert report["freed"]["rc"] == 0, report["freed"]["stderr"]
    store = open_run(next((out / "base" / "echo").iterdir()))
    assert len(store) == N and store.done_ids() == set(store.samples())
    asked = fake_server.state.requests  # each session asks a sample once at most (no faults, no retries)
    assert len(asked) == N and set(asked.values()) <= {1, 2}
    asked_again = {key for key, times in asked.items() if times == 2}
    assert not asked_again & {prompt_key(int(sid[1:])) for sid in kept}, (
        "a sample committed before the disk filled was asked again"
    )
    outcomes = [s["outcome"] for s in store.sessions()]
    assert outcomes[-1] == "complete"


def test_a_runs_folder_this_user_may_not_write_is_exit_4_naming_it(tmp_path: Path, fake_server: FakeServer) -> None:
    nobody = _needs(as_nobody(), "run without privileges")
    config = make_project(tmp_path, fake_server.base_url, n=3)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs").chmod(0o555)
    done = subprocess.run([*nobody, *_cli(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 4, done.stderr
    assert f"{tmp_path / 'runs' / 'base'}" in done.stderr and "permission denied" in done.stderr
    assert "Traceback" not in done.stderr and sum(fake_server.state.requests.values()) == 0


def test_a_read_only_runs_folder_is_exit_4(tmp_path: Path, fake_server: FakeServer) -> None:
    namespace = _needs(mount_namespace(), "mount a small filesystem of its own")
    config = make_project(tmp_path, fake_server.base_url, n=3)
    runs = tmp_path / "runs"
    runs.mkdir()
    script = f"mount -t tmpfs -o ro,size=64k tmpfs {runs} && exec {' '.join(_cli(config))}"
    done = subprocess.run([*namespace, "sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 4, done.stderr
    assert "read-only" in done.stderr and "Traceback" not in done.stderr


def test_every_place_that_maps_failures_to_exit_codes_knows_the_machines_failures(tmp_path: Path) -> None:
    full = OSError(28, "No space left on device", str(tmp_path / "x"))
    assert input_error(full)[0] == 4 and "the disk is full" in input_error(full)[1]
    assert input_error(OSError(30, "Read-only file system"))[0] == 4
    assert input_error(PermissionError(13, "Permission denied", "cfg.toml"))[0] == 2  # reading a file named: input
    sqlite_full = sqlite3.OperationalError("database or disk is full")
    sqlite_full.sqlite_errorcode = 13  # type: ignore[attr-defined]
    sqlite_full.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
    assert input_error(sqlite_full)[0] == 4
    assert isinstance(host_error(tmp_path, sqlite_full), HostError)
    assert host_error(tmp_path, sqlite3.DatabaseError("file is not a database")) is None


def test_a_disk_full_before_the_run_starts_is_exit_4_and_asks_for_nothing(
    tmp_path: Path, fake_server: FakeServer
) -> None:
    namespace = _needs(mount_namespace(), "mount a small filesystem of its own")
    config = make_project(tmp_path, fake_server.base_url, n=5)
    small_disk = [sys.executable, str(ROOT / "fixtures" / "small_disk.py"), "full", "--runs", str(tmp_path / "runs")]
    done = subprocess.run([*namespace, *small_disk, "--", *_cli(config)], capture_output=True, text=True, timeout=120)
    result = json.loads(done.stdout)
    assert result["rc"] == 4 and "the disk is full" in result["stderr"], result["stderr"]
    assert "Traceback" not in result["stderr"] and sum(fake_server.state.requests.values()) == 0


def test_a_reports_folder_this_user_may_not_write_is_exit_4(tmp_path: Path, fake_server: FakeServer) -> None:
    nobody = _needs(as_nobody(), "run without privileges")
    config = make_project(tmp_path, fake_server.base_url, n=3)
    runs = []
    for target in ("base", "spec"):
        done = subprocess.run([*nobody, *_cli(config)[:4], target, *_cli(config)[5:]], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        runs.append(done.stdout.strip())
    (tmp_path / "reports").mkdir(exist_ok=True)
    (tmp_path / "reports").chmod(0o555)
    compare = [sys.executable, "-m", "evalsuite", "compare", *runs[::-1], "--config", str(config)]
    done = subprocess.run([*nobody, *compare], capture_output=True, text=True, timeout=60)
    assert done.returncode == 4, done.stderr
    assert "permission denied" in done.stderr and str(tmp_path / "reports") in done.stderr
