"""The pytest gate in real pytest subprocesses: items per sample, policies, -k, -x, -n, JUnit XML, target mode."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from stored_runs import Plan, synthetic_runs

from evalsuite.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
PLAN = Plan(n=12, numerical={1, 4}, confident={7}, flips={7}, control_diverges={1})


def gate(cwd: Path, *args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run pytest with the gate plugin in `cwd` (outside the project, so its own tests are not involved)."""
    # CI=true makes pytest print whole failure messages in its short summary too; keep the output alike everywhere
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    env.update({"PYTHONPATH": str(ROOT), "PYTEST_ADDOPTS": ""})
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, RunStore]:
    return synthetic_runs(tmp_path / "runs", PLAN, control=True)


def _pair(runs: dict[str, RunStore]) -> list[str]:
    return ["--evalsuite-run", str(runs["candidate"].folder), "--evalsuite-baseline", str(runs["baseline"].folder)]


def test_numerical_policy_fails_only_the_confident_divergence_with_a_readable_message(tmp_path: Path, runs) -> None:
    xml = tmp_path / "gate.xml"
    out = gate(tmp_path, *_pair(runs), "--evalsuite-control", runs["control"].folder, f"--junitxml={xml}")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 failed, 11 passed" in out.stdout
    assert "FAILED evalsuite::math500::math500-0007" in out.stdout
    assert "diverges from the baseline at token 19" in out.stdout
    assert "LOSSY: confident divergence: the candidate chose a token 3 nats below the baseline's own" in out.stdout
    assert "(the baseline's top two were 3 nats apart)" in out.stdout
    marked = [line for line in out.stdout.splitlines() if line.lstrip().startswith(">>")]
    assert len(marked) == 1 and marked[0].split()[1] == "19"  # the aligned row of the first divergence
    assert "the candidate's token was the baseline's choice #2" in out.stdout
    assert "answers: baseline '9' (incorrect), candidate '8' (correct) (correctness flipped)" in out.stdout
    cases = ET.parse(xml).getroot().findall(".//testcase")
    assert len(cases) == 12 and {c.get("classname") for c in cases} == {"evalsuite.math500"}
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["math500-0007"]


def test_strict_policy_fails_every_divergence_and_x_stops_at_the_first(tmp_path: Path, runs) -> None:
    out = gate(tmp_path, *_pair(runs), "--evalsuite-policy", "strict")
    assert "3 failed, 9 passed" in out.stdout
    assert "which the strict policy does not allow" in out.stdout
    first = gate(tmp_path, *_pair(runs), "--evalsuite-policy", "strict", "-x")
    assert "1 failed, 1 passed" in first.stdout and "math500-0001" in first.stdout


def test_keyword_selection_and_xdist_agree_with_a_serial_run(tmp_path: Path, runs) -> None:
    picked = gate(tmp_path, *_pair(runs), "-k", "math500-0007 or math500-0002", "-rA")
    assert "1 failed, 1 passed, 10 deselected" in picked.stdout
    serial = gate(tmp_path, *_pair(runs), "--evalsuite-policy", "strict", "-rf")
    parallel = gate(tmp_path, *_pair(runs), "--evalsuite-policy", "strict", "-rf", "-n", "2")
    assert "bringing up nodes" in parallel.stdout

    def failed(text: str) -> set[str]:
        return {line.split()[1] for line in text.splitlines() if line.startswith("FAILED ")}

    assert (
        failed(parallel.stdout) == failed(serial.stdout) == {f"evalsuite::math500::math500-{i:04d}" for i in (1, 4, 7)}
    )


def test_baseline_is_found_through_the_config(tmp_path: Path, runs) -> None:
    (tmp_path / "evalsuite.toml").write_text(
        '[defaults]\nruns_dir = "runs"\n\n[targets.base]\nbase_url = "http://127.0.0.1:9/v1"\nengine = "llamacpp"\n\n'
        '[targets.spec]\nbase_url = "http://127.0.0.1:9/v1"\nengine = "llamacpp"\nbaseline = "base"\n'
    )
    out = gate(tmp_path, "--evalsuite-run", runs["candidate"].folder)
    assert "1 failed, 11 passed" in out.stdout, out.stdout + out.stderr
    lonely = gate(tmp_path / "runs", "--evalsuite-run", runs["candidate"].folder)
    assert lonely.returncode == 4 and "pass --evalsuite-baseline DIR" in lonely.stderr


