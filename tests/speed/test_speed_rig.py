"""`evalsuite speed draft` on the real llama-server rig, with a short workload."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from projects import copy_project

from evalsuite.cli import main

TARGETS = """
[targets.baseline]
engine = "llamacpp"
rig = "baseline"

[targets.draft]
engine = "llamacpp"
rig = "draft"
baseline = "baseline"
"""


@pytest.mark.rig
def test_speed_run_on_the_rig(rig_assets, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = copy_project(tmp_path / "project", TARGETS, tasks='["gsm8k", "math500"]')
    out = tmp_path / "speed"
    code = main(
        [
            "speed",
            "draft",
            "--config",
            str(config),
            "--lengths",
            "64,512,8192",
            "--output-tokens",
            "32",
            "--reps",
            "3",
            "--warmup",
            "1",
            "--concurrency",
            "1,2",
            "--task-prompts",
            "2",
            "--out",
            str(out),
            "-q",
        ]
    )
    assert code == 0, capsys.readouterr().err
    summary = json.loads((out / "speed.json").read_text())
    plan = summary["plan"]
    # the rig serves 4096 tokens per slot and one slot: 8192 is capped, concurrency 2 skipped, both said
    assert plan["lengths_run"] == [64, 512, 4096 - 32 - 8] and plan["concurrency_run"] == [1]
    assert any("do not fit the server's context of 4096" in n for n in summary["notes"])
    assert any("concurrency 2 skipped" in n for n in summary["notes"])
    assert summary["servers"]["baseline"]["n_ctx"] == 4096 and summary["servers"]["baseline"]["slots"] == 1
    assert [s["workload"] for s in summary["speedups"]] == ["in-64", "in-512", "in-4056", "tasks"]
    assert summary["failed"] == []
    cells = {(c["workload"], c["arm"]): c for c in summary["cells"]}
    for length in (64, 512, 4056):
        for arm in ("baseline", "candidate"):
            cell = cells[(f"in-{length}", arm)]
            assert cell["output_tokens"] == 32  # ignore_eos: a fixed output length
            assert abs(cell["prompt_tokens"] - length) <= max(8, 0.05 * length)  # the input length asked for
            assert cell["ttft_s"]["p50"] > 0 and cell["itl_s"]["p50"] > 0
            assert cell["client_over_engine"] > 0
    # the client's decode rate measures the engine's own interval: checked on the median cell of cells that
    # are each the median of three requests, because a client starved by a busy machine reads a burst of
    # tokens at once (with two requests a cell, one such request made a cell, and three cells of six once)
    ratios = sorted(
        cells[(f"in-{n}", arm)]["client_over_engine"] for n in (64, 512, 4056) for arm in ("baseline", "candidate")
    )
    assert 0.8 < statistics.median(ratios) < 1.25, ratios
    draft = cells[("in-512", "candidate")]
    assert 0 < draft["acceptance"] <= 1 and draft["mean_accepted_length"] > 1
    assert math.isnan(cells[("in-512", "baseline")]["acceptance"] or math.nan)  # no drafting without speculation
    for s in summary["speedups"][:3]:
        d = s["decode"]
        assert d["n"] >= 1 and d["geometric_mean"] > 0
    html = (out / "report.html").read_text()
    assert 'data-plot="length"' in html
    assert (out / "report.md").read_text().count("| in-") >= 3
