"""Where tasks, fixtures, models and the config are found: never relative to a checkout or the current folder.

Lookup order for a task: an explicit spec path, then the project's own
`tasks/` next to its config, then the tasks packaged with evalsuite.  The
config: `--config`, then `./evalsuite.toml`, else an error that says to run
`evalsuite init`.
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

from evalsuite.cli import main
from evalsuite.config import load_config
from evalsuite.errors import ConfigError, DatasetError
from evalsuite.rig.committed import LEARNED_DFLASH, LEARNED_MODEL
from evalsuite.tasks.data import fixture_file, load_rows
from evalsuite.tasks.packaged import data_root, packaged_fixtures, packaged_tasks
from evalsuite.tasks.spec import find_task, known_tasks, locate_task

ROOT = Path(__file__).resolve().parents[2]


def test_packaged_files_are_found_through_the_package_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    package = Path(str(files("evalsuite")))
    assert data_root().parent == package
    for name in ("math500", "gsm8k", "livecodebench", "humaneval"):
        assert (packaged_tasks() / f"{name}.yaml").is_file()
    assert (packaged_fixtures() / "gsm8k.jsonl").is_file()
    assert LEARNED_MODEL.is_file() and LEARNED_MODEL.parent == packaged_fixtures() / "models"
    assert LEARNED_DFLASH.parent == LEARNED_MODEL.parent


def test_the_checkout_keeps_one_copy_of_each_file() -> None:
    """In a checkout the packaged folders are the top-level tasks/ and fixtures/ themselves, not copies."""
    if not (ROOT / "tasks").is_dir():
        pytest.skip("not a checkout")
    assert packaged_tasks().resolve() == (ROOT / "tasks").resolve()
    assert packaged_fixtures().resolve() == (ROOT / "fixtures").resolve()


def test_a_task_name_falls_back_to_the_packaged_specs(tmp_path: Path) -> None:
    spec = find_task("gsm8k", tmp_path / "tasks")  # the project has no tasks/ folder at all
    assert spec.name == "gsm8k" and spec.grader.name == "gsm8k"
    assert locate_task("gsm8k", tmp_path / "tasks") == packaged_tasks() / "gsm8k.yaml"
    assert find_task("math500").name == "math500"  # no project at all


def test_the_projects_own_task_overrides_a_packaged_one(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    raw = yaml.safe_load((packaged_tasks() / "gsm8k.yaml").read_text())
    raw.update(equivalence_margin=0.05, description="our own gsm8k")
    (tasks / "gsm8k.yaml").write_text(yaml.safe_dump(raw))
    spec = find_task("gsm8k", tasks)
    assert spec.description == "our own gsm8k" and spec.equivalence_margin == 0.05
    assert find_task("math500", tasks).name == "math500"  # the others still come from the package
    assert {"gsm8k", "math500", "livecodebench"} <= set(known_tasks(tasks))


def test_a_project_variant_includes_a_packaged_task(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "gsm8k_short.yaml").write_text("include: gsm8k.yaml\nname: gsm8k_short\ngeneration:\n  max_tokens: 99\n")
    spec = find_task("gsm8k_short", tasks)
    assert spec.generation["max_tokens"] == 99
    assert spec.prompt == find_task("gsm8k").prompt


def test_an_explicit_spec_path_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "elsewhere").mkdir()
    text = (packaged_tasks() / "math500.yaml").read_text()
    (tmp_path / "elsewhere" / "gsm8k.yaml").write_text(text.replace("name: math500", "name: gsm8k"))
    monkeypatch.chdir(tmp_path)
    spec = find_task("elsewhere/gsm8k.yaml", tmp_path / "tasks")
    assert spec.grader.name == "math"  # the file given, not the packaged gsm8k
    with pytest.raises(ConfigError, match=r"Task spec file elsewhere/nope\.yaml does not exist\."):
        find_task("elsewhere/nope.yaml", tmp_path / "tasks")
    with pytest.raises(ConfigError, match=r"gsm8k\.yaml does not exist \(a task by name is given without \.yaml"):
        find_task("gsm8k.yaml", tmp_path / "tasks")  # not in the current folder: the hint names the fix
    with pytest.raises(ConfigError, match="is a folder, not a task spec file"):
        find_task("elsewhere/", tmp_path / "tasks")


def test_an_unknown_task_lists_the_project_and_packaged_tasks(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "mine.yaml").write_text("include: gsm8k.yaml\n")
    message = str(pytest.raises(ConfigError, find_task, "gsm9k", tasks).value)
    assert "Unknown task 'gsm9k'" in message and str(tasks) in message
    assert "mine" in message and "math500" in message and "humaneval" in message


def test_fixture_subsets_come_from_the_project_first_then_the_package(tmp_path: Path) -> None:
    assert fixture_file("gsm8k.jsonl", tmp_path) == packaged_fixtures() / "gsm8k.jsonl"
    rows, identity = load_rows(find_task("gsm8k"), "fixture", root=tmp_path)
    packaged_rows = len((packaged_fixtures() / "gsm8k.jsonl").read_text().splitlines())
    assert len(rows) == packaged_rows and identity.location == "gsm8k.jsonl"

    (tmp_path / "fixtures").mkdir()
    row = {"question": "What is 1+1?", "answer": "1+1=2\n#### 2"}
    (tmp_path / "fixtures" / "gsm8k.jsonl").write_text(json.dumps(row) + "\n")
    rows, own = load_rows(find_task("gsm8k"), "fixture", root=tmp_path)
    assert len(rows) == 1 and own.revision != identity.revision

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "mine.yaml").write_text("include: gsm8k.yaml\nname: mine\ndataset:\n  fixture: mine.jsonl\n")
    with pytest.raises(DatasetError, match=r"Fixture subset mine\.jsonl is neither in .*fixtures nor among"):
        load_rows(find_task("mine", tasks), "fixture", root=tmp_path)


def test_a_missing_config_says_to_run_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    message = str(pytest.raises(ConfigError, load_config).value)
    assert f"No evalsuite.toml in {tmp_path}" in message and "evalsuite init" in message
    assert main(["targets"]) == 2
    assert "evalsuite init" in capsys.readouterr().err
    given = tmp_path / "other.toml"
    message = str(pytest.raises(ConfigError, load_config, given).value)
    assert str(given) in message and "--config" in message


def test_the_config_in_the_current_folder_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "evalsuite.toml").write_text('[targets.a]\nbase_url = "http://127.0.0.1:9/v1"\n')
    monkeypatch.chdir(tmp_path)
    config = load_config()
    assert config.path == tmp_path / "evalsuite.toml" and list(config.targets) == ["a"]
