"""Per-document parity with lm-eval itself on one endpoint: same prompt, response, filtered answer, score.

The scripted server answers deterministically from the prompt, so it checks
prompts and scoring fast in every run; the reference rig's llama-server
checks real greedy generations (marked rig).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest
from fake_server import Fault

sys.path.insert(0, str(Path(__file__).resolve().parent))

from parity import differences, lmeval_side, lmeval_task_dir, suite_project, suite_side  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RIG_DOCS = int(os.environ.get("EVALSUITE_PARITY_DOCS", "24"))  # fewer on a crowded machine; CI runs 24
CASES = {  # suite task file, lm-eval base task, fixture
    "gsm8k": ("gsm8k", ROOT / "fixtures" / "gsm8k.jsonl"),
    "math_algebra": ("hendrycks_math_algebra", ROOT / "fixtures" / "math500.jsonl"),
}


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """lm-eval's own task files reading the fixtures (one include_path, so one task index per session)."""
    folder = tmp_path_factory.mktemp("lmeval_tasks")
    for base, data in CASES.values():
        lmeval_task_dir(folder, f"{base}_local", base, data)
    return folder


def _check(
    tmp_path: Path, task_dir: Path, base_url: str, case: str, chat: bool, limit: int, max_gen_toks: int
) -> tuple[dict, dict]:
    base, data = CASES[case]
    model = httpx.get(f"{base_url}/v1/models", timeout=30).json()["data"][0]["id"]
    theirs = lmeval_side(base_url, model, task_dir, f"{base}_local", chat=chat, limit=limit, max_gen_toks=max_gen_toks)
    form = "true" if chat else "false"
    text = (
        f"lmeval: {{task: {base}, num_fewshot: 0, max_gen_toks: {max_gen_toks}, apply_chat_template: {form}, "
        f"include_path: {task_dir}}}\n"
    )
    config = suite_project(tmp_path / "project", base_url, {case: text})
    ours = suite_side(config, "chat" if chat else "completions", case, data, limit=limit)
    assert len(ours) == limit
    problems = differences(theirs, ours)
    assert not problems, "\n".join(problems)
    return theirs, ours


@pytest.mark.parametrize("chat", [True, False], ids=["local-chat-completions", "local-completions"])
def test_parity_on_the_scripted_server(tmp_path: Path, task_dir: Path, fake_server, chat: bool) -> None:
    _check(tmp_path, task_dir, fake_server.base_url.rstrip("/").removesuffix("/v1"), "gsm8k", chat, 8, 12)


def test_parity_where_answers_score(tmp_path: Path, task_dir: Path, fake_server) -> None:
    """The scripted answers score 0 everywhere, which a scorer stubbed to 0 would match; here three documents
    are answered so that lm-eval's own filters score them: doc 0 '#### 18' (both filters right), doc 1 'so 3
    bolts' (only the flexible filter finds 3), doc 2 '#### 7' (a wrong number, both filters 0)."""
    answers = {"Janet’s ducks": "Janet makes #### 18", "A robe takes": "so 3 bolts", "Josh decides": "#### 7"}
    path = "choices.0.message.content"
    fake_server.state.faults = [
        Fault("patch", match=m, times=-1, patch=[["set", path, text], ["set", "choices.0.logprobs", None]])
        for m, text in answers.items()
    ]
    theirs, ours = _check(
        tmp_path, task_dir, fake_server.base_url.rstrip("/").removesuffix("/v1"), "gsm8k", True, 4, 12
    )
    expected = {  # lm-eval's gsm8k: exact_match per filter, by hand from its regexes
        0: {"strict-match": 1.0, "flexible-extract": 1.0},
        1: {"strict-match": 0.0, "flexible-extract": 1.0},
        2: {"strict-match": 0.0, "flexible-extract": 0.0},
        3: {"strict-match": 0.0, "flexible-extract": 0.0},
    }
    for side in (theirs, ours):
        assert {d: {f: s["exact_match"] for f, s in doc["scores"].items()} for d, doc in side.items()} == expected
    assert ours[0]["filtered"] == {"strict-match": "18", "flexible-extract": "18"}
    assert fake_server.state.hits["patch"] == 6  # three documents, asked once by each side


@pytest.fixture(scope="module")
def rig_baseline():
    from evalsuite.rig.launcher import serve

    with serve(["baseline"]) as servers:
        yield servers["baseline"].base_url


@pytest.mark.rig
@pytest.mark.parametrize("chat", [True, False], ids=["local-chat-completions", "local-completions"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_parity_on_the_rig(tmp_path: Path, task_dir: Path, rig_baseline: str, case: str, chat: bool) -> None:
    _check(tmp_path, task_dir, rig_baseline, case, chat, limit=RIG_DOCS, max_gen_toks=64)
