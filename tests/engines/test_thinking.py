"""Thinking models: reasoning and answer are stored apart, graders read the answer, the diff every token."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_server import THINKING, FakeServer
from projects import make_project

from evalsuite.compare.outputs import truncation
from evalsuite.config import load_config
from evalsuite.engines.parse import completion_from_chat
from evalsuite.engines.stream import merge_chunks
from evalsuite.grading import grade_run
from evalsuite.runner import execute, plan_run
from evalsuite.store import open_run


def _chat(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}]}


# (server format, response, reasoning, answer, cut)
FORMATS = [
    (
        "llama.cpp --reasoning-format deepseek",
        _chat({"content": "The answer is 4.", "reasoning_content": "2+2 = 4."}),
        "2+2 = 4.",
        "The answer is 4.",
        False,
    ),
    (
        "llama.cpp --reasoning-format none",
        _chat({"content": "<think>\n2+2 = 4.\n</think>\n\nThe answer is 4."}),
        "\n2+2 = 4.\n",
        "\n\nThe answer is 4.",
        False,
    ),
    (
        "llama.cpp deepseek-legacy",
        _chat({"content": "<think>2+2 = 4.</think>The answer is 4.", "reasoning_content": "2+2 = 4."}),
        "2+2 = 4.",
        "The answer is 4.",
        False,
    ),
    (
        "template opened the tag (Qwen3)",
        _chat({"content": "2+2 = 4.\n</think>\n\nThe answer is 4."}),
        "2+2 = 4.\n",
        "\n\nThe answer is 4.",
        False,
    ),
    (
        "vLLM reasoning parser",
        _chat({"content": "The answer is 4.", "reasoning": "2+2 = 4."}),
        "2+2 = 4.",
        "The answer is 4.",
        False,
    ),
    (
        "vLLM, cut in the reasoning",
        _chat({"content": None, "reasoning": "2+2 is, let me see"}, "length"),
        "2+2 is, let me see",
        "",
        True,
    ),
    (
        "SGLang reasoning parser",
        _chat({"content": "The answer is 4.", "reasoning_content": "2+2 = 4."}),
        "2+2 = 4.",
        "The answer is 4.",
        False,
    ),
    (
        "llama.cpp inline, cut in the reasoning",
        _chat({"content": "<think>2+2 is, let me"}, "length"),
        "2+2 is, let me",
        "",
        True,
    ),
    (
        "completions API, inline",
        {"choices": [{"text": "<think>2+2 = 4.</think> 4", "finish_reason": "stop"}]},
        "2+2 = 4.",
        " 4",
        False,
    ),
    ("no reasoning at all", _chat({"content": "The answer is 4."}), None, None, False),
]


@pytest.mark.parametrize(("fmt", "response", "reasoning", "answer", "cut"), FORMATS, ids=[f[0] for f in FORMATS])
def test_reasoning_is_split_from_the_answer_in_every_server_format(
    fmt: str, response: dict[str, Any], reasoning: str | None, answer: str | None, cut: bool
) -> None:
    c = completion_from_chat(response)
    assert (c.reasoning, c.answer, c.reasoning_cut) == (reasoning, answer, cut)
    assert c.answer_text == (answer if answer is not None else c.text)
    assert c.truncated_in_reasoning == (cut and c.truncated)
    if reasoning is not None:  # everything generated stays in the text, reasoning first
        assert reasoning.strip() in c.text and c.text.index(reasoning.strip()) < len(c.text) - len(answer or "")


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_streamed_reasoning_deltas_merge_like_a_single_response(key: str) -> None:
    chunks = [
        {"choices": [{"delta": {key: "2+2"}}]},
        {"choices": [{"delta": {key: " = 4."}}]},
        {"choices": [{"delta": {"content": "Four."}, "finish_reason": "stop"}]},
    ]
    c = completion_from_chat(merge_chunks(chunks))
    assert (c.reasoning, c.answer, c.text) == ("2+2 = 4.", "Four.", "2+2 = 4.Four.")


def _run(config: Path, **kw: Any):
    return asyncio.run(execute(plan_run(load_config(config), "base", "echo", **kw)))


@pytest.mark.parametrize("think", ["inline", "reasoning_content", "reasoning"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_thinking_server_is_stored_split_and_graded_on_its_answer_only(
    think: str, stream: bool, tmp_path: Path, fake_server: FakeServer
) -> None:
    fake_server.state.think = think
    config = make_project(tmp_path, fake_server.base_url, target_extra="stream = true" if stream else "")
    store = open_run(_run(config).folder)
    first = store.results()["q0000"].completion
    # every generated token is kept for the diff, the reasoning's included
    assert len(first.tokens) == len(THINKING) + 12
    assert first.tokens.ids[: len(THINKING)].tolist() == [tid for tid, _ in THINKING]
    assert first.reasoning is not None and "#### 999" in first.reasoning
    assert first.answer is not None and "####" not in first.answer and first.answer.startswith(" 42 w")
    assert not first.reasoning_cut
    # the reasoning's decoy '#### 999' is not the answer: the grader read the answer text only (its one number)
    assert {g.extracted for g in grade_run(store)} == {"42"}


def test_a_response_cut_in_the_reasoning_is_truncated_and_flagged_apart(
    tmp_path: Path, fake_server: FakeServer
) -> None:
    fake_server.state.think = "reasoning_content"
    config = make_project(tmp_path, fake_server.base_url)
    cut = open_run(_run(config, max_tokens=4).folder)
    frame = cut.frame()
    assert frame["truncated"].all() and frame["truncated_in_reasoning"].all()
    record = cut.results()["q0001"].completion
    assert record.answer == "" and record.reasoning == " Maybe #### 999" and len(record.tokens) == 4
    answered = open_run(_run(config, max_tokens=len(THINKING) + 3).folder)
    assert answered.frame()["truncated"].all() and not answered.frame()["truncated_in_reasoning"].any()
    # the comparison (and so the report) counts them apart from outputs that were cut while answering
    counts = [truncation("t", run.results()) for run in (answered, cut)]
    assert [(t.truncated, t.in_reasoning) for t in counts] == [(10, 0), (10, 10)]


def test_stores_written_before_the_split_still_read(tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.state.think = "inline"
    folder = _run(make_project(tmp_path, fake_server.base_url)).folder
    before = open_run(folder).results()
    with sqlite3.connect(folder / "records.sqlite") as conn:  # the results table as the first store schema had it
        for column in ("reasoning", "answer", "reasoning_cut"):
            conn.execute(f"ALTER TABLE results DROP COLUMN {column}")
    old = open_run(folder).results()
    assert sorted(old) == sorted(before)
    c = old["q0002"].completion
    assert c.reasoning is None and c.answer is None and c.answer_text == c.text == before["q0002"].completion.text
    assert np.array_equal(c.tokens.ids, before["q0002"].completion.tokens.ids)
