"""Grid targets: one table with parameter lists expands into named targets every command accepts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from projects import ROOT, make_project

from evalsuite.cli import main
from evalsuite.config import load_config
from evalsuite.errors import ConfigError
from evalsuite.folders import folder_name
from evalsuite.rig.launcher import with_args
from evalsuite.store import open_run
from evalsuite.workflow import RunOptions, run_target

FAKE = ROOT / "fixtures" / "fake_server.py"


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "evalsuite.toml"
    path.write_text('[targets.base]\nbase_url = "http://127.0.0.1:1/v1"\nengine = "llamacpp"\n\n' + body)
    return path


def _error(path: Path) -> str:
    return str(pytest.raises(ConfigError, load_config, path).value)


def test_a_grid_expands_into_one_named_target_per_combination(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        """[targets.spec]
engine = "llamacpp"
baseline = "base"
description = "n_max {n_max}"
extra = { "speculative.n_max" = "{n_max}", tag = "p{p_min}", nested = { list = ["{n_max}"] } }
serve.command = "llama-server -m m.gguf --port {port} --spec-draft-n-max {n_max} --spec-draft-p-min {p_min} --json '{\\"a\\": 1}'"
grid.n_max = [2, 12]
grid.p_min = [0.5, 0.25]
""",
    )
    config = load_config(path)
    names = [
        "spec[n_max=2,p_min=0.5]",
        "spec[n_max=2,p_min=0.25]",
        "spec[n_max=12,p_min=0.5]",
        "spec[n_max=12,p_min=0.25]",
    ]
    assert config.grids == {"spec": names}
    assert list(config.targets) == ["base", *names]
    point = config.target("spec[n_max=12,p_min=0.25]")
    assert point.serve is not None
    argv = point.serve.argv()
    assert argv[argv.index("--spec-draft-n-max") + 1] == "12" and argv[argv.index("--spec-draft-p-min") + 1] == "0.25"
    assert "{port}" in argv and '{"a": 1}' in argv  # the port stays for the server; JSON braces are left alone
    # in the request fields a lone placeholder keeps the value's type: a number goes out as a number
    assert point.extra == {"speculative.n_max": 12, "tag": "p0.25", "nested": {"list": [12]}}
    assert point.baseline == "base" and point.description == "n_max 12"
    assert point.grid_point == ("spec", {"n_max": 12, "p_min": 0.25})
    assert config.target("base").grid_point is None


def test_rig_args_take_the_grid_and_merge_into_the_rig_command(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        '[targets.d]\nengine = "llamacpp"\nrig = "smollm2-dflash"\nbaseline = "base"\n'
        'rig_args = ["--spec-draft-n-max", "{n}"]\ngrid.n = [1, 3]\n',
    )
    assert load_config(path).target("d[n=3]").rig_args == ["--spec-draft-n-max", "3"]
    rig = ["llama-server", "--spec-draft-n-max", "4", "--threads", "2", "--no-repack"]
    # a flag already there takes the new value, new ones (with or without a value) are added once
    assert with_args(rig, ["--spec-draft-n-max", "1", "--metrics", "--spec-draft-n-min", "-1", "--no-repack"]) == [
        "llama-server",
        "--spec-draft-n-max",
        "1",
        "--threads",
        "2",
        "--no-repack",
        "--metrics",
        "--spec-draft-n-min",
        "-1",
    ]
    path = _config(tmp_path, '[targets.x]\nbase_url = "http://x/v1"\nrig_args = ["--threads", "1"]\n')
    assert "has rig_args but no rig" in _error(path)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('grid.n = [2]\nextra = { a = "{m}" }', "targets.x.extra.a = '{m}': {m} is not a parameter of targets.x.grid"),
        ('grid.n = [2]\nextra = { a = "1" }', "targets.x.grid.n is declared but no value of the table uses {n}"),
        ('grid.n = []\nextra = { a = "{n}" }', "targets.x.grid.n = []: expected a non-empty list"),
        ('grid.n = 4\nextra = { a = "{n}" }', "targets.x.grid.n = 4: expected a non-empty list"),
        ('grid.n = [[1]]\nextra = { a = "{n}" }', "[1] is not a plain value"),
        ('grid.n = ["a b"]\nextra = { a = "{n}" }', "'a b' cannot be part of a target name"),
        ('grid.n = [1, 1]\nextra = { a = "{n}" }', "targets.x.grid.n = [1, 1]: a value is listed twice"),
        ('grid.port = [1]\nextra = { a = "{port}" }', "targets.x.grid.port: 'port' cannot name a grid parameter"),
        ("grid = 3", "targets.x.grid = 3: expected a table of parameter lists"),
        ('grid.n = [1, 2]\nextra = { a = "{n}" }\nconcurrency = 0', "targets.x[n=1].concurrency = 0"),
    ],
)
def test_grid_errors_name_the_file_the_key_and_the_value(tmp_path: Path, body: str, expected: str) -> None:
    path = _config(tmp_path, f'[targets.x]\nbase_url = "http://127.0.0.1:2/v1"\n{body}\n')
    message = _error(path)
    assert str(path) in message and expected in message


def test_names_that_would_share_a_folder_or_a_name_are_refused(tmp_path: Path) -> None:
    grid = '[targets.x]\nbase_url = "http://127.0.0.1:2/v1"\nextra = { a = "{n}" }\ngrid.n = [1]\n'
    assert "targets.x[n=1] is defined twice" in _error(
        _config(tmp_path, grid + '["targets"."x[n=1]"]\nbase_url = "http://y/v1"\n')
    )
    clash = _error(_config(tmp_path, grid + '["targets"."x@n=1"]\nbase_url = "http://y/v1"\n'))
    assert "targets.x[n=1] and targets.x@n=1 would share the runs folder 'x@n=1'" in clash
    assert folder_name("dflash[n_max=4,p=0.5]") == "dflash@n_max=4,p=0.5"
    assert folder_name("a/b c") == "a_b_c" and folder_name("plain-name_1.2") == "plain-name_1.2"


def test_a_grid_table_named_alone_lists_its_points(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _config(
        tmp_path, '[targets.x]\nbase_url = "http://127.0.0.1:2/v1"\nextra = { a = "{n}" }\ngrid.n = [1, 2]\n'
    )
    message = str(pytest.raises(ConfigError, load_config(path).target, "x").value)
    assert "'x' in" in message and "is a grid of 2 targets: x[n=1], x[n=2]" in message
    assert main(["targets", "--config", str(path)]) == 0
    listed = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == ["name", "base", "x[n=1]", "x[n=2]"]


def test_a_grid_point_runs_resumes_and_stores_in_a_safe_folder(tmp_path: Path) -> None:
    config_path = make_project(tmp_path, "http://unused")
    text = config_path.read_text().split("[targets.spec]")[0]
    command = json.dumps([sys.executable, str(FAKE), "--port", "{port}", "--tokens", "{tokens}"])
    config_path.write_text(
        text
        + f"""[targets.spec]
