"""`evalsuite leaderboard` end to end on the scripted server: served targets started by the suite, a grid, a
configuration lossy by construction, the three files, resuming, and the shared runs asked once.

The real llama-server path is tests/rig/test_rig_leaderboard.py.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from fake_server import FakeServer
from projects import ROOT, make_project, prompt_key

from evalsuite.cli import main
from evalsuite.leaderboard import CSV_COLUMNS

FAKE = ROOT / "fixtures" / "fake_server.py"
SPEED = ["--lengths", "16", "--reps", "2", "--warmup", "1", "--task-prompts", "1", "--output-tokens", "8"]


def _served_grid(tmp_path: Path) -> Path:
    """A baseline, its control and a grid over the scripted server's answer length: 12 tokens is the baseline's
    answer (lossless), 13 extends it (every sample differs: lossy by construction)."""
    config = make_project(tmp_path, "http://unused", n=4)
    head = config.read_text().split("[targets.base]")[0]
    for name in ("self.gguf", "draft.gguf"):
        (tmp_path / name).write_bytes(b"")  # the commands name model files, which the preflight wants to exist

    def table(name: str, args: list[str], extra: str = "") -> str:
        command = json.dumps([sys.executable, str(FAKE), "--port", "{port}", "--pace", "0.002", *args])
        return (
            f'[targets.{name}]\nengine = "llamacpp"\n{extra}[targets.{name}.serve]\ncommand = {command}\n'
            'health_path = "/v1/models"\nstartup_timeout_s = 30\n\n'
        )

    config.write_text(
        head
        + table("base", ["--tokens", "12"])
        + table("ctl", ["--tokens", "12", "-md", "self.gguf"], 'baseline = "base"\n')
        + table(
            "spec",
            ["--tokens", "{tokens}", "-md", "draft.gguf", "--accept", "0.75"],
            'baseline = "base"\ncontrol = "ctl"\ngrid.tokens = [12, 13]\n',
        )
    )
    return config


def _csv(folder: Path) -> list[dict[str, str]]:
    with (folder / "leaderboard.csv").open() as fh:
        return list(csv.DictReader(fh))


def _board(tmp_path: Path) -> Path:
    (folder,) = (tmp_path / "reports" / "leaderboard").iterdir()
    return folder


def test_served_grid_is_ranked_the_lossy_point_apart_and_a_rerun_reuses_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _served_grid(tmp_path)
    assert main(["leaderboard", "spec", "--config", str(config), *SPEED, "-q"]) == 0
    out = capsys.readouterr().out.splitlines()
    board = _board(tmp_path)
    rows = _csv(board)
    assert set(CSV_COLUMNS) >= {"target", "verdict", "accuracy_delta", "speedup", "speedup_low", "speedup_high"}
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [(r["target"], r["verdict"], r["rank"]) for r in rows] == [
        ("base", "BASELINE", ""),
        ("spec[tokens=12]", "IDENTICAL", "1"),
        ("spec[tokens=13]", "LOSSY", ""),
    ] or [(r["target"], r["verdict"], r["rank"]) for r in rows] == [
        ("spec[tokens=12]", "IDENTICAL", "1"),
        ("base", "BASELINE", ""),
        ("spec[tokens=13]", "LOSSY", ""),
    ]  # ranked rows by speedup (the baseline among them at 1.00x), the lossy one after them
    by = {r["target"]: r for r in rows}
    ranked = by["spec[tokens=12]"]
    assert float(ranked["speedup_low"]) <= float(ranked["speedup"]) <= float(ranked["speedup_high"])
    assert float(ranked["acceptance"]) == 0.75 and float(ranked["tau"]) > 1  # the server's own draft counts
    assert int(ranked["pairs"]) >= 3 and ranked["grid"] == "tokens=12" and ranked["accuracy_delta"] == "0.0"
    for r in rows:
        assert float(r["peak_memory_mb"]) > 5  # every server was started by the suite: a Python process, read
    # one stdout line per row, then the three paths
    assert [line.split()[1] for line in out[:3]] == [r["target"] for r in rows]
    assert "LOSSY (not ranked: LOSSY)" in out[2] and out[3:] == [
        f"leaderboard: {board / name}" for name in ("leaderboard.md", "leaderboard.html", "leaderboard.csv")
    ]
    md = (board / "leaderboard.md").read_text()
    ranked_part, apart = md.split("## Not ranked")
    assert "spec[tokens=12]" in ranked_part and "spec[tokens=13]" not in ranked_part and "| LOSSY |" in apart
    html = (board / "leaderboard.html").read_text()
    assert html.count("<svg") >= 2 and 'data-plot="acceptance"' in html and 'data-plot="context"' in html
    assert "src=" not in html and "<link" not in html  # self-contained
    for point in ("spec@tokens=12", "spec@tokens=13"):
        assert (board / point / "accuracy" / "report.md").is_file() and (
            board / point / "speed" / "speed.json"
        ).is_file()
    kept = sorted((tmp_path / "runs").glob("*/.speed/*/speed.json"))
    assert len(kept) == 2
    stamps = [p.stat().st_mtime_ns for p in kept]

    # the same command again: nothing is asked again, the speed runs are the kept ones
    assert main(["leaderboard", "spec", "--config", str(config), *SPEED]) == 0
    err = capsys.readouterr().err
    assert err.count("0 new, 4 already stored") == 4  # base, ctl and the two points
    assert err.count("measured before") == 2 and "speed 1/" not in err  # (servers start: a run's key is its server's)
    assert [p.stat().st_mtime_ns for p in sorted((tmp_path / "runs").glob("*/.speed/*/speed.json"))] == stamps


def test_the_shared_baseline_its_repeat_and_the_control_are_asked_once(tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.state.pace_s = 0.001
    control = f'[targets.ctl]\nbase_url = "{fake_server.base_url}"\nengine = "llamacpp"\nbaseline = "base"\n'
    config = make_project(tmp_path, fake_server.base_url, n=3, target_extra=control + 'extra = { drafter = "self" }\n')
    config.write_text(config.read_text() + 'control = "ctl"\nextra = { n_max = "{n}" }\ngrid.n = [2, 4, 8]\n')
    code = main(["leaderboard", "spec", "--config", str(config), "--repeat-baseline", *SPEED, "-q"])
    assert code == 0
    # per task prompt: the baseline twice (its repeat), the control once, each of the three points once
    assert [fake_server.state.requests[prompt_key(i)] for i in range(3)] == [6, 6, 6]
    rows = _csv(_board(tmp_path))
    assert sorted(r["target"] for r in rows if r["verdict"] == "IDENTICAL") == [f"spec[n={n}]" for n in (2, 4, 8)]
    assert all(r["peak_memory_mb"] == "" for r in rows)  # servers the suite did not start: not measured


@pytest.mark.parametrize(
    ("extra", "names", "says"),
    [
        ('[targets.other]\nbase_url = "http://x"\nengine = "llamacpp"\n', ["spec", "o2"], "one baseline"),
        ("", ["spec", "base"], "'base' is the baseline itself"),
        ("", ["base"], "base has no baseline"),
        ("", ["nope"], "nope"),
    ],
)
def test_bad_leaderboards_are_refused_with_a_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, names: list[str], says: str
) -> None:
    config = make_project(tmp_path, "http://unused")
    config.write_text(
        config.read_text() + extra + ('[targets.o2]\nbase_url = "http://x"\nbaseline = "other"\n' if extra else "")
    )
    assert main(["leaderboard", *names, "--config", str(config), *SPEED]) == 2
    assert says in capsys.readouterr().err
