"""Draw runs: one stored sample per (prompt, seed), resumable, fingerprinted; stored draws re-tested and reported."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_server import FakeServer
from projects import make_project
from sampling_sim import ToyModel

from evalsuite.cli import main
from evalsuite.config import SamplingDefaults, load_config
from evalsuite.errors import ConfigError, NotComparableError
from evalsuite.records import Completion, GenerationParams, Sample, SampleResult, TokenTrace
from evalsuite.report.sampling import write_sampling_report
from evalsuite.sampling.plan import (
    TASK_SUFFIX,
    DrawSettings,
    SeededDraws,
    draw_params,
    draw_samples,
    draw_seed,
    resolve_settings,
)
from evalsuite.sampling.run import judge_arms, load_arm
from evalsuite.sampling.verdict import JudgeSettings
from evalsuite.serialize import to_jsonable
from evalsuite.store import RunStore


class Recorder:
    """An engine double that records the seed of every request."""

    def __init__(self) -> None:
        self.seeds: list[int] = []

    async def generate(self, sample: Sample, params: GenerationParams) -> Completion:
        self.seeds.append(params.seed)
        return Completion("x", "stop")

    async def aclose(self) -> None:
        pass


def test_each_draw_goes_out_with_its_own_seed() -> None:
    prompt = Sample("q1", "echo", ({"role": "user", "content": "hi"},), None)
    draws = draw_samples([prompt], 50, stream=7)
    assert [d.id for d in draws[:2]] == ["q1#0", "q1#1"]
    engine = Recorder()
    wrapped = SeededDraws(engine)  # type: ignore[arg-type]
    for d in draws:
        asyncio.run(wrapped.generate(d, GenerationParams(seed=7)))
    assert engine.seeds == [draw_seed(7, "q1", k) for k in range(50)]
    assert len(set(engine.seeds)) == 50 and all(0 <= s < 2**31 - 1 for s in engine.seeds)
    assert draw_seed(8, "q1", 0) != draw_seed(7, "q1", 0) and draw_seed(7, "q2", 0) != draw_seed(7, "q1", 0)
    with pytest.raises(ConfigError, match="not a draw"):
        asyncio.run(wrapped.generate(prompt, GenerationParams()))


def test_draw_params_carry_the_sampling_settings_and_the_stream() -> None:
    p = draw_params(GenerationParams(), DrawSettings(temperature=0.8, top_p=0.9, top_k=20, max_tokens=12), stream=43)
    assert (p.temperature, p.top_p, p.top_k, p.max_tokens, p.seed, p.top_logprobs) == (0.8, 0.9, 20, 12, 43, 1)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"temperature": 0.0}, "--temperature must be above 0"),
        ({"top_k": 1}, "greedy"),
        ({"draws": 1}, "--draws"),
        ({"top_p": 1.5}, "--top-p"),
        ({"max_tokens": 0}, "--tokens"),
    ],
)
def test_bad_settings_are_refused_with_a_sentence(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        DrawSettings(**kwargs)


def _runs(project: Path) -> list[Path]:
    return sorted(p.parent for p in (project.parent / "runs").glob(f"*/echo{TASK_SUFFIX}/*/manifest.json"))


def test_sample_test_draws_resumes_extends_and_fingerprints_the_settings(
    project: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    def cli(draws: int = 5, *more: str) -> list[str]:
        return [
            "sample-test",
            "spec",
            "--config",
            str(project),
            "--task",
            "echo",
            "--prompts",
            "2",
            "--draws",
            str(draws),
            "--tokens",
            "4",
            "-q",
            "--no-report",
            *more,
        ]

    args = cli()
    assert main(args) == 1  # the scripted server answers the same for every seed: nothing to test
    assert "TOO FEW DRAWS" in capsys.readouterr().out
    assert fake_server.state.total == 20  # 2 prompts x 5 draws x 2 arms
    runs = _runs(project)
    assert len(runs) == 2
    manifests = [json.loads((r / "manifest.json").read_text()) for r in runs]
    assert sorted(m["fingerprint_fields"]["params"]["seed"] for m in manifests) == [42, 43]
    assert {m["fingerprint_fields"]["params"]["temperature"] for m in manifests} == {0.7}
    store = RunStore(runs[0], manifests[0])
    assert len(store) == 10 and {s.metadata["draw"] for s in store.samples().values()} == set(range(5))
    store.close()
    assert main(args) == 1 and fake_server.state.total == 20  # resumed: nothing asked again
    assert main(cli(8)) == 1
    assert fake_server.state.total == 32 and _runs(project) == runs  # more draws extend the same runs
    assert main(cli(5, "--temperature", "0.9")) == 1
    assert len(_runs(project)) == 4  # other settings: other runs


def test_sample_test_input_errors_exit_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample-test", "spec", "--config", str(project), "--temperature", "0", "-q"]) == 2
    assert "greedy decoding never exercises sampling" in capsys.readouterr().err
    assert main(["sample-test", "base", "--config", str(project), "--task", "echo", "-q"]) == 2
    assert "no baseline" in capsys.readouterr().err
    assert main(["sample-test", "spec", "--config", str(project), "--alpha", "2", "-q"]) == 2
    assert "alpha" in capsys.readouterr().err


def _store(
    folder: Path,
    model: ToyModel,
    n: int,
    stream: int,
    params: dict[str, Any] | None = None,
    *,
    sessions: Sequence[dict[str, Any]] = (),
    timings: dict[str, float] | None = None,
) -> Path:
    """A draw run written the way sample-test writes one, from the simulated model (`sessions`: their info)."""
    rng = np.random.default_rng(stream)
    fields = {
        "task": "toy" + TASK_SUFFIX,
        "prompt_template": "t",
        "dataset": {"name": "toy"},
        "params": {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_tokens": 5, "seed": stream, **(params or {})},
    }
    manifest = {
        "fingerprint": f"fp{stream}{folder.name}",
        "fingerprint_fields": fields,
        "target": folder.name,
        "task": "toy" + TASK_SUFFIX,
    }
    store = RunStore.create(folder, manifest)
    prompt = Sample(model.prompt, "toy", ({"role": "user", "content": f"prompt {model.prompt}"},), None)
    samples = draw_samples([prompt], n, stream)
    store.write_samples(samples)
    writer = store.writer()
    for sample, draw in zip(samples, model.draws(n, 5, rng)):
        ids = np.array(draw.ids, np.int64)
        trace = TokenTrace(
            ids,
            [f"t{i}" for i in draw.ids],
            [None] * len(ids),
            np.zeros(len(ids), np.float32),
            np.full((len(ids), 1), -1),
            np.full((len(ids), 1), np.nan, np.float32),
            [[] for _ in ids],
        )
        completion = Completion("", "stop" if draw.ended else "length", trace, timings=timings or {})
        writer.put(SampleResult(sample.id, "toy" + TASK_SUFFIX, {}, completion))
    writer.close()
    for info in sessions:
        store.record_session(0.0, n, n, "complete", info)
    store.close()
    return folder


def test_stored_draws_are_retested_and_reported_with_the_differing_nodes(tmp_path: Path) -> None:
    base = ToyModel("q0")
    first = int(np.argmax(np.diff([0.0, *base.probs(())])[:-1]))
    lossy = ToyModel("q0", tilt={(first,): (3, 0.5)})
    a = _store(tmp_path / "base", base, 300, 42)
    b = _store(tmp_path / "lossy", lossy, 300, 43)
    test = judge_arms(load_arm([a]), load_arm([b]), JudgeSettings())
    assert test.verdict.outcome == "DIFFERENT"
    strongest = min(test.verdict.differing, key=lambda n: n.p_adjusted)
    assert strongest.prefix == (first,) and test.piece(strongest.over_represented) == "t3"
    paths = write_sampling_report(test, tmp_path, created=0.0)
    md, html = paths.markdown.read_text(), paths.html.read_text()
    assert "DIFFERENT (here)" in md and f"`t{first}`" in md and "Holm" in md
    assert html.count("<svg") == 2 and 'data-outcome="DIFFERENT"' in html
    data = json.loads(paths.json.read_text())
    assert data["outcome"] == "DIFFERENT" and data["nodes"][0]["tokens"]
    loaded = load_arm([a], draws=100)
    assert len(loaded.draws) == 100


def test_the_sampling_json_is_standard_json_with_null_for_undefined_numbers(tmp_path: Path) -> None:
    a = _store(tmp_path / "base", ToyModel("q0"), 200, 42)
    test = judge_arms(load_arm([a]), load_arm([_store(tmp_path / "again", ToyModel("q0"), 200, 43)]), JudgeSettings())
    node = test.verdict.nodes[0]
    test.verdict.nodes[0] = replace(node, detectable_tv=float("inf"), p_adjusted=float("nan"))
    test.candidate.drafted, test.candidate.accepted = 40, 30
    text = write_sampling_report(test, tmp_path, created=0.0).json.read_text()
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert (data["nodes"][0]["detectable_tv"], data["nodes"][0]["p_adjusted"]) == (None, None)
    assert data["candidate"]["drafting_counted_by"] == "responses"
    assert data["settings"] == {**vars(JudgeSettings())}  # the judge settings as a plain table
    assert data["candidate"]["acceptance"] == 0.75 and data["candidate"]["runs"] == [str(tmp_path / "again")]
    assert data["nodes"][0]["prefix"] == list(node.prefix) and data["nodes"][0]["context"] is not None


def test_arms_drawn_with_other_settings_are_not_compared(tmp_path: Path) -> None:
    a = _store(tmp_path / "a", ToyModel("q0"), 30, 42)
    b = _store(tmp_path / "b", ToyModel("q0"), 30, 43, {"temperature": 0.5})
    with pytest.raises(NotComparableError, match="temperature"):
        judge_arms(load_arm([a]), load_arm([b]), JudgeSettings())
    with pytest.raises(NotComparableError, match="same stored runs"):
        judge_arms(load_arm([a]), load_arm([a]), JudgeSettings())


def test_help_explains_the_verdicts_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["sample-test", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and "examples:" in out and "TOO FEW DRAWS" in out and "--baseline baseline" in out


def test_stored_draws_are_retested_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ToyModel("q0")
    a = _store(tmp_path / "base", base, 200, 42)
    b = _store(tmp_path / "same", base, 200, 43)
    out = tmp_path / "verdict.json"
    code = main(["sample-test", "--from-runs", str(a), str(b), "--json", str(out), "--max-tv", "0.5", "--no-report"])
    assert code == 0 and capsys.readouterr().out.startswith("SAME DISTRIBUTION as far as 200 draws")
    data = json.loads(out.read_text())
    assert data["outcome"] == "SAME" and data["correction"] == "holm (step-down Bonferroni)" and data["family"] > 0
    assert main(["sample-test", "--from-runs", str(a), str(b), "--max-tv", "0.01", "--no-report"]) == 1
    assert "TOO FEW DRAWS" in capsys.readouterr().out
    assert main(["sample-test", "--from-runs", str(a), str(tmp_path / "nowhere"), "--no-report"]) == 2


def test_the_baselines_sampling_table_supplies_what_the_flags_leave_open(
    tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    table = 'sampling = { tasks = ["echo"], prompts = 1, draws = 3, tokens = 2, temperature = 0.9, top_k = 0 }'
    config = make_project(tmp_path, fake_server.base_url, target_extra=table)
    assert main(["sample-test", "spec", "--config", str(config), "--no-report"]) == 1
    out = capsys.readouterr()
    assert "[targets.base.sampling]" in out.err and "tasks echo, 1 prompts each, 3 draws of 2 tokens" in out.err
    assert fake_server.state.total == 6  # 1 prompt x 3 draws x 2 arms, from the table
    fields = [json.loads((r / "manifest.json").read_text())["fingerprint_fields"]["params"] for r in _runs(config)]
    assert [(f["temperature"], f["top_k"], f["max_tokens"]) for f in fields] == [(0.9, 0, 2)] * 2
    assert main(["sample-test", "spec", "--config", str(config), "--draws", "4", "--no-report", "-q"]) == 1
    assert fake_server.state.total == 8  # a flag overrides one key; the rest still come from the table
    assert main(["sample-test", "spec", "--config", str(config), "--draws", "4", "--no-report"]) == 1
    assert "([targets.base.sampling], flags --draws)" in capsys.readouterr().err


def test_a_bad_sampling_table_is_refused_naming_the_key(tmp_path: Path) -> None:
    config = make_project(tmp_path, "http://127.0.0.1:9/v1", target_extra="sampling = { top_k = 1 }")
    with pytest.raises(ConfigError, match=r"targets\.base\.sampling\.top_k.*greedy"):
        load_config(config)
    config.write_text(config.read_text().replace("top_k = 1", "temprature = 0.9"))
    with pytest.raises(ConfigError, match="temprature"):
        load_config(config)


def test_settings_resolve_flags_then_target_then_baseline_then_built_in(tmp_path: Path) -> None:
    config = load_config(
        make_project(tmp_path, "http://127.0.0.1:9/v1", target_extra='sampling = { tasks = ["echo"], draws = 9 }')
    )
    from_baseline = resolve_settings(config, "spec", "base", {"draws": None, "top_k": 0})
    assert (from_baseline.settings.draws, from_baseline.settings.top_k, from_baseline.tasks) == (9, 0, ["echo"])
    assert from_baseline.source == "targets.base.sampling"
    assert from_baseline.settings.temperature == DrawSettings().temperature  # not in the table: built-in
    built_in = resolve_settings(config, "spec", None, {})
    assert (built_in.source, built_in.settings, built_in.tasks) == (None, DrawSettings(), ["gsm8k"])
    config.targets["spec"].sampling = SamplingDefaults(draws=5, tokens=32)
    layered = resolve_settings(config, "spec", "base", {"tokens": 16})
    assert (layered.settings.draws, layered.settings.max_tokens, layered.tasks) == (5, 16, ["echo"])  # key by key
    assert layered.source == "targets.spec.sampling + targets.base.sampling"
    assert resolve_settings(config, "spec", "spec", {}).source == "targets.spec.sampling"  # self-check: one table


def test_eval_with_sampling_folds_the_section_into_its_report(
    tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    table = 'sampling = { tasks = ["echo"], prompts = 1, draws = 3, tokens = 2 }'
    config = make_project(tmp_path, fake_server.base_url, n=2, target_extra=table)
    assert main(["eval", "spec", "--config", str(config), "-q"]) == 0  # the greedy comparison alone passes
    assert main(["eval", "spec", "--config", str(config), "--sampling", "-q"]) == 1  # one answer per seed: TOO FEW
    out = capsys.readouterr().out
    assert "TOO FEW DRAWS" in out
    (report,) = [
        p for p in (tmp_path / "reports" / "spec").glob("*/report.md") if (p.parent / "sampling.json").exists()
    ]
    text = report.read_text()
    assert "## Lossless under sampling: `spec` vs `base`" in text and "[targets.base.sampling]" in text
    assert (report.parent / "sampling.html").exists() and len(_runs(config)) == 2


VLLM_BEFORE = {
    "vllm:spec_decode_num_drafts": 10.0,
    "vllm:spec_decode_num_draft_tokens": 40.0,
    "vllm:spec_decode_num_accepted_tokens": 25.0,
}
VLLM_AFTER = {
    "vllm:spec_decode_num_drafts": 60.0,
    "vllm:spec_decode_num_draft_tokens": 240.0,
    "vllm:spec_decode_num_accepted_tokens": 100.0,
}


def test_drafting_counted_by_the_server_reaches_the_verdict_when_requests_report_none(tmp_path: Path) -> None:
    sessions = [
        {"engine_stats_before": VLLM_BEFORE, "engine_stats_after": VLLM_AFTER},
        {"engine_stats_before": VLLM_AFTER, "engine_stats_after": {}},  # interrupted: read nothing after
        {"engine_stats_before": {}, "engine_stats_after": {}},  # resumed with nothing left to draw
    ]
    base = _store(tmp_path / "base", ToyModel("q0"), 60, 42)
    cand = load_arm([_store(tmp_path / "vngram", ToyModel("q0"), 60, 43, sessions=sessions)])
    assert (cand.drafted, cand.accepted, cand.counted) == (200, 75, True)
    test = judge_arms(load_arm([base]), cand, JudgeSettings())
    sentence = "vngram drafted 200 tokens over its draws and accepted 75 (38%) (as the server counted them"
    assert any(note.startswith(sentence) for note in test.verdict.notes), test.verdict.notes
    assert not any("reported no drafted tokens" in note for note in test.verdict.notes)
    assert to_jsonable(test)["candidate"]["drafting_counted_by"] == "server counters"


def test_drafting_each_request_reports_is_not_counted_again_from_the_server(tmp_path: Path) -> None:
    sessions = [{"engine_stats_before": VLLM_BEFORE, "engine_stats_after": VLLM_AFTER}]
    timings = {"draft_n": 3.0, "draft_n_accepted": 2.0, "predicted_n": 5.0}
    cand = load_arm([_store(tmp_path / "cand", ToyModel("q0"), 30, 43, sessions=sessions, timings=timings)])
    assert (cand.drafted, cand.accepted, cand.counted) == (90, 60, False)
    assert cand.speculation() == "cand drafted 90 tokens over its draws and accepted 60 (67%)."
    plain = load_arm([_store(tmp_path / "plain", ToyModel("q0"), 30, 43)])  # no counts anywhere
    assert (plain.drafted, plain.counted, plain.speculation()) == (0, False, None)
    still = [{"engine_stats_before": VLLM_AFTER, "engine_stats_after": VLLM_AFTER}]  # a server that drafted nothing
    idle = load_arm([_store(tmp_path / "idle", ToyModel("q0"), 30, 43, sessions=still)])
    assert (idle.drafted, idle.counted, idle.counted_by) == (0, False, None)
