"""The whole pipeline against the real rig: verdicts for good and bad configurations."""

from __future__ import annotations

import pytest
from projects import copy_project, rig_target

from evalsuite.config import load_config
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
    assert comparison.summary.startswith(("IDENTICAL", "NUMERICAL-ONLY"))


@pytest.mark.parametrize("name", ["synthetic", "quant"])
def test_lossy_configurations_are_caught_with_confident_divergences(name: str, verdicts: dict) -> None:
    comparison = verdicts[name]
    assert comparison.token.label == "LOSSY", comparison.summary
    confident = [d for d in comparison.diffs if d.kind == "confident"]
    assert confident and all(d.gap > comparison.thresholds.effective for d in confident)


def test_speculative_records_carry_draft_counts(verdicts: dict) -> None:
    timings = [r.completion.timings for r in open_run(verdicts["draft:folder"]).results(strings="none").values()]
    assert all(t["draft_n"] >= t["draft_n_accepted"] >= 0 for t in timings)
    assert sum(t["draft_n_accepted"] for t in timings) > 0
