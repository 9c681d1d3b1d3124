"""Targets that start their own servers: config, preflight checks, start/health/stop, provenance.

The served program is the scripted fake server (fixtures/fake_server.py)
started as a real subprocess; the real llama-server path is covered by the
rig tests, whose configurations are served the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path

import pytest
from projects import ROOT, make_project

from evalsuite.config import load_config
from evalsuite.errors import ConfigError
from evalsuite.serve.process import ServeError, ServerCommand, served
from evalsuite.serve.target import check_command, server_command
from evalsuite.workflow import RunOptions, eval_target, run_target

FAKE = ROOT / "fixtures" / "fake_server.py"


def _served_project(tmp_path: Path, *, base_cmd: str, spec_cmd: str, extra: str = "") -> Path:
    config = make_project(tmp_path, "http://unused")
    text = config.read_text()
    head = text.split("[targets.base]")[0]
    config.write_text(
        head
        + f"""
[targets.base]
engine = "llamacpp"
[targets.base.serve]
command = {base_cmd}
health_path = "/v1/models"
startup_timeout_s = 30
{extra}

[targets.spec]
engine = "llamacpp"
baseline = "base"
[targets.spec.serve]
command = {spec_cmd}
health_path = "/v1/models"
startup_timeout_s = 30
"""
    )
    return config


def _fake_cmd(*args: str) -> str:
    return json.dumps([sys.executable, str(FAKE), "--port", "{port}", *args])


def test_eval_starts_each_role_records_the_command_and_stops_it(tmp_path: Path) -> None:
    config_path = _served_project(tmp_path, base_cmd=_fake_cmd(), spec_cmd=_fake_cmd("--tokens", "12"))
    config = load_config(config_path)
    said: list[str] = []
    runs = eval_target(
        config, "spec", ["echo"], RunOptions(limit=3, grade=False), repeat_baseline=False, say=said.append
    )
    from evalsuite.store import open_run

    spec_store = open_run(runs.folders["echo"]["candidate"])
    args = spec_store.manifest.server_args
    assert args is not None
    assert args[0] == sys.executable and args[1] == str(FAKE) and args[-2:] == ["--tokens", "12"]
    port = args[args.index("--port") + 1]
    assert port.isdigit()
    fields = spec_store.manifest.fingerprint_fields
    assert fields is not None and (fields.endpoint.serve or [])[-2:] == ["--tokens", "12"]
    assert len(spec_store.results()) == 3
    assert any("starting 'base'" in line for line in said) and any("starting 'spec'" in line for line in said)
    import socket

    with socket.socket() as probe:  # the server is gone: its port is free again
        probe.bind(("127.0.0.1", int(port)))


def test_a_server_that_dies_shows_its_last_log_lines(tmp_path: Path) -> None:
    crash = tmp_path / "crash.sh"
    crash.write_text("#!/bin/sh\necho 'loading model: out of memory at layer 7' >&2\nexit 3\n")
    crash.chmod(crash.stat().st_mode | stat.S_IEXEC)
    config_path = _served_project(tmp_path, base_cmd=json.dumps([str(crash), "--port", "{port}"]), spec_cmd=_fake_cmd())
    with pytest.raises(ServeError) as info:
        run_target(load_config(config_path), "base", ["echo"], RunOptions(limit=1, grade=False))
    message = str(info.value)
    assert "exited with code 3" in message and "out of memory at layer 7" in message and str(crash) in message
    assert info.value.exit_code == 3


@pytest.mark.parametrize(
    "command, expected",
    [
        ('"no-such-server-binary --port {port}"', "'no-such-server-binary', which is not on PATH"),
        ('"./bin/llama-server --port {port}"', "'./bin/llama-server', which is not an executable file"),
        (f'"{sys.executable} -m x -m /nowhere/model.gguf --port {{port}}"', "model file '/nowhere/model.gguf'"),
        (f'"{sys.executable} x --spec-draft-model=./dflash.gguf --port {{port}}"', "model file './dflash.gguf'"),
    ],
)
def test_missing_binary_or_model_file_is_a_config_error_before_anything_runs(
    tmp_path: Path, command: str, expected: str
) -> None:
    config_path = _served_project(tmp_path, base_cmd=_fake_cmd(), spec_cmd=command)
    config = load_config(config_path)
    with pytest.raises(ConfigError) as info:
        eval_target(config, "spec", ["echo"], RunOptions(limit=1, grade=False), repeat_baseline=False)
    assert expected in str(info.value) and "targets.spec.serve.command" in str(info.value)
    assert info.value.exit_code == 2
    assert not (tmp_path / "runs").exists()  # the baseline did not run either


def test_hub_model_ids_and_existing_files_pass_the_preflight(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    command = ServerCommand(
        "t", (sys.executable, "serve", "Qwen/Qwen3-8B", "-m", "./m.gguf", "--port", "{port}"), cwd=tmp_path
    )
    check_command(command, "cfg")


@pytest.mark.parametrize(
    "table, message",
    [
        ('command = "llama-server -m m.gguf"', "needs a {port} placeholder"),
        ("command = []", "is empty"),
        ('command = "x --port {port}"\nbogus = 1', "unknown key"),
    ],
)
def test_bad_serve_tables_name_the_key(tmp_path: Path, table: str, message: str) -> None:
    config = tmp_path / "evalsuite.toml"
    config.write_text(f'[targets.a]\nengine = "llamacpp"\n[targets.a.serve]\n{table}\n')
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert "targets.a.serve" in str(info.value) and message in str(info.value)


def test_serve_and_base_url_together_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "evalsuite.toml"
    config.write_text('[targets.a]\nbase_url = "http://x/v1"\n[targets.a.serve]\ncommand = "s --port {port}"\n')
    with pytest.raises(ConfigError, match="has serve and also base_url"):
        load_config(config)


def test_env_and_cwd_reach_the_server(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = work / "srv.py"
    script.write_text(
        "import os, sys, pathlib\n"
        "pathlib.Path('seen.txt').write_text(os.environ['EVALSUITE_TEST_VALUE'])\n"
        f"sys.argv = ['fake', '--port', sys.argv[1]]\nsys.path.insert(0, {str(FAKE.parent)!r})\n"
        "import fake_server\nfake_server.main()\n"
    )
    config = tmp_path / "evalsuite.toml"
    config.write_text(
        f'[targets.a]\nengine = "llamacpp"\n[targets.a.serve]\ncommand = ["{sys.executable}", "srv.py", '
        '"{port}"]\ncwd = "work"\nhealth_path = "/v1/models"\nenv = { EVALSUITE_TEST_VALUE = "42" }\n'
    )
    target = load_config(config).target("a")
    with served([server_command(target, tmp_path)], tmp_path / "logs") as running:
        assert running["a"].process.poll() is None
    assert (work / "seen.txt").read_text() == "42"
    assert "EVALSUITE_TEST_VALUE" not in os.environ


def test_a_drafter_changed_in_place_starts_a_new_run_and_an_unchanged_one_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALSUITE_CACHE", str(tmp_path / "cache"))
    draft = tmp_path / "draft.gguf"
    draft.write_bytes(b"GGUF drafter one")
    config_path = _served_project(tmp_path, base_cmd=_fake_cmd(), spec_cmd=_fake_cmd("-md", "./draft.gguf"))
    config = load_config(config_path)

    def run() -> tuple[Path, int, dict[str, str] | None]:
        outcome = run_target(config, "spec", ["echo"], RunOptions(limit=2, grade=False))[("echo", 0)]
        fields = outcome.store.manifest.fingerprint_fields
        assert fields is not None
        return outcome.folder, outcome.recorded, fields.endpoint.model_files

    first, recorded, files = run()
    assert recorded == 2 and files == {"draft.gguf": "sha256:" + hashlib.sha256(b"GGUF drafter one").hexdigest()}
    assert run()[:2] == (first, 0)  # the same file: resumed, nothing asked again
    draft.write_bytes(b"GGUF drafter two")  # same size, same path, other contents
    changed, recorded, files = run()
    assert changed != first and recorded == 2
    assert files == {"draft.gguf": "sha256:" + hashlib.sha256(b"GGUF drafter two").hexdigest()}


def test_sample_test_starts_served_targets_and_records_their_model_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalsuite.cli import main
    from evalsuite.sampling.plan import TASK_SUFFIX

    monkeypatch.setenv("EVALSUITE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "draft.gguf").write_bytes(b"GGUF drafter")
    config_path = _served_project(tmp_path, base_cmd=_fake_cmd(), spec_cmd=_fake_cmd("-md", "./draft.gguf"))
    args = ["sample-test", "spec", "--config", str(config_path), "--task", "echo", "--prompts", "2"]
    assert main([*args, "--draws", "3", "--tokens", "4", "-q", "--no-report"]) == 1  # the scripted server: too few
    manifests = {
        m["target"]: m
        for m in map(json.loads, map(Path.read_text, tmp_path.glob(f"runs/*/echo{TASK_SUFFIX}/*/manifest.json")))
    }
    assert set(manifests) == {"base", "spec"}
    assert manifests["spec"]["server_args"][:2] == [sys.executable, str(FAKE)]  # served, not asked of a base_url
    assert manifests["spec"]["fingerprint_fields"]["endpoint"]["model_files"] == {
        "draft.gguf": "sha256:" + hashlib.sha256(b"GGUF drafter").hexdigest()
    }


def test_a_served_control_is_its_own_endpoint_and_a_same_command_twin_is_refused(tmp_path: Path) -> None:
    """Served targets are told apart by their commands: a control served by another command runs beside the
    candidate, and only a control served by the very same command is the candidate under another name."""
    config_path = _served_project(tmp_path, base_cmd=_fake_cmd(), spec_cmd=_fake_cmd("--tokens", "12"))
    text = config_path.read_text().replace('baseline = "base"', 'baseline = "base"\ncontrol = "ctl"')

    def control(command: str) -> str:
        return (
            text + f'\n[targets.ctl]\nengine = "llamacpp"\nbaseline = "base"\n[targets.ctl.serve]\n'
            f'command = {command}\nhealth_path = "/v1/models"\nstartup_timeout_s = 30\n'
        )

    config_path.write_text(control(_fake_cmd("--tokens", "10")))
    runs = eval_target(load_config(config_path), "spec", ["echo"], RunOptions(limit=2, grade=False))
    assert set(runs.folders["echo"]) == {"baseline", "control", "candidate"}
    config_path.write_text(control(_fake_cmd("--tokens", "12")))
    with pytest.raises(ConfigError, match="is the same endpoint, asked the same way"):
        eval_target(load_config(config_path), "spec", ["echo"], RunOptions(limit=2, grade=False))
