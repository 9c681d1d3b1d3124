"""`evalsuite init`: a commented config that loads as written, never overwrites without --force."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from evalsuite.cli import build_parser, main
from evalsuite.config import Config, load_config
from evalsuite.tasks.spec import find_task


def test_init_writes_a_config_with_a_baseline_a_control_and_a_speculative_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    out = capsys.readouterr().out
    assert "Wrote evalsuite.toml" in out and "evalsuite eval speculative" in out and "cd " not in out

    config = load_config()  # the default lookup finds it
    assert set(config.targets) == {"baseline", "control", "speculative"}
    spec = config.target("speculative")
    assert (spec.baseline, spec.control) == ("baseline", "control")
    urls = {t.base_url for t in config.targets.values()}
    assert len(urls) == 3 and all(u and u.startswith("http://127.0.0.1:") for u in urls)
    assert config.defaults.data == "hf" and config.defaults.temperature == 0.0
    for task in config.defaults.tasks:  # every default task is one the package ships
        assert find_task(task, config.root / "tasks").name == task


def test_init_into_a_new_folder_says_to_cd_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init", "proj/eval"]) == 0
    assert (tmp_path / "proj" / "eval" / "evalsuite.toml").is_file()
    assert "cd proj/eval" in capsys.readouterr().out


def test_init_refuses_to_overwrite_without_force(tmp_path: Path, capsys) -> None:
    config = tmp_path / "evalsuite.toml"
    config.write_text("# my only copy of my targets\n")
    assert main(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{config} already exists" in err and "--force" in err
    assert config.read_text() == "# my only copy of my targets\n"

    assert main(["init", str(tmp_path), "--force"]) == 0
    assert "[targets.speculative]" in config.read_text()


def test_init_into_a_file_or_onto_a_folder_is_a_sentence_and_exit_2(tmp_path: Path, capsys) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("x")
    assert main(["init", str(file)]) == 2
    assert f"{file} is a file, not a folder" in capsys.readouterr().err
    (tmp_path / "evalsuite.toml").mkdir()
    assert main(["init", str(tmp_path), "--force"]) == 2
    assert "is a folder" in capsys.readouterr().err


def _commented_block(text: str, first_line: str) -> str:
    """The commented-out TOML block that starts at `first_line`, uncommented (up to the next blank comment)."""
    lines = text.splitlines()
    start = lines.index(first_line)
    block = []
    for line in lines[start:]:
        if not line.startswith("# ") or line.strip() == "#":
            break
        block.append(line[2:])
    return "\n".join(block)


def test_the_documented_serve_and_rig_examples_are_valid_config(tmp_path: Path) -> None:
    """The examples in the comments are real config: uncommented, they load (so they cannot rot)."""
    from evalsuite.cli.init import config_template

    text = config_template()
    serve = _commented_block(text, "# [targets.speculative]")
    assert "command = " in serve and "health_path" in serve and "startup_timeout_s" in serve
    raw = tomllib.loads(text)
    del raw["targets"]["speculative"]
    raw["targets"] |= tomllib.loads(serve)["targets"]
    target = Config.model_validate(raw).target("speculative")
    assert target.serve is not None and "{port}" in target.serve.argv()[target.serve.argv().index("--port") + 1]
    assert target.serve.env == {"LLAMA_ARG_THREADS": "8"}

    rig = _commented_block(text, "# [targets.rig-baseline]") + "\n" + _commented_block(text, "# [targets.rig-dflash]")
    rig_targets = Config.model_validate(tomllib.loads(rig)).targets
    from evalsuite.rig.launcher import RIG_CONFIGS

    assert {t.rig for t in rig_targets.values()} <= set(RIG_CONFIGS)


def test_init_help_teaches(capsys) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["init", "--help"])
    text = capsys.readouterr().out
    assert "--force" in text and "FOLDER" in text and "[serve]" in text
    assert re.search(r"evalsuite eval speculative", text)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    assert "evalsuite init" in capsys.readouterr().out
