"""The CLI teaches usage, and its exit codes are what scripts can rely on."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_server import FakeServer, Fault

from evalsuite.cli import main


@pytest.mark.parametrize("command", [[], ["run"], ["eval"], ["compare"], ["grade"], ["runs"], ["targets"]])
def test_help_teaches_with_examples(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "usage: evalsuite" in out
    if command in ([], ["run"], ["eval"], ["compare"], ["grade"]):
        assert "example" in out


def test_config_error_exits_2_with_a_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["targets", "--config", str(tmp_path / "missing.toml")])
    assert code == 2
    assert capsys.readouterr().err.startswith("error: Config file")


def test_endpoint_refusal_exits_3(project: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    fake_server.state.faults = [Fault("400", times=-1)]
    code = main(["run", "base", "--config", str(project), "--no-grade", "-q"])
    assert code == 3
    assert "refused sample" in capsys.readouterr().err


def test_run_prints_the_run_folder_and_runs_lists_it(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "base", "--config", str(project), "--no-grade", "-q"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert (folder / "manifest.json").exists()
    assert main(["runs", "--config", str(project)]) == 0
    assert f"base\techo\t10\t0\t{folder}" in capsys.readouterr().out


def test_api_key_never_reaches_a_file(tmp_path: Path, fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from projects import make_project

    monkeypatch.setenv("EVALSUITE_FAKE_KEY", "sk-very-secret-value")
    config = make_project(tmp_path, fake_server.base_url, target_extra='api_key_env = "EVALSUITE_FAKE_KEY"')
    assert main(["run", "base", "--config", str(config), "--no-grade", "-q"]) == 0
    for path in (tmp_path / "runs").rglob("*"):
        if path.is_file():
            assert b"sk-very-secret-value" not in path.read_bytes(), path


def test_eval_runs_baseline_twice_and_candidate_then_judges(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", "spec", "--config", str(project), "--repeat-baseline", "--no-report", "-q"])
    out = capsys.readouterr().out
    assert code == 0, out
    roles = {line.split("\t")[1] for line in out.splitlines() if line.startswith("echo\t")}
    assert roles == {"baseline", "repeat", "candidate"}
    assert "IDENTICAL: 10/10 token-identical" in out


def test_compare_refuses_runs_with_different_parameters(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "base", "--config", str(project), "-q"]) == 0
    assert main(["run", "spec", "--config", str(project), "-q", "--max-tokens", "32"]) == 0
    base, spec = capsys.readouterr().out.split()
    assert main(["compare", spec, base, "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "params.max_tokens: baseline 64, candidate 32" in err


def test_report_rebuilds_the_comparison_from_run_folders(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "spec", "--config", str(project), "--repeat-baseline", "--no-report", "-q"]) == 0
    folders = [line.split("\t")[2] for line in capsys.readouterr().out.splitlines() if line.startswith("echo\t")]
    assert main(["report", *reversed(folders), "--config", str(project), "-q"]) == 0
    out = capsys.readouterr().out
    assert "IDENTICAL: 10/10 token-identical" in out
    paths = [Path(line.split(": ", 1)[1]) for line in out.splitlines() if line.startswith("report: ")]
    assert [p.name for p in paths] == ["report.md", "report.html"] and all(p.exists() for p in paths)
    assert paths[0].parent.parent == project.parent / "reports" / "spec"
    assert main(["report", folders[0], "--config", str(project), "-q"]) == 2
    assert "has no baseline run among the folders given" in capsys.readouterr().err
