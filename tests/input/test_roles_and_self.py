"""Roles belong to a comparison, and a run, a target or a control is never compared with itself.

Real CLI, real run store, the scripted fake server as every endpoint.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from fake_server import FakeServer

from evalsuite.cli import main


def _run(project: Path, target: str, capsys: pytest.CaptureFixture[str], *extra: str) -> Path:
    assert main(["run", target, "--config", str(project), "-q", *extra]) == 0
    return Path(capsys.readouterr().out.strip().splitlines()[-1])


def _add_target(project: Path, text: str) -> None:
    project.write_text(project.read_text() + "\n" + text)


def _eval_folders(out: str) -> dict[str, Path]:
    return {line.split("\t")[1]: Path(line.split("\t")[2]) for line in out.splitlines() if line.startswith("echo\t")}


def _expect_refusal(argv: list[str], capsys: pytest.CaptureFixture[str], *phrases: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    for phrase in phrases:
        assert phrase in err, err


# --- compared with itself ---------------------------------------------------


def test_compare_a_run_with_itself_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(project, "base", capsys)
    _expect_refusal(["compare", str(run), str(run), "--no-report"], capsys, "same run folder", "always looks lossless")
    _expect_refusal(["compare", str(run / "records.sqlite"), str(run), "--no-report"], capsys, "same run folder")
    _expect_refusal(["report", str(run), str(run), "-q"], capsys, "is given twice")
    _expect_refusal(["report", str(run), "--baseline", str(run), "-q"], capsys, "is given twice")
    copy = project.parent / "copy-of-run"
    shutil.copytree(run, copy)
    _expect_refusal(["compare", str(copy), str(run), "--no-report"], capsys, "same run (fingerprint")


def test_a_control_or_determinism_run_that_is_the_candidate_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, spec = _run(project, "base", capsys), _run(project, "spec", capsys)
    argv = ["compare", str(spec), str(base), "--no-report"]
    _expect_refusal([*argv, "--control", str(spec)], capsys, "same run folder")
    _expect_refusal([*argv, "--control", str(base)], capsys, "same run folder")
    _expect_refusal([*argv, "--determinism", str(spec)], capsys, "same run folder")
    # another run of the candidate target (a different max_tokens cannot hide it)
    _add_target(project, f'[targets.alias]\nbase_url = "{_url(project)}"\nengine = "llamacpp"\n')
    alias = _run(project, "alias", capsys)
    _expect_refusal([*argv, "--control", str(alias)], capsys, "asks the same endpoint the same way")


def _url(project: Path) -> str:
    return re.search(r'base_url = "([^"]+)"', project.read_text()).group(1)  # type: ignore[union-attr]


def test_a_target_that_is_its_own_baseline_or_control_is_refused_at_load(
    project: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    text = project.read_text()
    project.write_text(text.replace('baseline = "base"', 'baseline = "spec"'))
    _expect_refusal(
        ["eval", "spec", "--config", str(project), "-q"],
        capsys,
        "targets.spec.baseline = 'spec' names the target itself",
    )
    project.write_text(text + '\n[targets.ctl]\nbase_url = "http://LOCALHOST:1/v1/"\nengine = "llamacpp"\n')
    project.write_text(project.read_text().replace('baseline = "base"', 'baseline = "base"\ncontrol = "spec"'))
    _expect_refusal(
        ["eval", "spec", "--config", str(project), "-q"],
        capsys,
        "targets.spec.control = 'spec' names the target itself",
    )
    project.write_text(
        text.replace('baseline = "base"', 'baseline = "base"\ncontrol = "twin"')
        + f'\n[targets.twin]\nbase_url = "{_url(project).replace("127.0.0.1", "localhost")}/"\nengine = "llamacpp"\n'
    )
    _expect_refusal(
        ["eval", "spec", "--config", str(project), "-q"], capsys, "is the same endpoint, asked the same way"
    )
    assert fake_server.state.total == 0


def test_two_runs_of_one_target_measure_determinism(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The baseline and its repeat are different runs: comparing them is how determinism is measured."""
    assert main(["eval", "spec", "--config", str(project), "--repeat-baseline", "--no-report", "-q"]) == 0
    folders = _eval_folders(capsys.readouterr().out)
    assert main(["compare", str(folders["repeat"]), str(folders["baseline"]), "--no-report"]) == 0
    assert "IDENTICAL: 10/10 token-identical" in capsys.readouterr().out


# --- roles belong to the comparison -----------------------------------------


def test_readme_flow_run_then_eval_then_report(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`run base` first (its folder was created as a plain run), then `eval spec`, then `report` on eval's folders."""
    base = _run(project, "base", capsys)
    assert main(["eval", "spec", "--config", str(project), "--no-report", "-q"]) == 0
    folders = _eval_folders(capsys.readouterr().out)
    assert folders["baseline"] == base
    assert main(["report", *map(str, folders.values()), "--config", str(project), "-q"]) == 0
    assert "IDENTICAL: 10/10 token-identical" in capsys.readouterr().out


def test_one_run_is_a_baseline_here_and_a_control_there(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _add_target(
        project, f'[targets.other]\nbase_url = "{_url(project)}"\nengine = "llamacpp"\nextra = {{ n_probs = 5 }}\n'
    )
    base, spec, other = (_run(project, t, capsys) for t in ("base", "spec", "other"))
    assert main(["report", str(spec), "--baseline", str(base), "--control", str(other), "-q"]) == 0  # other: control
    assert main(["report", str(spec), "--baseline", str(other), "-q"]) == 0  # other: baseline
    assert main(["compare", str(other), str(base), "--no-report"]) == 0  # other: candidate
    assert main(["compare", str(base), str(other), "--no-report"]) == 0  # base: candidate, created by `run`
    assert capsys.readouterr().out.count("IDENTICAL: ") == 4


def test_refusal_names_the_cli_option_and_the_config_key(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, spec = _run(project, "base", capsys), _run(project, "spec", capsys, "--max-tokens", "32")
    _expect_refusal(
        ["compare", str(spec), str(base), "--no-report"],
        capsys,
        "--allow params.max_tokens",
        'allow_differences = ["params.max_tokens"]',
    )
    assert "allow=[" not in capsys.readouterr().err
    assert main(["compare", str(spec), str(base), "--no-report", "--allow", "params.max_tokens"]) == 0


def _reproduce_lines(report: Path) -> list[str]:
    text = report.read_text()
    block = text[text.index("Reproduce") :]
    return [line.strip() for line in block.splitlines() if line.strip().startswith("evalsuite ")]


@pytest.mark.parametrize("repeat", [True, False])
def test_every_reproduce_line_works_when_pasted(
    repeat: bool,
    project: Path,
    fake_server: FakeServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(project.parent)
    flag = "--repeat-baseline" if repeat else "--no-repeat-baseline"
    assert main(["eval", "spec", "--limit", "6", flag, "-q"]) == 0
    out = capsys.readouterr().out
    summary = next(line for line in out.splitlines() if line.startswith("IDENTICAL"))
    report = Path(next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("report: ")))
    lines = _reproduce_lines(report)
    assert [line.split()[1] for line in lines] == ["eval", "report"]
    asked = fake_server.state.total
    for line in lines:
        assert main(shlex.split(line)[1:] + ["-q"]) == 0, line
        pasted = capsys.readouterr().out
        assert summary in pasted, (line, pasted)
    assert fake_server.state.total == asked  # the pasted eval resumed the same runs: nothing was asked again
    assert len(list((project.parent / "runs").glob("*/echo/*"))) == (3 if repeat else 2)