def test_incomparable_runs_are_refused_with_the_field(tmp_path: Path, runs) -> None:
    other = synthetic_runs(tmp_path / "other", Plan(n=12, task="gsm8k"))
    out = gate(tmp_path, "--evalsuite-run", runs["candidate"].folder, "--evalsuite-baseline", other["baseline"].folder)
    assert out.returncode != 0
    assert "task: baseline 'gsm8k', candidate 'math500'" in out.stdout + out.stderr


def test_explicit_test_paths_run_alongside_the_gate(tmp_path: Path, runs) -> None:
    (tmp_path / "test_local.py").write_text("def test_engine_builds():\n    assert True\n")
    both = gate(tmp_path, "test_local.py", *_pair(runs))
    assert "1 failed, 12 passed" in both.stdout


def test_target_mode_runs_baseline_and_target_once_even_with_workers(project: Path, fake_server) -> None:
    out = gate(project.parent, "--evalsuite-target", "spec", "--evalsuite-config", project, "-n", "2")
    assert "10 passed" in out.stdout, out.stdout + out.stderr
    assert fake_server.state.total == 20  # baseline and candidate, generated by the controller only
    listed = gate(project.parent, "--evalsuite-target", "spec", "--evalsuite-config", project, "--collect-only")
    assert "evalsuite::echo::q0000" in listed.stdout or "<SampleItem q0000>" in listed.stdout
    assert fake_server.state.total == 20  # the second session resumed from the stored runs


def test_a_run_or_control_that_is_the_candidate_is_a_usage_error(tmp_path: Path, runs) -> None:
    cand = str(runs["candidate"].folder)
    same = gate(tmp_path, "--evalsuite-run", cand, "--evalsuite-baseline", cand)
    assert same.returncode == 4 and "same run folder" in same.stdout + same.stderr
    ctl = gate(tmp_path, *_pair(runs), "--evalsuite-control", cand)
    assert ctl.returncode == 4 and "same run folder" in ctl.stdout + ctl.stderr


def test_the_gate_judges_the_comparison_the_report_shows(runs) -> None:
    """One comparison: the gate's pair goes through compare_runs, so its figures are the report's, byte for byte."""
    from evalsuite.compare import compare_runs
    from evalsuite.diff import DEFAULT_NEAR_TIE_NATS, ControlKind
    from evalsuite.gate.explain import passes
    from evalsuite.gate.runs import GatePair, compare_pair

    control: tuple[tuple[ControlKind, str], ...] = (("control", str(runs["control"].folder)),)
    pair = GatePair("math500", str(runs["candidate"].folder), str(runs["baseline"].folder), control)
    gated = compare_pair(pair, DEFAULT_NEAR_TIE_NATS)
    shown = compare_runs(runs["candidate"], runs["baseline"], controls={"control": runs["control"]})
    assert gated.comparison.to_json() == shown.to_json()
    failing = [sid for sid, d in sorted(gated.diffs.items()) if not passes(d, "numerical")]
    assert failing == [d.sample_id for d in shown.diffs if d.kind == "confident"] == ["math500-0007"]
    assert gated.candidate.keys() == gated.baseline.keys() == {"math500-0001", "math500-0004", "math500-0007"}


def test_a_second_control_for_one_task_is_refused_not_dropped(runs) -> None:
    from evalsuite.errors import EvalsuiteError
    from evalsuite.gate.runs import stored_pairs

    cand, base, ctl = (str(runs[r].folder) for r in ("candidate", "baseline", "control"))
    (pair,) = stored_pairs([cand], [base], [ctl], None)
    assert pair.controls == (("control", ctl),)
    with pytest.raises(EvalsuiteError, match=r"Several --evalsuite-control runs are for task 'math500'"):
        stored_pairs([cand], [base], [ctl, base], None)
