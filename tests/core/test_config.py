"""Config and task-spec errors name the file, the key, the bad value and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsuite.config import load_config
from evalsuite.errors import ConfigError, DatasetError
from evalsuite.runner import plan_run
from evalsuite.tasks.spec import load_task_spec


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evalsuite.toml"
    path.write_text(text)
    return path


def test_bad_value_names_file_key_value_and_expectation(tmp_path: Path) -> None:
    path = _write(tmp_path, '[targets.a]\nbase_url = "http://x/v1"\nconcurrency = 0\nengine = "tgi"\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert str(path) in message
    assert "targets.a.concurrency = 0" in message and "greater than or equal to 1" in message
    assert "targets.a.engine = 'tgi'" in message and "'llamacpp'" in message


def test_unknown_key_and_missing_endpoint(tmp_path: Path) -> None:
    path = _write(tmp_path, "[targets.a]\nbase_ur = 'http://x'\n")
    message = str(pytest.raises(ConfigError, load_config, path).value)
    assert "targets.a.base_ur: unknown key" in message
    path = _write(tmp_path, "[targets.a]\nmodel = 'm'\n")
    assert "needs base_url" in str(pytest.raises(ConfigError, load_config, path).value)


def test_baseline_must_name_a_target(tmp_path: Path) -> None:
    path = _write(tmp_path, '[targets.a]\nbase_url = "http://x/v1"\nbaseline = "nope"\n')
    assert "targets.a.baseline = 'nope' names no target" in str(pytest.raises(ConfigError, load_config, path).value)


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    assert "not valid TOML" in str(pytest.raises(ConfigError, load_config, _write(tmp_path, "[targets\n")).value)
    assert "does not exist" in str(pytest.raises(ConfigError, load_config, tmp_path / "nope.toml").value)


def test_api_key_comes_from_the_environment_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, '[targets.a]\nbase_url = "http://x/v1"\napi_key_env = "EVALSUITE_TEST_KEY"\n')
    target = load_config(path).target("a")
    monkeypatch.delenv("EVALSUITE_TEST_KEY", raising=False)
    assert "$EVALSUITE_TEST_KEY, which is not set" in str(pytest.raises(ConfigError, target.api_key).value)
    monkeypatch.setenv("EVALSUITE_TEST_KEY", "sk-secret")
    assert target.api_key() == "sk-secret"


def test_unknown_target_lists_the_known_ones(project: Path) -> None:
    assert "Targets: base, spec" in str(pytest.raises(ConfigError, load_config(project).target, "nope").value)


def test_task_spec_errors(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        "name: t\ndataset: {}\nreference_field: a\nprompt: {user: x}\ngrader: {name: m}\ncolour: red\n"
    )
    assert "colour: unknown key" in str(pytest.raises(ConfigError, load_task_spec, tmp_path / "t.yaml").value)
    (tmp_path / "a.yaml").write_text("include: b.yaml\n")
    (tmp_path / "b.yaml").write_text("include: a.yaml\n")
    assert "cycle" in str(pytest.raises(ConfigError, load_task_spec, tmp_path / "a.yaml").value)


def test_variant_includes_base_spec(project: Path) -> None:
    tasks = project.parent / "tasks"
    (tasks / "echo_loud.yaml").write_text(
        "include: echo.yaml\nname: echo_loud\nprompt: {user: 'LOUD {{ question }}'}\n"
    )
    spec = load_task_spec(tasks / "echo_loud.yaml")
    assert spec.prompt.user == "LOUD {{ question }}"
    assert spec.prompt.system == "You are terse." and spec.reference_field == "answer"


def test_malformed_dataset_row_is_named_by_file_and_line(project: Path) -> None:
    data = project.parent / "data.jsonl"
    lines = data.read_text().splitlines()
    lines[3] = '{"qid": "q3", "question": '
    data.write_text("\n".join(lines) + "\n")
    message = str(pytest.raises(DatasetError, plan_run, load_config(project), "base", "echo").value)
    assert f"{data}, line 4: not valid JSON" in message


def test_missing_field_and_missing_dataset(project: Path) -> None:
    data = project.parent / "data.jsonl"
    data.write_text('{"qid": "q0", "question": "x", "group": "g"}\n')
    message = str(pytest.raises(DatasetError, plan_run, load_config(project), "base", "echo").value)
    assert "row 1: missing reference field 'answer'" in message
    data.unlink()
    assert "does not exist" in str(pytest.raises(DatasetError, plan_run, load_config(project), "base", "echo").value)


def test_shipped_tasks_declare_their_equivalence_margins() -> None:
    from evalsuite.workflow import task_margins

    config = load_config(Path(__file__).resolve().parents[2] / "evalsuite.toml")
    margins = task_margins(config, ["math500", "gsm8k", "gsm8k_lmeval", "no-such-task"])
    assert margins == {"math500": 0.02, "gsm8k": 0.01, "gsm8k_lmeval": 0.01}