engine = "llamacpp"
baseline = "base"
grid.tokens = [3, 5]
[targets.spec.serve]
command = {command}
health_path = "/v1/models"
startup_timeout_s = 30
"""
    )
    config = load_config(config_path)
    first = run_target(config, "spec[tokens=5]", ["echo"], RunOptions(limit=2, grade=False))
    folder = first[("echo", 0)].folder
    assert folder.parent.parent == tmp_path / "runs" / "spec@tokens=5"
    store = open_run(folder)
    assert store.manifest.target == "spec[tokens=5]"
    assert all(len(r.completion.tokens) == 5 for r in store.results().values())
    again = run_target(config, "spec[tokens=5]", ["echo"], RunOptions(limit=2, grade=False))
    assert again[("echo", 0)].folder == folder and again[("echo", 0)].recorded == 0  # resumed: nothing asked again


def test_runs_stored_under_a_raw_name_still_resume(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs written before folder names were made safe keep resuming where they are."""
    import evalsuite.runner as runner

    text = project.read_text().replace("[targets.spec]", '["targets"."my spec"]')
    project.write_text(text)
    config = load_config(project)
    with monkeypatch.context() as patch:
        patch.setattr(runner, "folder_name", lambda name: name)  # the layout before
        old = run_target(config, "my spec", ["echo"], RunOptions(limit=2, grade=False))[("echo", 0)].folder
    assert old.parent.parent.name == "my spec"
    again = run_target(config, "my spec", ["echo"], RunOptions(limit=3, grade=False))[("echo", 0)]
    assert again.folder == old and again.recorded == 1
