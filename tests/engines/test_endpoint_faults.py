"""Endpoint faults end to end: never stored, retried, reported with exit 3 and the server's words, asked again on resume."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_server import FakeServer, Fault
from projects import make_project

from evalsuite.cli import main
from evalsuite.store import open_run

TARGET = "Question q0003"
PROMPT = b"You are terse.\nQuestion q0003: what is 3+1?"


def _fault(kind: str, **kw: Any) -> Fault:
    return Fault(kind, match=TARGET, **kw)


# One fault per class; `words` is what the user must read about it.
FAULTS: dict[str, tuple[Fault, bool, str]] = {
    "empty choice": (_fault("body", body={"choices": [{}]}), False, "choices[0].message"),
    "message is a string": (_fault("patch", patch=[["set", "choices.0.message", "hi"]]), False, "message is 'hi'"),
    "content is a number": (_fault("patch", patch=[["set", "choices.0.message.content", 4]]), False, "content is 4"),
    "choice is a number": (_fault("body", body={"choices": [1]}), False, "choices[0] is 1"),
    "usage is a list": (_fault("patch", patch=[["set", "usage", [3, 4]]]), False, "usage is [3, 4]"),
    "top_logprobs not objects": (
        _fault("patch", patch=[["set", "choices.0.logprobs.content.0.top_logprobs", [1, 2]]]),
        False,
        "top_logprobs[0] is 1",
    ),
    "token id 2**64": (
        _fault("patch", patch=[["set", "choices.0.logprobs.content.4.id", 2**64]]),
        False,
        "content[4].id",
    ),
    "negative token id": (_fault("patch", patch=[["set", "choices.0.logprobs.content.4.id", -7]]), False, "id is -7"),
    "token id beyond the vocabulary": (
        _fault("patch", patch=[["set", "choices.0.logprobs.content.4.id", 4000]]),
        False,
        "vocabulary of 2048",
    ),
    "no finish reason": (_fault("patch", patch=[["set", "choices.0.finish_reason", None]]), False, "finish_reason"),
    "text disagrees with tokens": (
        _fault("patch", patch=[["set", "choices.0.message.content", " w1 w2 w3"]]),
        False,
        "does not match",
    ),
    "error inside a 200": (
        _fault("body", body={"error": {"message": "KV cache exhausted"}}),
        False,
        "KV cache exhausted",
    ),
    "not JSON": (_fault("body", body="<html>bad gateway</html>"), False, "unreadable response"),
    "body is a list": (_fault("body", body=[1, 2]), False, "expected a JSON object"),
    "error event in a stream": (_fault("stream_error", after=3), True, "scripted failure inside the stream"),
    "stream cut short": (_fault("stream_cut", after=4), True, "without [DONE] and without a finish_reason"),
    "stream event not JSON": (_fault("events", events=["{oops", "[DONE]"]), True, "not JSON"),
    "stream text disagrees": (
        _fault("patch", patch=[["set", "choices.0.message.content", "forged"]]),
        True,
        "does not match",
    ),
}


def _requests_for_target(server: FakeServer) -> int:
    return server.state.requests[hashlib.sha256(PROMPT).hexdigest()[:16]]


def _project(tmp_path: Path, server: FakeServer, stream: bool) -> Path:
    extra = "max_retries = 1\n" + ("stream = true\n" if stream else "")
    return make_project(tmp_path, server.base_url, target_extra=extra)


def _run(config: Path) -> int:
    return main(["run", "base", "--config", str(config), "--no-grade", "-q"])


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_a_fault_that_persists_stops_with_exit_3_stores_nothing_and_resume_asks_again(
    name: str, tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fault, stream, words = FAULTS[name]
    fake_server.state.faults = [dataclasses.replace(fault, times=-1)]
    config = _project(tmp_path, fake_server, stream)
    assert _run(config) == 3
    err = capsys.readouterr().err
    assert words in err and "q0003" in err and "Traceback" not in err
    assert _requests_for_target(fake_server) == 2  # asked, then asked once more (max_retries = 1)
    (folder,) = (tmp_path / "runs" / "base" / "echo").iterdir()
    stored = open_run(folder).results()
    assert "q0003" not in stored and sorted(stored) == ["q0000", "q0001", "q0002"]
    # the server recovers: a re-run asks only for what is missing, the faulted sample included
    fake_server.state.faults = []
    before = fake_server.state.total
    assert _run(config) == 0
    assert fake_server.state.total - before == 7
    assert len(open_run(folder).results()) == 10


@pytest.mark.parametrize(
    "name", ["empty choice", "text disagrees with tokens", "error event in a stream", "stream cut short"]
)
def test_a_passing_fault_is_retried_and_the_good_answer_stored(
    name: str, tmp_path: Path, fake_server: FakeServer
) -> None:
    fault, stream, _ = FAULTS[name]
    clean = open_run(_folder_after_run(tmp_path / "clean", fake_server, stream)).results()["q0003"].completion
    fake_server.state.faults = [dataclasses.replace(fault, times=1)]
    result = open_run(_folder_after_run(tmp_path / "faulty", fake_server, stream)).results()["q0003"]
    assert result.attempts == 2
    assert result.completion.text == clean.text and result.completion.finish_reason == clean.finish_reason
    assert np.array_equal(result.completion.tokens.ids, clean.tokens.ids)


def _folder_after_run(folder: Path, server: FakeServer, stream: bool) -> Path:
    config = _project(folder, server, stream)
    assert _run(config) == 0
    (run,) = (folder / "runs" / "base" / "echo").iterdir()
    return run


def test_a_server_that_ignores_stream_and_answers_json_is_read_as_json(tmp_path: Path, fake_server: FakeServer) -> None:
    clean = open_run(_folder_after_run(tmp_path / "clean", fake_server, False)).results()["q0003"].completion
    fake_server.state.faults = [_fault("plain")]
    result = open_run(_folder_after_run(tmp_path / "streamed", fake_server, True)).results()["q0003"]
    assert result.attempts == 1 and result.completion.text == clean.text and result.completion.ttft_s is None
