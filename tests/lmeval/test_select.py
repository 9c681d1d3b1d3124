"""Selecting lm-eval tasks: what is refused, what is recorded, what a run will send."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evalsuite.errors import ConfigError
from evalsuite.tasks.build import prompt_template_digest
from evalsuite.tasks.spec import find_task, load_task_spec

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks"


def test_named_task_takes_lm_evals_generation_settings_and_identity() -> None:
    spec = find_task("lmeval:gsm8k", TASKS)
    assert spec.name == "lmeval:gsm8k"
    assert spec.generation == {"stop": ["Question:", "</s>", "<|im_end|>"], "max_tokens": 256}
    ident = spec.grader.options["identity"]
    assert ident["lm_eval"] == "0.4.13"
    assert ident["tasks"]["gsm8k"]["version"] == 3.0
    assert len(ident["tasks"]["gsm8k"]["config"]) == 16
    assert spec.strata == ["lmeval_task", "lmeval_group"]


def test_options_change_the_fingerprinted_prompt_identity(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    zero = tmp_path / "tasks" / "a.yaml"
    zero.write_text("lmeval: {task: gsm8k, num_fewshot: 0}\n")
    three = tmp_path / "tasks" / "b.yaml"
    three.write_text("lmeval: {task: gsm8k, num_fewshot: 3, apply_chat_template: false, max_gen_toks: 32}\n")
    a, b = load_task_spec(zero), load_task_spec(three)
    assert (
        a.grader.options["identity"]["tasks"]["gsm8k"]["config"]
        != b.grader.options["identity"]["tasks"]["gsm8k"]["config"]
    )
    assert prompt_template_digest(a) != prompt_template_digest(b)
    assert b.generation["max_tokens"] == 32
    assert prompt_template_digest(a) == prompt_template_digest(load_task_spec(zero))


def test_chat_form_sends_at_most_four_stops_as_lm_evals_chat_client(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    path = tmp_path / "tasks" / "t.yaml"
    stops = {"generation_kwargs": {"until": ["a", "b", "c", "d", "e"], "do_sample": False}}
    path.write_text(f"lmeval: {{task: gsm8k, overrides: {stops}}}\n")
    assert load_task_spec(path).generation["stop"] == ["a", "b", "c", "d"]
    path.write_text(f"lmeval: {{task: gsm8k, apply_chat_template: false, overrides: {stops}}}\n")
    assert load_task_spec(path).generation["stop"] == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("name, kind", [("lambada_openai", "loglikelihood"), ("arc_easy", "multiple_choice")])
def test_loglikelihood_tasks_are_refused_with_the_reason(name: str, kind: str) -> None:
    with pytest.raises(ConfigError, match=f"is a {kind} task: only generate_until tasks .* token diff"):
        find_task(f"lmeval:{name}", TASKS)


def test_sampling_and_unknown_names_and_bad_keys_are_sentences(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no task, group or tag named 'gsm8kk'"):
        find_task("lmeval:gsm8kk", TASKS)
    (tmp_path / "tasks").mkdir()
    path = tmp_path / "tasks" / "t.yaml"
    path.write_text("lmeval: {task: gsm8k, overrides: {generation_kwargs: {until: [x], do_sample: true}}}\n")
    with pytest.raises(ConfigError, match="samples .* needs greedy decoding"):
        load_task_spec(path)
    path.write_text("lmeval: {task: gsm8k, num_fewshots: 2}\n")
    with pytest.raises(ConfigError, match="num_fewshots"):
        load_task_spec(path)
    path.write_text("lmeval: gsm8k\nprompt: {user: x}\n")
    with pytest.raises(ConfigError, match="not prompt"):
        load_task_spec(path)


def test_a_group_expands_to_its_subtasks_with_the_group_as_stratum() -> None:
    spec = find_task("lmeval:hendrycks_math", TASKS)
    tasks = spec.grader.options["identity"]["tasks"]
    assert "hendrycks_math_algebra" in tasks and "hendrycks_math_precalc" in tasks and len(tasks) == 7
    assert {t["group"] for t in tasks.values()} == {"hendrycks_math"}
    assert spec.generation["stop"] == ["Problem:"]


def test_a_task_whose_module_cannot_load_is_named() -> None:
    pytest.importorskip("antlr4")
    from importlib.metadata import version

    if version("antlr4-python3-runtime").startswith("4.11"):
        pytest.skip("lm-eval[math] is installed: minerva_math loads")
    with pytest.raises(ConfigError, match="could not read task 'minerva_math_algebra'.*lm-eval\\[math\\]"):
        find_task("lmeval:minerva_math_algebra", TASKS)


def test_import_evalsuite_does_not_import_lm_eval() -> None:
    code = "import sys, evalsuite, evalsuite.cli, evalsuite.runner, evalsuite.workflow, evalsuite.grading; print('lm_eval' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
