"""One comparison path: `compare`, `report` and `eval` print the same adjusted p-values for a task.

Two tasks whose candidates lose accuracy (a DIFFERENT verdict prints its
Holm-adjusted p in the summary line).  Compared one task at a time with
`evalsuite compare` and both at once with `evalsuite report`, each task's
adjusted p-value, family and speedup must be identical: the Holm family is
the task's own tests, never the set of folders a command happens to get.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from stored_runs import Plan, synthetic_runs

from evalsuite.cli import main

# Right answers are items with i % 10 < 7; flipping right ones makes the candidate clearly worse.
LOSSES = {
    "math500": {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 30, 31, 40, 41, 50},
    "gsm8k": {4, 5, 6, 14, 15, 16, 24, 25, 34, 35, 44},
}


@pytest.fixture(scope="module")
def two_tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("two")
    return {task: synthetic_runs(root / "runs", Plan(n=60, task=task, flips=flips)) for task, flips in LOSSES.items()}


def _p_values(out: str) -> dict[str, str]:
    """Task -> the p-value its summary line prints ("task: IDENTICAL ...; accuracy ..., different (..., p = ...)")."""
    return dict(re.findall(r"^(\w+): .*accuracy [\d.]+ % vs [\d.]+ %, different \([^,]+, p = ([^)]+)\)", out, re.M))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 1  # DIFFERENT fails
    return capsys.readouterr().out


def test_compare_and_report_print_the_same_adjusted_p(
    two_tasks: dict[str, dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no evalsuite.toml here: margins are the default
    folders = {task: {role: str(run.folder) for role, run in runs.items()} for task, runs in two_tasks.items()}
    alone: dict[str, dict] = {}
    printed: dict[str, str] = {}
    for task, roles in folders.items():
        out = _run(["compare", roles["candidate"], roles["baseline"], "--json", f"{task}.json", "--no-report"], capsys)
        printed.update(_p_values(f"{task}: {out.splitlines()[0]}"))
        alone[task] = json.loads(Path(f"{task}.json").read_text())
    out = _run(
        [
            "report",
            *(r["candidate"] for r in folders.values()),
            *(f"--baseline={r['baseline']}" for r in folders.values()),
        ],
        capsys,
    )
    together = {
        task: json.loads(p.read_text())
        for task in folders
        for p in tmp_path.glob(f"reports/*/*/comparison-{task}.json")
    }
    assert set(printed) == set(folders) and _p_values(out) == printed
    for task in folders:
        rows, report_rows = alone[task]["accuracy"], together[task]["accuracy"]
        assert [r["stats"]["p_adjusted"] for r in rows] == [r["stats"]["p_adjusted"] for r in report_rows]
        assert rows[0]["stats"]["p_adjusted"] > rows[0]["stats"]["p_value"]  # adjusted over the task's strata
        assert alone[task]["holm_family"] == together[task]["holm_family"]
        assert alone[task]["holm_family"]["size"] == len(rows) == 7  # overall + 3 subjects + 3 levels
        assert alone[task]["speed"]["speedup"] == together[task]["speed"]["speedup"]
    md = next(tmp_path.glob("reports/*/*/report.md")).read_text()
    assert md.count("Holm family: the 7 accuracy tests of this task (its overall difference and 6 stratum values)") == 2
