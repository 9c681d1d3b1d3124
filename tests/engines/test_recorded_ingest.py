"""A run of long answers made of a real server's tokens: what is stored is what the server sent.

The scripted server answers with the token entries of the H200 llama-server recordings
(`fake_server.py --recorded`): a 32,000-token vocabulary's strings, multi-byte and byte-fallback
tokens, full-precision logprobs and ids spread over the vocabulary, as the bench's recorded rows
send them.  Each answer is longer than any one recorded answer and starts where its prompt says, so
it runs across answers and, for some prompts, past the recording's end back to its start.  Read
back from the run store, every id, string, byte sequence and alternative must be the one sent,
streamed and not.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_server import FakeServer, FakeState, completion_body, load_recording
from projects import make_project, recordings_dir

from evalsuite.config import load_config
from evalsuite.engines import make_engine
from evalsuite.runner import execute, plan_run

RECORDING = recordings_dir() / "base_f16.json.gz"

pytestmark = pytest.mark.skipif(not RECORDING.is_file(), reason=f"{RECORDING} is absent")


@pytest.fixture(scope="module")
def recorded_server() -> Iterator[FakeServer]:
    entries, vocab, model = load_recording(RECORDING)
    server = FakeServer(FakeState(tokens=len(entries) + 100, recorded=entries, n_vocab=vocab, model=model))
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_real_tokens_are_stored_as_the_server_sent_them(
    recorded_server: FakeServer, tmp_path: Path, stream: bool
) -> None:
    extra = f'concurrency = 2\napi = "chat"\nstream = {str(stream).lower()}'
    config = load_config(
        make_project(tmp_path, recorded_server.base_url, n=3, target_extra=extra, defaults_extra="top_logprobs = 5")
    )
    tokens = recorded_server.state.tokens
    plan = plan_run(config, "base", "echo", max_tokens=tokens)
    plan.runs_dir = tmp_path / "runs"
    outcome = asyncio.run(execute(plan))
    assert outcome.recorded == 3
    results = outcome.store.results()
    engine = make_engine(plan.target)
    for sample in plan.samples:
        answer = completion_body(recorded_server.state, engine.request_body(sample, plan.params))["choices"][0]
        sent = answer["logprobs"]["content"]  # what the server sends for the request the run made
        assert len(sent) == tokens
        trace = results[sample.id].completion.tokens
        assert trace is not None
        assert trace.ids.tolist() == [e["id"] for e in sent]
        assert trace.pieces == [e["token"] for e in sent]
        assert trace.raw == [bytes(e["bytes"]) for e in sent]
        assert trace.top_ids.tolist() == [[a["id"] for a in e["top_logprobs"]] for e in sent]
        assert trace.top_pieces == [[a["token"] for a in e["top_logprobs"]] for e in sent]
        assert all(
            math.isclose(got, e["logprob"], rel_tol=1e-6) for got, e in zip(trace.logprobs.tolist(), sent, strict=True)
        )
        assert all(
            math.isclose(got, a["logprob"], rel_tol=1e-6, abs_tol=1e-6)
            for row, e in zip(trace.top_logprobs.tolist(), sent, strict=True)
            for got, a in zip(row, e["top_logprobs"], strict=True)
        )
        assert results[sample.id].completion.text == answer["message"]["content"]
    outcome.store.close()
