"""`evalsuite sandbox` says what model-written code gets here; a machine that cannot isolate it refuses, before any
generation, with exit 4, unless `none` was asked for (flag or config)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fake_server import FakeServer
from projects import copy_project

from evalsuite.cli import main
from evalsuite.sandbox import levels

NO_USERNS = "[Errno 1] unshare(CLONE_NEWUSER): Operation not permitted"


@pytest.fixture
def root() -> None:
    if os.geteuid() != 0:
        pytest.skip("the sandbox tests run as root (as in CI)")


@pytest.fixture
def refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as a user whose kernel refuses user namespaces sees it (the real refusal: tests/sandbox)."""
    monkeypatch.setattr(levels, "available", lambda: ["none"])
    monkeypatch.setattr(levels, "probe_isolation", lambda: ("none", NO_USERNS))


def test_sandbox_says_what_this_machine_gives(root: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox"]) == 0
    out = capsys.readouterr().out
    assert "setting:    auto" in out and "network:" in out and "files:" in out and "available:" in out
    assert main(["sandbox", "--sandbox", "none", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["setting"], info["isolation"]) == ("none", "none") and "none" in info["available"]


def test_the_config_default_is_the_setting(root: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "evalsuite.toml"
    config.write_text('[defaults]\nsandbox = "none"\n')
    assert main(["sandbox", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["isolation"] == "none"
    config.write_text('[defaults]\nsandbox = "off"\n')
    assert main(["sandbox", "--config", str(config)]) == 2
    assert "defaults.sandbox = 'off'" in capsys.readouterr().err


def test_no_isolation_is_exit_4_with_the_reason_and_the_ways_out(
    refused: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sandbox"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("error: Model-written code was not run") and NO_USERNS in err and "--sandbox none" in err
    assert main(["sandbox", "--sandbox", "none"]) == 0


def test_a_code_task_is_refused_before_anything_is_generated(
    refused: None, tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    target = f'[targets.base]\nbase_url = "{fake_server.base_url}"\nengine = "llamacpp"\n'
    config = copy_project(tmp_path, target, tasks='["livecodebench"]')
    assert main(["run", "base", "--config", str(config), "--limit", "2", "-q"]) == 4
    assert "Model-written code was not run" in capsys.readouterr().err
    assert fake_server.state.total == 0  # refused before the first request, not after an hour of generation
    assert main(["run", "base", "--config", str(config), "--limit", "2", "-q", "--no-grade"]) == 0
    assert fake_server.state.total == 2  # generating alone runs no model-written code
