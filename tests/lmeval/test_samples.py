"""lm-eval's prompts and scores through the suite, offline: fixtures fed to lm-eval as local data."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evalsuite.config import load_config
from evalsuite.errors import ConfigError
from evalsuite.graders import GradeInput, get_grader
from evalsuite.grading import grade_run
from evalsuite.runner import execute, plan_run
from evalsuite.store import open_run
from evalsuite.tasks.build import build_samples
from evalsuite.tasks.data import load_rows, read_local
from evalsuite.tasks.spec import load_task_spec

ROOT = Path(__file__).resolve().parents[2]
GSM8K = ROOT / "fixtures" / "gsm8k.jsonl"
MATH = ROOT / "fixtures" / "math500.jsonl"


def _spec(tmp_path: Path, lmeval: dict, name: str = "t"):
    (tmp_path / "tasks").mkdir(exist_ok=True)
    path = tmp_path / "tasks" / f"{name}.yaml"
    path.write_text(json.dumps({"lmeval": lmeval}))
    return load_task_spec(path)


def _samples(spec, file: Path):
    rows, _ = load_rows(spec, "local", root=ROOT, path=str(file))
    return build_samples(spec, rows)


def test_zero_shot_prompts_are_lm_evals_doc_to_text_as_one_chat_message(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"task": "gsm8k", "num_fewshot": 0})
    samples = _samples(spec, GSM8K)
    rows = read_local(GSM8K)
    assert [s.id for s in samples] == [f"gsm8k/{i}" for i in range(len(rows))]
    for sample, row in zip(samples, rows):
        assert sample.messages == ({"role": "user", "content": f"Question: {row['question']}\nAnswer:"},)
        assert sample.reference == {"question": row["question"], "answer": row["answer"]}
        assert sample.strata == {"lmeval_task": "gsm8k", "lmeval_group": "gsm8k"}


def test_few_shot_needs_its_split_and_then_uses_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="few-shot examples from its 'train' split.*lmeval.splits"):
        _samples(_spec(tmp_path, {"task": "gsm8k", "num_fewshot": 2}), GSM8K)
    train = tmp_path / "train.jsonl"
    shots = [{"question": f"Shot question {i}?", "answer": f"Because.\n#### {i}"} for i in range(5)]
    train.write_text("".join(json.dumps(s) + "\n" for s in shots))
    spec = _spec(tmp_path, {"task": "gsm8k", "num_fewshot": 2, "splits": {"train": str(train)}})
    flat = _samples(spec, GSM8K)[0].messages
    assert len(flat) == 1 and flat[0]["content"].count("Question:") == 3
    assert flat[0]["content"].count("Shot question") == 2 and flat[0]["content"].endswith("Answer:")
    multi = _spec(
        tmp_path,
        {"task": "gsm8k", "num_fewshot": 2, "fewshot_as_multiturn": True, "splits": {"train": str(train)}},
        name="m",
    )
    turns = _samples(multi, GSM8K)[0].messages
    assert [m["role"] for m in turns] == ["user", "assistant", "user", "assistant", "user"]
    assert turns[1]["content"].startswith("Because.")


def test_completions_form_is_one_flat_prompt_sent_verbatim(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"task": "gsm8k", "num_fewshot": 0, "apply_chat_template": False})
    sample = _samples(spec, GSM8K)[3]
    assert len(sample.messages) == 1
    assert sample.prompt_text == sample.messages[0]["content"] == f"Question: {sample.reference['question']}\nAnswer:"


def test_gsm8k_scored_by_lm_evals_filters_per_sample(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"task": "gsm8k", "num_fewshot": 0})
    sample = _samples(spec, GSM8K)[0]  # Janet's ducks: 18
    grader = get_grader(spec.grader)
    texts = ["So 9 * 2 = 18.\n#### 18", "She makes $18 in all.", "#### 17", "no numbers here"]
    grades = grader.grade_batch([GradeInput(sample, t) for t in texts])
    strict = [g.details["lmeval"]["strict-match"] for g in grades]
    flexible = [g.details["lmeval"]["flexible-extract"] for g in grades]
    assert [g.status for g in grades] == ["correct", "incorrect", "incorrect", "incorrect"]
    assert [s["filtered"] for s in strict] == ["18", "[invalid]", "17", "[invalid]"]
    assert [f["exact_match"] for f in flexible] == [1.0, 1.0, 0.0, 0.0]
    json.dumps([g.details for g in grades])  # stored as JSON


def test_math_subtask_on_the_math_fixture(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"task": "hendrycks_math_algebra"})
    samples = _samples(spec, MATH)
    assert len(samples) == len(read_local(MATH)) and spec.generation["stop"] == ["Problem:"]
    first = samples[0]
    assert first.messages[0]["content"] == f"Problem: {first.reference['problem']}\nAnswer:"
    grades = get_grader(spec.grader).grade_batch(
        [GradeInput(s, f"The answer is ${s.reference['answer']}$.") for s in samples[:5]]
        + [GradeInput(samples[0], "The answer is $\\text{nothing}$.")]
    )
    assert [g.status for g in grades] == ["correct"] * 5 + ["incorrect"]


def test_run_grade_and_strata_through_the_pipeline(project: Path, fake_server) -> None:
    (project.parent / "tasks" / "lm.yaml").write_text(
        "lmeval: {task: gsm8k, num_fewshot: 0, max_gen_toks: 16, local: data.jsonl}\n"
    )
    plan = plan_run(load_config(project), "base", "lm")
    assert plan.params.stop == ("Question:", "</s>", "<|im_end|>") and plan.params.max_tokens == 16
    outcome = asyncio.run(execute(plan))
    store = open_run(outcome.folder)
    results = store.results()
    assert len(results) == 10 and results["gsm8k/1"].strata == {"lmeval_task": "gsm8k", "lmeval_group": "gsm8k"}
    assert store.manifest.grader is not None
    assert store.manifest.grader["options"]["identity"]["lm_eval"] == "0.4.13"
    grades = grade_run(store, tasks_dir=project.parent / "tasks")
    assert len(grades) == 10 and all(g.status == "incorrect" for g in grades)  # the fake server never answers
    assert all(g.details["lmeval"]["strict-match"]["filtered"] == "[invalid]" for g in grades)


def test_a_group_is_compared_with_one_accuracy_row_per_subtask(project: Path) -> None:
    from evalsuite.workflow import RunOptions, compare_eval, eval_target

    (project.parent / "tasks" / "hm.yaml").write_text(
        f"lmeval: {{task: hendrycks_math, max_gen_toks: 8, local: {MATH}}}\n"
    )
    config = load_config(project)
    runs = eval_target(config, "spec", ["hm"], RunOptions(limit=None), repeat_baseline=False)
    (comparison,) = compare_eval(config, runs)
    assert comparison.token.label == "IDENTICAL"  # the scripted server answers the same prompt the same way
    subtasks = {r.value for r in comparison.accuracy if r.stratum == "lmeval_task"}
    assert len(subtasks) == 7 and "hendrycks_math_precalc" in subtasks
    assert {r.value for r in comparison.accuracy if r.stratum == "lmeval_group"} == {"hendrycks_math"}
    n_rows = len(read_local(MATH))
    assert all(r.summary.n == n_rows for r in comparison.accuracy if r.stratum == "lmeval_task")


def test_a_sample_lm_eval_cannot_score_is_ungraded_not_fatal(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"task": "gsm8k", "num_fewshot": 0})
    good = _samples(spec, GSM8K)[0]
    broken = type(good)(good.id + "x", good.task, good.messages, {"question": "q"}, good.strata)  # no answer field
    grades = get_grader(spec.grader).grade_batch([GradeInput(good, "#### 18"), GradeInput(broken, "#### 18")])
    assert grades[0].status == "correct"
    assert grades[1].status == "ungraded" and "lm-eval scoring failed" in grades[1].reason
