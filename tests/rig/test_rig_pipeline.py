"""The whole pipeline against the real rig: verdicts for good and bad configurations, and resume."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from projects import copy_project, rig_target

from evalsuite.config import load_config
from evalsuite.rig.launcher import serve
from evalsuite.store import open_run
from evalsuite.workflow import RunOptions, compare_eval, eval_target

pytestmark = pytest.mark.rig


@pytest.fixture(scope="module")
def verdicts(rig_assets, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    targets = rig_target("baseline", baseline=None, control=None) + rig_target("control", control=None)
    for name in ("draft", "dflash", "synthetic"):
        targets += rig_target(name)
    targets += rig_target("quant", extra='allow_differences = ["server.model", "server.model_meta"]')
    config = load_config(copy_project(tmp_path_factory.mktemp("rigproject"), targets))
    options = RunOptions(data="fixture", limit=10, max_tokens=128)
    out = {}
    for name in ("draft", "dflash", "synthetic", "quant"):
        runs = eval_target(config, name, ["gsm8k"], options, repeat_baseline=False)
        (comparison,) = compare_eval(config, runs)
        out[name] = comparison
        out[f"{name}:folder"] = runs.folders["gsm8k"]["candidate"]
    return out


@pytest.mark.parametrize("name", ["draft", "dflash"])
def test_lossless_configurations_are_judged_lossless(name: str, verdicts: dict) -> None:
    comparison = verdicts[name]
    assert comparison.token.label in ("IDENTICAL", "NUMERICAL-ONLY"), comparison.summary
    assert comparison.summary.startswith("LOSSLESS")


@pytest.mark.parametrize("name", ["synthetic", "quant"])
def test_lossy_configurations_are_caught_with_confident_divergences(name: str, verdicts: dict) -> None:
    comparison = verdicts[name]
    assert comparison.token.label == "LOSSY", comparison.summary
    confident = [d for d in comparison.diffs if d.kind == "confident"]
    assert confident and all(d.margin > comparison.thresholds.effective for d in confident)


def test_speculative_records_carry_draft_counts(verdicts: dict) -> None:
    timings = [r.completion.timings for r in open_run(verdicts["draft:folder"]).results(strings="none").values()]
    assert all(t["draft_n"] >= t["draft_n_accepted"] >= 0 for t in timings)
    assert sum(t["draft_n_accepted"] for t in timings) > 0


def test_kill_and_resume_against_a_real_server(rig_assets, tmp_path: Path) -> None:
    with serve(["baseline"]) as servers:
        url = servers["baseline"].base_url
        config = copy_project(tmp_path, f'[targets.real]\nbase_url = "{url}/v1"\nengine = "llamacpp"\n')
        cmd = [
            sys.executable,
            "-m",
            "evalsuite",
            "run",
            "real",
            "--config",
            str(config),
            "--task",
            "gsm8k",
            "--max-tokens",
            "192",
            "--no-grade",
            "-q",
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        database = None
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            found = list((tmp_path / "runs").glob("real/gsm8k/*/records.sqlite"))
            if found:
                database = found[0]
                try:
                    with sqlite3.connect(database) as conn:
                        if conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] >= 8:
                            break
                except sqlite3.OperationalError:  # the run has made the file but not yet its tables
                    pass
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert database is not None
        before = open_run(database.parent).done_ids()
        assert 8 <= len(before) < 30, "the run ended before it could be killed"
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
    store = open_run(database.parent)
    assert len(store) == 30
    last = store.sessions()[-1]
    assert last["requested"] == 30 - len(before) and last["outcome"] == "complete"
