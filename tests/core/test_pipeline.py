"""The run pipeline end to end against the scripted server: records, retries, fatal errors, resume."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from fake_server import FakeServer, Fault

from evalsuite.config import load_config
from evalsuite.errors import EndpointError
from evalsuite.runner import execute, plan_run
from evalsuite.store import open_run


def _run(config_path: Path, target: str = "base", **kw):
    plan = plan_run(load_config(config_path), target, "echo", **kw)
    return asyncio.run(execute(plan))


def test_run_records_every_sample_with_tokens_and_provenance(project: Path, fake_server: FakeServer) -> None:
    outcome = _run(project)
    store = open_run(outcome.folder)
    results = store.results()
    assert sorted(results) == [f"q{i:04d}" for i in range(10)]
    first = results["q0000"].completion
    assert first.token_level == "ids"
    assert len(first.tokens) == 12 and first.tokens.top_ids.shape == (12, 5)
    # the top-1 alternative is the chosen token, as llama.cpp reports it
    assert np.array_equal(first.tokens.top_ids[:, 0], first.tokens.ids)
    assert first.timings["predicted_n"] == 12
    assert results["q0001"].strata == {"group": "odd"}
    manifest = store.manifest
    assert manifest.fingerprint_fields is not None
    assert manifest.fingerprint_fields.params.max_tokens == 64
    assert manifest.fingerprint_fields.params.temperature == 0.0
    assert manifest.probe.model == "fake-model"
    assert str(manifest.fingerprint_fields.dataset.revision).startswith("sha256:")
    assert fake_server.state.total == 10


def test_request_is_greedy_seeded_and_deterministic_for_llamacpp(project: Path) -> None:
    from evalsuite.engines import make_engine

    config = load_config(project)
    plan = plan_run(config, "base", "echo")
    body = make_engine(config.target("base")).request_body(plan.samples[0], plan.params)
    assert body["temperature"] == 0.0 and body["top_k"] == 1 and body["seed"] == 42
    assert body["cache_prompt"] is False
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}


def test_rerun_asks_nothing_again(project: Path, fake_server: FakeServer) -> None:
    first = _run(project)
    again = _run(project)
    assert again.folder == first.folder
    assert (again.requested, again.skipped) == (0, 10)
    assert fake_server.state.total == 10


def test_changed_parameters_start_a_new_run_and_keep_the_old(project: Path) -> None:
    first = _run(project)
    second = _run(project, max_tokens=32)
    assert second.folder != first.folder
    assert len(open_run(first.folder)) == 10 and len(open_run(second.folder)) == 10


@pytest.mark.parametrize(
    "fault",
    [
        Fault("429", times=2, retry_after=0.01),
        Fault("500", times=2),
        Fault("503", times=1),
        Fault("drop", times=2),
        Fault("malformed", times=1),
        Fault("timeout", times=1, delay_s=3.0),
    ],
    ids=lambda f: f.kind,
)
def test_transient_failures_are_retried_and_nothing_is_lost(
    tmp_path: Path, fake_server: FakeServer, fault: Fault
) -> None:
    from projects import make_project

    config = make_project(tmp_path, fake_server.base_url, target_extra="timeout_s = 1.0")
    fake_server.state.faults = [
        Fault(
            fault.kind, match="Question q0003", times=fault.times, retry_after=fault.retry_after, delay_s=fault.delay_s
        )
    ]
    outcome = _run(config)
    results = open_run(outcome.folder).results()
    assert len(results) == 10
    assert results["q0003"].attempts == fault.times + 1
    assert results["q0002"].attempts == 1


def test_wrong_model_name_stops_the_run_without_scoring(tmp_path: Path, fake_server: FakeServer) -> None:
    from projects import make_project

    config = make_project(tmp_path, fake_server.base_url, target_extra='model = "no-such-model"')
    with pytest.raises(EndpointError, match="HTTP 404.*no-such-model"):
        _run(config)
    assert fake_server.state.total == 1  # a 4xx is not retried


def test_retries_are_bounded(tmp_path: Path, fake_server: FakeServer) -> None:
    from projects import make_project

    config = make_project(tmp_path, fake_server.base_url, target_extra="max_retries = 2")
    fake_server.state.faults = [Fault("500", match="Question q0000", times=-1)]
    with pytest.raises(EndpointError, match="kept failing on sample q0000.*3 attempts"):
        _run(config)
    key = hashlib.sha256(b"You are terse.\nQuestion q0000: what is 0+1?").hexdigest()[:16]
    assert fake_server.state.requests[key] == 3


def test_records_load_into_pandas(project: Path) -> None:
    frame = open_run(_run(project).folder).frame()
    assert len(frame) == 10
    assert {"sample_id", "stratum.group", "completion_tokens", "finish_reason", "latency_s"} <= set(frame.columns)
    assert frame["completion_tokens"].eq(12).all()


def test_concurrency_requests_each_sample_once(tmp_path: Path, fake_server: FakeServer) -> None:
    from projects import make_project

    state = fake_server.state
    state.delay_s = 0.02
    state.hold_after = 0  # every request waits until the client has 8 out at once: its concurrency, met
    config = make_project(tmp_path, fake_server.base_url, n=40, target_extra="concurrency = 8")
    seen = threading.Event()

    def release_at_eight() -> None:
        deadline = time.monotonic() + 120
        while state.hold_after is not None and state.held < 8 and time.monotonic() < deadline:
            time.sleep(0.005)
        if state.held >= 8:
            seen.set()
        state.hold_after = None

    releaser = threading.Thread(target=release_at_eight)
    releaser.start()
    try:
        outcome = _run(config)
    finally:
        state.hold_after = None
        releaser.join()
    assert seen.is_set(), "the client never had 8 requests out at once"
    assert len(open_run(outcome.folder)) == 40
    assert state.total == 40
    assert max(state.requests.values()) == 1
    assert state.peak_in_flight <= 8  # and never more than its concurrency


def test_one_request_at_a_time_by_default(tmp_path: Path, fake_server: FakeServer) -> None:
    from projects import make_project

    fake_server.state.delay_s = 0.02
    _run(make_project(tmp_path, fake_server.base_url, n=10))
    assert fake_server.state.total == 10 and fake_server.state.peak_in_flight == 1


def test_streaming_gives_the_same_record_plus_time_to_first_token(tmp_path: Path, fake_server: FakeServer) -> None:
    from projects import make_project

    plain = open_run(_run(make_project(tmp_path / "a", fake_server.base_url)).folder).results()
    streamed_cfg = make_project(tmp_path / "b", fake_server.base_url, target_extra="stream = true")
    streamed = open_run(_run(streamed_cfg).folder).results()
    for sid, result in plain.items():
        a, b = result.completion, streamed[sid].completion
        assert a.text == b.text and a.finish_reason == b.finish_reason
        assert np.array_equal(a.tokens.ids, b.tokens.ids)
        assert np.allclose(a.tokens.top_logprobs, b.tokens.top_logprobs)
        assert b.usage == a.usage and b.timings == a.timings
        assert b.ttft_s is not None and 0 < b.ttft_s <= b.latency_s


def test_vllm_speculative_counters_are_read_around_the_run(tmp_path: Path, fake_server: FakeServer) -> None:
    from projects import make_project

    config = make_project(tmp_path, fake_server.base_url)
    text = config.read_text().replace('engine = "llamacpp"', 'engine = "vllm"', 1)
    config.write_text(text)
    fake_server.state.total = 5  # counters that were already non-zero before the run
    store = open_run(_run(config).folder)
    (session,) = store.sessions()
    before, after = session["info"]["engine_stats_before"], session["info"]["engine_stats_after"]
    assert before == {"vllm:spec_decode_num_drafts": 20.0, "vllm:spec_decode_num_accepted_tokens": 30.0}
    assert after["vllm:spec_decode_num_drafts"] - before["vllm:spec_decode_num_drafts"] == 40.0
    assert session["recorded"] == 10 and session["outcome"] == "complete"


def test_llamacpp_provenance_and_parallel_slot_warning(project: Path, fake_server: FakeServer) -> None:
    fake_server.state.slots = 4
    outcome = _run(project)
    probe = open_run(outcome.folder).manifest.probe.as_mapping()
    assert probe["build_info"] == "b1-fake" and probe["model_path"] == "/models/fake-model.gguf"
    assert probe["server_params"] == {"speculative.n_max": 16}
    assert any("4 parallel slots" in w and "--parallel 1" in w for w in outcome.warnings)
    # the server build is part of the fingerprint: a rebuilt server starts a new run
    fields = open_run(outcome.folder).manifest.fingerprint_fields
    assert fields is not None and fields.server.build_info == "b1-fake"
