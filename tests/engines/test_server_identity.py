"""The server's identity is checked on every response: a change stops the run, keeps what was stored."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from fake_server import FakeServer, Fault
from projects import make_project

from evalsuite.cli import main
from evalsuite.store import open_run


def _run(config: Path) -> int:
    return main(["run", "base", "--config", str(config), "--no-grade", "-q"])


def _stored(tmp_path: Path) -> list[str]:
    (folder,) = (tmp_path / "runs" / "base" / "echo").iterdir()
    return sorted(open_run(folder).results())


@pytest.mark.parametrize(
    ("key", "value", "stream"),
    [("model", "other-model", False), ("system_fingerprint", "b2-rebuilt", False), ("model", "other-model", True)],
    ids=["model", "fingerprint", "model-stream"],
)
def test_a_different_server_mid_run_stops_it_and_keeps_what_was_stored(
    key: str, value: str, stream: bool, tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_server.state.faults = [Fault("patch", match="Question q0005", times=-1, patch=[["set", key, value]])]
    config = make_project(tmp_path, fake_server.base_url, target_extra="stream = true" if stream else "")
    assert _run(config) == 3
    err = capsys.readouterr().err
    assert "changed identity" in err and f"{key} was" in err and repr(value) in err and "Traceback" not in err
    assert _stored(tmp_path) == [f"q{i:04d}" for i in range(5)]
    prompt = b"You are terse.\nQuestion q0005: what is 5+1?"
    assert fake_server.state.requests[hashlib.sha256(prompt).hexdigest()[:16]] == 1  # a changed server is not retried


def test_a_resumed_run_must_find_the_server_it_started_with(
    tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_server.state.faults = [Fault("500", match="Question q0004", times=-1)]
    config = make_project(tmp_path, fake_server.base_url, target_extra="max_retries = 0")
    assert _run(config) == 3
    assert _stored(tmp_path) == [f"q{i:04d}" for i in range(4)]
    # the server comes back rebuilt (same model name, other build): the run must not continue on it
    fake_server.state.faults = []
    fake_server.state.fingerprint = "b2-rebuilt"
    capsys.readouterr()
    assert _run(config) == 3
    err = capsys.readouterr().err
    assert "system_fingerprint was 'b1-fake' in the responses stored earlier in this run, now 'b2-rebuilt'" in err
    assert len(_stored(tmp_path)) == 4
    # back on the original server the run resumes and completes
    fake_server.state.fingerprint = "b1-fake"
    assert _run(config) == 0
    assert len(_stored(tmp_path)) == 10
