"""The response checks on real bodies: every answer of the five H200 llama-server recordings.

A real answer must pass the schema and the text-against-tokens agreement (the
two checks `Engine.accept` makes before a body may be stored), and the columns
the schema returns must hold exactly what the JSON holds.  The same bodies
with one defect planted must be refused, so the checks are shown to have read
them rather than waved them through.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
from functools import cache
from typing import Any

import pytest
from projects import recordings_dir

from evalsuite.engines.agree import check_agreement
from evalsuite.engines.retry import RequestFailed
from evalsuite.engines.validate import ResponseSchema

NAMES = ("base_f16", "spec_f16_self", "spec_f16_draftq4", "spec_f16_ngram", "synth_f16")


pytestmark = pytest.mark.skipif(
    not all((recordings_dir() / f"{n}.json.gz").exists() for n in NAMES),
    reason=f"recordings not found under {recordings_dir()}",
)


@cache
def _recording(name: str) -> dict[str, Any]:
    with gzip.open(recordings_dir() / f"{name}.json.gz", "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _vocab(data: dict[str, Any]) -> int:
    return next(m["meta"]["n_vocab"] for m in data["models"]["data"] if m.get("meta"))


def _accept(body: dict[str, Any], vocab: int) -> Any:
    """What Engine.accept checks before parsing: the schema, then the text against the tokens it returned."""
    columns = ResponseSchema(chat=True, vocab_size=vocab).check(body)
    choice = body["choices"][0]
    check_agreement(choice["message"]["content"], columns or [], finish_reason=choice["finish_reason"])
    return columns


@pytest.mark.parametrize("name", NAMES)
def test_every_recorded_answer_passes_and_its_columns_are_the_jsons(name: str) -> None:
    data = _recording(name)
    vocab = _vocab(data)
    assert vocab == 32000
    checked = 0
    for entry in data["responses"]:
        body = entry["response"]
        content = body["choices"][0]["logprobs"]["content"]
        columns = _accept(body, vocab)
        assert columns is not None and len(columns) == len(content)
        assert columns.ids == [e["id"] for e in content]
        assert columns.logprobs == [e["logprob"] for e in content]
        assert columns.counts == [len(e.get("top_logprobs") or []) for e in content]
        assert columns.text() == body["choices"][0]["message"]["content"]
        checked += 1
    assert checked == len(data["responses"]) == (48 if name == "base_f16" else 24)  # 24 questions; base twice


def _planted(body: dict[str, Any], defect: str) -> dict[str, Any]:
    bad = copy.deepcopy(body)
    choice = bad["choices"][0]
    content = choice["logprobs"]["content"]
    if defect == "nan logprob":
        content[len(content) // 2]["logprob"] = math.nan
    elif defect == "id beyond the vocabulary":
        content[-1]["id"] = 32000
    elif defect == "alternative id beyond the vocabulary":
        next(e for e in content if e.get("top_logprobs"))["top_logprobs"][-1]["id"] = 32000
    elif defect == "no finish reason":
        del choice["finish_reason"]
    elif defect == "text not its tokens":
        text = choice["message"]["content"]
        choice["message"]["content"] = text[:10] + ("X" if text[10] != "X" else "Y") + text[11:]
    elif defect == "more tokens than usage counts":
        bad["usage"]["completion_tokens"] = len(content) - 2
    return bad


@pytest.mark.parametrize(
    "defect",
    [
        "nan logprob",
        "id beyond the vocabulary",
        "alternative id beyond the vocabulary",
        "no finish reason",
        "text not its tokens",
        "more tokens than usage counts",
    ],
)
def test_a_recorded_answer_with_one_defect_is_refused(defect: str) -> None:
    for name in NAMES:
        data = _recording(name)
        body = data["responses"][0]["response"]
        _accept(body, _vocab(data))  # the body as recorded passes
        with pytest.raises(RequestFailed) as info:
            _accept(_planted(body, defect), _vocab(data))
        assert info.value.retryable, (name, defect, str(info.value))
