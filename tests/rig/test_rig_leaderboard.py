"""`evalsuite leaderboard` on the real llama-server rig: four configurations of the constructed model (a grid of
two draft lengths, the random-weight DFlash drafter, and the synthetic one that is lossy by construction)
against one baseline, with a two-turn session.  Kept small (two GSM8K problems, 48 tokens, short speed
workloads): 75-90 s on two shared cores, most of it the servers' starts.  (The constructed model's n-gram
configuration is left out: its random walk repeats no 12 tokens, so it drafts nothing and has no acceptance.)
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from projects import copy_project

from evalsuite.cli import main

TARGETS = """
[targets.baseline]
engine = "llamacpp"
rig = "baseline"
max_tokens = 48

[targets.control]
engine = "llamacpp"
rig = "control"
max_tokens = 48
baseline = "baseline"

[targets.draft-n]
engine = "llamacpp"
rig = "draft"
rig_args = ["--spec-draft-n-max", "{n}"]
grid.n = [2, 4]
max_tokens = 48
baseline = "baseline"
control = "control"

[targets.dflash]
engine = "llamacpp"
rig = "dflash"
max_tokens = 48
baseline = "baseline"
control = "control"

[targets.synthetic]
engine = "llamacpp"
rig = "synthetic"
max_tokens = 48
baseline = "baseline"
control = "control"
"""

SPEED = ["--lengths", "64", "--output-tokens", "24", "--reps", "2", "--warmup", "1", "--task-prompts", "1"]


@pytest.mark.rig
def test_a_rig_leaderboard_ranks_the_lossless_and_marks_the_synthetic_lossy(
    rig_assets, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = copy_project(tmp_path / "project", TARGETS)
    args = ["leaderboard", "draft-n", "dflash", "synthetic", "--config", str(config), "--limit", "2"]
    code = main([*args, *SPEED, "--session", "coding", "--session-turns", "2", "--repeat-baseline"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    (board,) = (tmp_path / "project" / "reports" / "leaderboard").iterdir()
    with (board / "leaderboard.csv").open() as fh:
        rows = {r["target"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"baseline", "draft-n[n=2]", "draft-n[n=4]", "dflash", "synthetic"}
    fake = rows["synthetic"]
    assert fake["verdict"] == "LOSSY" and fake["rank"] == ""  # marked, and kept out of the ranking
    lossless = [r for name, r in rows.items() if name not in ("baseline", "synthetic")]
    assert sorted(int(r["rank"]) for r in lossless) == [1, 2, 3]
    for r in lossless:
        assert r["verdict"] in ("IDENTICAL", "NUMERICAL-ONLY"), r
        assert float(r["speedup_low"]) <= float(r["speedup"]) <= float(r["speedup_high"])
        assert 0 <= float(r["acceptance"]) <= 1 and float(r["tau"]) >= 1
    assert sorted(lossless, key=lambda r: int(r["rank"])) == sorted(lossless, key=lambda r: -float(r["speedup"]))
    for r in rows.values():
        assert float(r["peak_memory_mb"]) > 1  # every server here was started by the suite
    # the grid's draft length reached the server: tau (tokens per verification) is at most 1 + the draft length
    assert float(rows["draft-n[n=2]"]["tau"]) <= 3 and float(rows["draft-n[n=4]"]["tau"]) <= 5
    # the shared runs were asked once: one baseline run and its repeat, one control run
    runs = tmp_path / "project" / "runs"
    assert (
        len(list((runs / "baseline" / "gsm8k").iterdir())) == 2
        and len(list((runs / "control" / "gsm8k").iterdir())) == 1
    )
    assert len([line for line in captured.out.splitlines() if not line.startswith("leaderboard:")]) == 5
    # the session ran on the real server: per-turn speed in each configuration's speed report
    speed = json.loads((board / "draft-n@n=2" / "speed" / "speed.json").read_text())
    assert [s["workload"] for s in speed["speedups"]][-2:] == ["turn-1", "turn-2"]
    assert speed["session"]["parting"] and rows["draft-n[n=2]"]["session"].startswith("identical")
    html = (board / "leaderboard.html").read_text()
    assert 'data-plot="acceptance"' in html and 'data-plot="context"' in html and 'data-plot="session"' in html
