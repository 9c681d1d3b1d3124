"""The speed run without a real engine: figures from known timings, and the command end to end on the fake server."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from fake_server import FakeServer, Fault
from projects import ECHO_TASK

from evalsuite.cli import main
from evalsuite.speedrun import run as run_module
from evalsuite.speedrun.analyze import analyze
from evalsuite.speedrun.client import Measurement
from evalsuite.speedrun.report import render_html, render_markdown
from evalsuite.speedrun.workload import cap_lengths


def _m(
    arm: str,
    workload: str,
    conc: int,
    rep: int,
    slot: int,
    itl: float,
    *,
    n: int = 65,
    ttft: float = 0.05,
    start: float = 0.0,
    drafted: tuple[float, float] | None = None,
) -> Measurement:
    m = Measurement(
        arm,
        workload,
        conc,
        rep,
        slot,
        prompt_tokens=int(workload[3:]) if workload.startswith("in-") else 30,
        output_tokens=n,
        ttft_s=ttft,
        last_token_s=ttft + itl * (n - 1),
        latency_s=ttft + itl * (n - 1) + 0.001,
        chunks=n,
        gaps_s=[itl] * (n - 1),
        started_at=start,
    )
    m.timings = {"predicted_n": float(n), "predicted_ms": itl * (n - 1) * 1000 * 1.002}
    if drafted:
        m.timings["draft_n"], m.timings["draft_n_accepted"] = drafted
    return m


def _record(stall: bool = True) -> list[Measurement]:
    rng = np.random.default_rng(0)
    out: list[Measurement] = []
    t = 0.0
    for rep in range(6):
        for length, base_itl, cand_itl in ((128, 0.010, 0.005), (1024, 0.012, 0.008)):
            jitter = math.exp(rng.normal(0, 0.02))
            out.append(_m("baseline", f"in-{length}", 1, rep, 0, base_itl * jitter, start=t))
            c_itl = cand_itl * jitter * (40 if stall and rep == 3 and length == 128 else 1)
            out.append(_m("candidate", f"in-{length}", 1, rep, 0, c_itl, start=t + 1, drafted=(80.0, 60.0)))
            t += 2
        for slot in range(2):  # concurrency 2 at 1024: both slots start together
            out.append(_m("baseline", "in-1024", 2, rep, slot, 0.015, start=t))
            out.append(_m("candidate", "in-1024", 2, rep, slot, 0.012, start=t + 2, drafted=(80.0, 60.0)))
        t += 4
    return out


def _speed_args(config: Path, out: Path, **options: str) -> list[str]:
    """`evalsuite speed spec` on a small grid: one 32-token length, 2 reps, no warm-up, 8 output tokens."""
    grid = {"lengths": "32", "reps": "2", "concurrency": "1", "warmup": "0", "task-prompts": "1", "output-tokens": "8"}
    grid.update({k.replace("_", "-"): v for k, v in options.items()})
    flags = [part for name, value in grid.items() for part in (f"--{name}", value)]
    return ["speed", "spec", "--config", str(config), *flags, "--out", str(out), "-q"]


def test_figures_speedups_and_outliers_from_known_timings() -> None:
    summary = analyze({"sweep_length_run": 1024}, {}, [], _record())
    speed = {(s["workload"], s["concurrency"]): s for s in summary["speedups"]}
    fast = speed[("in-128", 1)]["decode"]
    assert fast["n"] == 5 and fast["geometric_mean"] == pytest.approx(2.0, rel=1e-6)  # the stalled pair is left out
    assert speed[("in-128", 1)]["excluded"] == 1
    assert speed[("in-1024", 1)]["decode"]["geometric_mean"] == pytest.approx(1.5, rel=1e-6)
    assert speed[("in-1024", 2)]["decode"]["geometric_mean"] == pytest.approx(1.25, rel=1e-6)
    assert [(o["arm"], o["workload"], o["rep"]) for o in summary["outliers"]] == [("candidate", "in-128", 3)]
    cells = {(c["workload"], c["concurrency"], c["arm"]): c for c in summary["cells"]}
    base = cells[("in-128", 1, "baseline")]
    assert base["tokens_per_s"] == pytest.approx(100, rel=0.05)  # 1 / ITL: (n - 1) tokens over last - first
    assert base["itl_s"]["p50"] == pytest.approx(0.010, rel=0.05) and base["ttft_s"]["p90"] == pytest.approx(0.05)
    assert base["client_over_engine"] == pytest.approx(1.002, rel=1e-4)
    cand = cells[("in-128", 1, "candidate")]
    assert cand["acceptance"] == pytest.approx(0.75) and cand["outliers"] == 1
    assert cand["mean_accepted_length"] == pytest.approx(5 * 65 / (5 * 65 - 5 * 60))
    two = cells[("in-1024", 2, "baseline")]
    assert two["system_tokens_per_s"] == pytest.approx(2 * 65 / (0.05 + 0.015 * 64 + 0.001), rel=1e-6)
    json.dumps(summary, allow_nan=False)  # valid JSON: no NaN anywhere


def test_reports_show_the_plots_and_the_same_numbers() -> None:
    summary = analyze(
        {
            "sweep_length_run": 1024,
            "warmup": 2,
            "reps": 6,
            "output_tokens": 64,
            "lengths_run": [128, 1024],
            "concurrency_run": [1, 2],
        },
        {
            "baseline": {"target": "b", "dialect": "llamacpp", "model": "m"},
            "candidate": {"target": "c", "dialect": "llamacpp", "model": "m"},
        },
        ["a note"],
        _record(),
    )
    html, md = render_html(summary), render_markdown(summary)
    assert 'data-plot="length"' in html and 'data-plot="concurrency"' in html
    assert "2.00x" in md and "2.00x" in html and "1.25x" in md
    assert "candidate in-128 c=1 rep 3" in md and "Note: a note." in md
    assert "(output tokens - 1)" in md


def test_session_turns_get_their_own_rows_plot_and_parting() -> None:
    ms = []
    for rep in range(3):
        for turn, (context, base_itl, cand_itl) in enumerate(((200, 0.010, 0.008), (400, 0.012, 0.006))):
            base = _m("baseline", f"turn-{turn + 1}", 1, rep, 0, base_itl)
            cand = _m("candidate", f"turn-{turn + 1}", 1, rep, 0, cand_itl, drafted=(40.0, 30.0))
            base.prompt_tokens = cand.prompt_tokens = context
            base.text = cand.text = f"answer {turn}"
            if turn == 1 and rep == 2:
                cand.text = "answer x"
            ms += [base, cand]
    plan = {
        "sweep_length_run": 1024,
        "warmup": 1,
        "reps": 3,
        "output_tokens": 64,
        "lengths_run": [],
        "concurrency_run": [1],
    }
    plan["session"] = {"name": "mini", "source": "mini.json", "turns": 2}
    servers = {r: {"target": r, "dialect": "llamacpp", "model": "m"} for r in ("baseline", "candidate")}
    summary = analyze(plan, servers, [], ms)
    speed = {s["workload"]: s for s in summary["speedups"]}
    assert speed["turn-1"]["decode"]["geometric_mean"] == pytest.approx(1.25) and speed["turn-2"]["input_tokens"] == 400
    assert speed["turn-2"]["decode"]["geometric_mean"] == pytest.approx(2.0)
    assert summary["overall"]["decode"]["n"] == 6 and summary["overall"]["acceptance"] == pytest.approx(0.75)
    assert [(p["turn"], p["identical_turns"]) for p in summary["session"]["parting"]] == [(None, 2), (None, 2), (2, 1)]
    assert summary["session"]["parting"][2]["offset"] == len("answer ")
    md, html = render_markdown(summary), render_html(summary)
    assert "| 2 | 400 |" in md and "2.00x" in md and "at turn 2 the answers part at character 7" in md
    assert 'data-plot="session"' in html


def test_lengths_are_capped_at_the_context() -> None:
    assert cap_lengths([128, 1024, 4096, 16384], 4096, 128) == (
        [128, 1024, 3960],
        "input lengths 4096, 16384 do not fit the server's context of 4096 tokens per slot "
        "with 128 output tokens; measured up to 3960 instead",
    )
    assert cap_lengths([512, 128], None, 64) == ([128, 512], None)


def test_speed_command_end_to_end_on_a_scripted_server(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "speed"
    args = _speed_args(project, out, lengths="32,64", reps="3", concurrency="1,2", warmup="1", task_prompts="2")
    assert main(args) == 0
    assert capsys.readouterr().out.strip().endswith(str(out))
    summary = json.loads((out / "speed.json").read_text())
    assert [(s["workload"], s["concurrency"]) for s in summary["speedups"]] == [
        ("in-32", 1),
        ("in-64", 1),
        ("tasks", 1),
    ]
    assert any("concurrency 2 skipped" in n for n in summary["notes"])  # the fake server has one slot
    lines = (out / "measurements.jsonl").read_text().splitlines()
    arms = [json.loads(line)["arm"] for line in lines if json.loads(line)["arm"] != "warmup"]
    assert arms.count("baseline") == arms.count("candidate") == 3 * 2 + 2
    assert (out / "report.html").exists() and (out / "report.md").exists()


def test_failed_requests_exit_3_and_are_listed(
    project: Path, fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "speed"
    planned = run_module.plan_steps

    async def plan_then_fail(*args, **kwargs):  # type: ignore[no-untyped-def]
        steps = await planned(*args, **kwargs)
        fake_server.state.faults = [Fault("500", times=2)]  # the first measured step fails on both arms
        return steps

    monkeypatch.setattr(run_module, "plan_steps", plan_then_fail)
    assert main(_speed_args(project, out)) == 3
    summary = json.loads((out / "speed.json").read_text())
    assert [(f["arm"], f["workload"], f["rep"]) for f in summary["failed"]] == [
        ("baseline", "in-32", 0),
        ("candidate", "in-32", 0),
    ]
    assert "HTTP 500" in summary["failed"][0]["error"]
    assert summary["speedups"][0]["decode"]["n"] + summary["speedups"][0]["latency"]["n"] > 0  # rep 1 still counts


def test_a_refusing_endpoint_exits_3_before_measuring(
    project: Path, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_server.state.faults = [Fault("400", times=-1)]
    assert main(["speed", "spec", "--config", str(project), "--out", str(tmp_path / "s"), "-q"]) == 3
    assert "failed the first speed request: HTTP 400" in capsys.readouterr().err


def test_bad_options_exit_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["speed", "spec", "--config", str(project), "--reps", "0"]) == 2
    assert "--reps must be at least 1" in capsys.readouterr().err
    assert main(["speed", "base", "--config", str(project)]) == 2
    assert "has no baseline" in capsys.readouterr().err


def test_vllm_acceptance_comes_from_metrics_deltas_around_each_step(tmp_path: Path, fake_server: FakeServer) -> None:
    config = tmp_path / "evalsuite.toml"
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "echo.yaml").write_text(ECHO_TASK)
    (tmp_path / "data.jsonl").write_text(
        "".join(
            json.dumps({"qid": f"q{i}", "question": f"what is {i}?", "answer": "1", "group": "a"}) + "\n"
            for i in range(3)
        )
    )
    config.write_text(
        f'[defaults]\ndata = "local"\ntasks = ["echo"]\n\n[targets.base]\nbase_url = "{fake_server.base_url}"\n'
        f'engine = "vllm"\n\n[targets.spec]\nbase_url = "{fake_server.base_url}"\nengine = "vllm"\n'
        'baseline = "base"\n'
    )
    out = tmp_path / "speed"
    assert main(_speed_args(config, out, task_prompts="0")) == 0
    cells = json.loads((out / "speed.json").read_text())["cells"]
    # the scripted /metrics adds 4 drafts and 6 accepted tokens per request: tau = 1 + 6 / 4
    assert all(c["mean_accepted_length"] == pytest.approx(2.5) for c in cells)
    assert all(c["acceptance_source"] == "vLLM /metrics deltas" for c in cells)


def test_rig_command_line_gets_the_slots_and_context_to_match() -> None:
    from evalsuite.speedrun.rigslots import with_slots

    args = ["llama-server", "--model", "t.gguf", "--parallel", "1", "--ctx-size", "4096", "--threads", "2"]
    assert with_slots(args, 4) == [
        "llama-server",
        "--model",
        "t.gguf",
        "--parallel",
        "4",
        "--ctx-size",
        "16384",
        "--threads",
        "2",
    ]
