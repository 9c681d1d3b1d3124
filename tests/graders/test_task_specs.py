"""The MATH-500 and GSM8K task specs: they load, pin real revisions, build samples and grade their fixtures.

Also the bad-input paths a user meets first: a missing dataset, an unknown
key or field, a malformed row, each one clear error naming where.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from grader_helpers import REPO

from evalsuite.errors import ConfigError, DatasetError
from evalsuite.graders import GradeInput, get_grader
from evalsuite.graders.gsm8k import GSM8KGrader, LMEvalGSM8KGrader
from evalsuite.graders.math import MathGrader
from evalsuite.tasks.build import build_samples
from evalsuite.tasks.data import load_rows, read_local
from evalsuite.tasks.spec import find_task, load_task_spec

TASKS = REPO / "tasks"


@pytest.mark.parametrize(
    ("name", "grader_cls", "hub"),
    [
        ("math500", MathGrader, "HuggingFaceH4/MATH-500"),
        ("gsm8k", GSM8KGrader, "openai/gsm8k"),
        ("gsm8k_lmeval", LMEvalGSM8KGrader, "openai/gsm8k"),
    ],
)
def test_specs_load_with_pinned_revisions_and_their_grader(name: str, grader_cls: type, hub: str) -> None:
    spec = find_task(name, TASKS)
    assert spec.name == name
    assert spec.dataset.hf is not None and spec.dataset.hf.path == hub
    assert re.fullmatch(r"[0-9a-f]{40}", spec.dataset.hf.revision), spec.dataset.hf.revision
    assert isinstance(get_grader(spec.grader), grader_cls)


def test_lmeval_variant_only_changes_the_grader() -> None:
    base, variant = find_task("gsm8k", TASKS), find_task("gsm8k_lmeval", TASKS)
    assert variant.prompt == base.prompt and variant.dataset == base.dataset and variant.generation == base.generation
    assert variant.grader.extraction == ["strict-match", "flexible-extract"]


def test_prompts_keep_their_final_answer_formats() -> None:
    assert "\\boxed{}" in find_task("math500", TASKS).prompt.user
    assert '"#### N"' in find_task("gsm8k", TASKS).prompt.user


def test_math500_fixture_samples_and_gold_grades() -> None:
    spec = find_task("math500", TASKS)
    rows, identity = load_rows(spec, "fixture", root=REPO)
    samples = build_samples(spec, rows, source="fixtures/math500.jsonl")
    assert len(samples) == 35 and identity.revision.startswith("sha256:")
    assert {s.strata["subject"] for s in samples} == {
        "Algebra",
        "Counting & Probability",
        "Geometry",
        "Intermediate Algebra",
        "Number Theory",
        "Prealgebra",
        "Precalculus",
    }
    assert {s.strata["level"] for s in samples} == {"1", "2", "3", "4", "5"}
    assert samples[0].id == "test/precalculus/807.json"
    assert samples[0].messages[0]["content"].endswith(rows[0]["problem"].strip())
    grader = get_grader(spec.grader)
    grades = grader.grade_batch([GradeInput(s, r["solution"]) for s, r in zip(samples, rows)], workers=2)
    assert [g.status for g in grades] == ["correct"] * 35


@pytest.mark.parametrize("task", ["gsm8k", "gsm8k_lmeval"])
def test_gsm8k_fixture_gold_grades(task: str) -> None:
    spec = find_task(task, TASKS)
    rows, _ = load_rows(spec, "fixture", root=REPO)
    samples = build_samples(spec, rows, source="fixtures/gsm8k.jsonl")
    assert [s.id for s in samples[:2]] == ["gsm8k-test-0", "gsm8k-test-1"]
    grades = get_grader(spec.grader).grade_batch([GradeInput(s, r["answer"]) for s, r in zip(samples, rows)])
    assert [g.status for g in grades] == ["correct"] * 30


def test_missing_dataset_file_is_one_clear_error(tmp_path: Path) -> None:
    spec = find_task("math500", TASKS)
    with pytest.raises(DatasetError, match=r"Dataset file .*nowhere\.jsonl does not exist\."):
        load_rows(spec, "local", root=REPO, path=str(tmp_path / "nowhere.jsonl"))


def test_unknown_spec_key_and_unknown_grader_option(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(f"include: {TASKS / 'math500.yaml'}\ngrader: {{extractoin: [last_boxed]}}\n")
    with pytest.raises(ConfigError, match=r"grader\.extractoin: unknown key"):
        load_task_spec(tmp_path / "t.yaml")
    (tmp_path / "u.yaml").write_text(f"include: {TASKS / 'math500.yaml'}\ngrader: {{options: {{timeot_s: 3}}}}\n")
    with pytest.raises(ConfigError, match="Grader 'math': unknown option 'timeot_s'"):
        get_grader(load_task_spec(tmp_path / "u.yaml").grader)


def test_prompt_field_the_rows_lack_names_the_row(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(f"include: {TASKS / 'gsm8k.yaml'}\nprompt: {{user: '{{{{ questoin }}}}'}}\n")
    spec = load_task_spec(tmp_path / "t.yaml")
    with pytest.raises(DatasetError, match=r"data\.jsonl, row 1: the prompt template uses a field the row lacks"):
        build_samples(spec, [{"question": "q", "answer": "#### 1"}], source="data.jsonl")


def test_malformed_rows_are_named_by_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\n{"question": "q2", "answer": \n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl, line 2: not valid JSON"):
        read_local(bad)
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"question": "q", "answer": "#### 1"}\n{"question": "q2"}\n')
    spec = find_task("gsm8k", TASKS)
    with pytest.raises(DatasetError, match=r"missing\.jsonl, row 2: missing reference field 'answer'"):
        build_samples(spec, read_local(missing), source=str(missing))


def test_malformed_json_array_dataset_is_named_by_file_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "rows.json"
    broken.write_text('[\n  {"question": "q", "answer": "#### 1"},\n  {"question": \n]\n')
    with pytest.raises(DatasetError, match=r"rows\.json, line 4: not valid JSON"):
        read_local(broken)
    scalars = tmp_path / "scalars.json"
    scalars.write_text('[{"question": "q", "answer": "#### 1"}, 3]')
    with pytest.raises(DatasetError, match=r"scalars\.json: item 2 is a int, not a JSON object"):
        read_local(scalars)


_BUILD = """
import sys
from pathlib import Path
from evalsuite.tasks.build import build_samples
from evalsuite.tasks.data import load_rows
from evalsuite.tasks.spec import find_task
root = Path(sys.argv[1])
spec = find_task(sys.argv[2], root / "tasks")
rows, _ = load_rows(spec, "fixture", root=root)
samples = build_samples(spec, rows)
assert samples and all(s.messages for s in samples) and len({s.id for s in samples}) == len(samples)
print(len(samples))
"""


@pytest.mark.parametrize("path", sorted(TASKS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_task_builds_its_fixture_samples(path: Path, tmp_path: Path) -> None:
    """Each task file, whatever adapter it names (entry point or import path), gives samples offline.

    In a fresh interpreter outside the checkout: inside pytest, test folders named like an
    adapter (tests/livecodebench) would stand in for it on sys.path.
    """
    if "lmeval" in path.read_text():
        pytest.importorskip("lm_eval")
    done = subprocess.run(
        [sys.executable, "-I", "-c", _BUILD, str(REPO), path.stem],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 0
