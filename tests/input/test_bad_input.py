"""Every bad input ends with exit 2 and a sentence naming the file, key, row or value, before anything is sent.

Each case runs the real CLI against a throwaway project whose targets point
at the scripted fake server; "nothing sent" is the server's own request
count, and "nothing lost" is the stored bytes before and after.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_server import FakeServer

from evalsuite.cli import main

Breaker = Callable[[Path], str]  # breaks the project folder, returns text the error must contain


def _task(project: Path) -> Path:
    return project.parent / "tasks" / "echo.yaml"


def _data(project: Path) -> Path:
    return project.parent / "data.jsonl"


def _non_utf8_config(project: Path) -> str:
    project.write_bytes(project.read_bytes() + b"\n# caf\xe9\n")
    return "is not UTF-8"


def _include(value: str) -> Breaker:
    def breaker(project: Path) -> str:
        (project.parent / "tasks" / "folder.yaml").mkdir()
        _task(project).write_text(f"include: {value}\n" + _task(project).read_text())
        return "include = "

    return breaker


def _render_failure(project: Path) -> str:
    lines = _data(project).read_text().splitlines()
    lines[6] = json.dumps({"qid": "q0006", "question": "x", "answer": "#### 1", "group": "even", "n": 0})
    _data(project).write_text("\n".join(lines) + "\n")
    _task(project).write_text(
        _task(project).read_text().replace("{{ question }}", "{{ question }} {{ 10 // (n | default(1)) }}")
    )
    return "row 7: the prompt template fails on this row"


def _data_file(name: str, content: bytes, expected: str) -> Breaker:
    def breaker(project: Path) -> str:
        (project.parent / name).write_bytes(content)
        _task(project).write_text(_task(project).read_text().replace("local: data.jsonl", f"local: {name}"))
        return expected

    return breaker


def _generation(key: str, value: str) -> Breaker:
    def breaker(project: Path) -> str:
        _task(project).write_text(
            _task(project).read_text().replace("max_tokens: 64", f"max_tokens: 64\n  {key}: {value}")
        )
        return key

    return breaker


def _grader(text: str, expected: str) -> Breaker:
    def breaker(project: Path) -> str:
        _task(project).write_text(
            _task(project).read_text().replace("  name: gsm8k\n  extraction: [hash_line, last_number]", text)
        )
        return expected

    return breaker


def _config_edit(old: str, new: str, expected: str) -> Breaker:
    def breaker(project: Path) -> str:
        project.write_text(project.read_text().replace(old, new))
        return expected

    return breaker


def _non_utf8_task(project: Path) -> str:
    _task(project).write_bytes(_task(project).read_bytes().replace(b"You are terse.", b"Sei conciso \xe0 tutti."))
    return f"{_task(project)} is not UTF-8"


def _data_folder(project: Path) -> str:
    _data(project).unlink()
    _data(project).mkdir()
    return f"{_data(project)} is a folder"


CASES: dict[str, Breaker] = {
    "task spec not UTF-8": _non_utf8_task,
    "data file is a folder": _data_folder,
    "config not UTF-8": _non_utf8_config,
    "include a number": _include("5"),
    "include a folder": _include("folder.yaml"),
    "include a missing file": _include("nope.yaml"),
    "template fails on one row": _render_failure,
    "data not UTF-8": _data_file(
        "latin.jsonl", b'{"qid": "q1", "question": "caf\xe9", "answer": "1", "group": "a"}\n', "not UTF-8"
    ),
    "gz that is not gzip": _data_file("rows.jsonl.gz", b'{"qid": "q1"}\n', "is not a valid gzip file"),
    "truncated gz": _data_file("cut.jsonl.gz", gzip.compress(b'{"qid": "q1", "question": "x"}\n' * 50)[:40], "gzip"),
    "parquet that is not Parquet": _data_file("rows.parquet", b"PAR1 but not really", "is not a readable Parquet file"),
    "empty data file": _data_file("empty.jsonl", b"\n", "has no rows"),
    "negative max_tokens in the spec": _generation("top_p", "2"),
    "unknown generation key": _generation("temprature", "0"),
    "unknown grader": _grader("  name: gsm9k", "Unknown grader 'gsm9k'"),
    "unknown extraction step": _grader("  name: gsm8k\n  extraction: [hash_line, lastnumber]", "lastnumber"),
    "limit 0 in the config": _config_edit('tasks = ["echo"]', 'tasks = ["echo"]\nlimit = 0', "defaults.limit"),
    "no tasks": _config_edit('tasks = ["echo"]', "tasks = []", "defaults.tasks"),
    "control is the baseline": _config_edit(
        'baseline = "base"', 'baseline = "base"\ncontrol = "base"', "also its baseline"
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exits_2_naming_it_before_any_request(
    case: str, project: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = CASES[case](project)
    code = main(["eval", "spec", "--config", str(project), "--no-report", "-q"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and "Traceback" not in err
    assert expected in err, err
    assert fake_server.state.total == 0, "a request was sent before the bad input was found"


def test_config_that_is_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "evalsuite.toml").mkdir()
    assert main(["targets", "--config", str(tmp_path / "evalsuite.toml")]) == 2
    assert f"{tmp_path / 'evalsuite.toml'} is a folder" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--limit", "0"], ["--limit", "-2"], ["--limit", "two"], ["--max-tokens", "-5"]])
def test_out_of_range_options_are_refused_by_the_parser(
    argv: list[str], project: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", "base", "--config", str(project), *argv])
    assert exit_.value.code == 2
    assert argv[0] in capsys.readouterr().err
    assert fake_server.state.total == 0


def test_library_limits_are_checked_too(project: Path) -> None:
    from evalsuite.config import load_config
    from evalsuite.errors import ConfigError
    from evalsuite.workflow import RunOptions, plan_checked

    config = load_config(project)
    with pytest.raises(ConfigError, match="--limit must be a positive"):
        plan_checked(config, "base", "echo", RunOptions(limit=0))
    with pytest.raises(ConfigError, match="max_tokens = -5"):
        config.defaults.params({"max_tokens": -5})


@pytest.mark.parametrize(("argv", "asked"), [([], 3), (["--limit", "5"], 5), (["--limit", "all"], 10)])
def test_the_configs_limit_holds_unless_the_command_line_says(
    argv: list[str], asked: int, project: Path, fake_server: FakeServer
) -> None:
    project.write_text(project.read_text().replace('tasks = ["echo"]', 'tasks = ["echo"]\nlimit = 3'))
    assert main(["run", "base", "--config", str(project), "-q", *argv]) == 0
    assert fake_server.state.total == asked


def _stored_run(project: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["run", "base", "--config", str(project), "-q"]) == 0
    return Path(capsys.readouterr().out.strip())


@pytest.mark.parametrize("damage", ["truncated", "garbage", "folder"])
def test_damaged_store_is_named_and_left_as_it_is(
    damage: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "spec", "--config", str(project), "-q"]) == 0
    other = capsys.readouterr().out.strip()
    folder = _stored_run(project, capsys)
    db = folder / "records.sqlite"
    with sqlite3.connect(db) as conn:  # move everything into the main file, as a finished run has it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for extra in ("records.sqlite-wal", "records.sqlite-shm"):
        (folder / extra).unlink(missing_ok=True)
    if damage == "truncated":
        db.write_bytes(db.read_bytes()[: len(db.read_bytes()) // 2])
    elif damage == "garbage":
        db.write_bytes(b"not a database at all" * 300)
    else:
        db.unlink()
        db.mkdir()
    before = db.read_bytes() if db.is_file() else None
    for argv in (
        ["grade", str(folder)],
        ["compare", other, str(folder), "--no-report"],
        ["report", other, "--baseline", str(folder), "-q"],
    ):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert "records.sqlite" in err and "Traceback" not in err, err
    assert (db.read_bytes() if db.is_file() else None) == before


@pytest.mark.parametrize("manifest", [b"{not json", b"[1, 2]", b'{"fingerprint": "x"}', b"\xff\xfe{}"])
def test_bad_manifest_is_named(manifest: bytes, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _stored_run(project, capsys)
    (folder / "manifest.json").write_bytes(manifest)
    assert main(["grade", str(folder)]) == 2
    err = capsys.readouterr().err
    assert str(folder / "manifest.json") in err and "Traceback" not in err
    assert (folder / "manifest.json").read_bytes() == manifest


def test_runs_lists_healthy_runs_and_names_broken_ones(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _stored_run(project, capsys)
    assert main(["run", "spec", "--config", str(project), "-q", "--no-grade"]) == 0
    bad = Path(capsys.readouterr().out.strip())
    (bad / "manifest.json").write_text("{")
    copy = good.parent / "0000000000000000"
    shutil.copytree(good, copy, ignore=shutil.ignore_patterns("*-wal", "*-shm"))
    (copy / "records.sqlite").write_bytes(b"garbage" * 100)
    assert main(["runs", "--config", str(project)]) == 0
    captured = capsys.readouterr()
    assert f"base\techo\t10\t10\t{good}" in captured.out
    assert str(bad) not in captured.out and str(copy) not in captured.out
    assert "2 run folder(s) cannot be read" in captured.err
    assert f"{bad}: " in captured.err and f"{copy}: " in captured.err
    assert (bad / "manifest.json").read_text() == "{"


def test_runs_with_no_sample_in_common_are_not_compared(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _stored_run(project, capsys)
    lines = _data(project).read_text().splitlines()
    _data(project).write_text("\n".join(line.replace('"q0', '"r0') for line in lines) + "\n")
    assert main(["run", "spec", "--config", str(project), "-q"]) == 0
    spec = capsys.readouterr().out.strip()
    assert main(["compare", spec, str(base), "--no-report", "--allow", "dataset"]) == 2
    assert "no sample in common" in capsys.readouterr().err


def test_a_stored_row_that_no_longer_decodes_is_named(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _stored_run(project, capsys)
    with sqlite3.connect(folder / "records.sqlite") as conn:
        conn.execute("UPDATE results SET ids = x'0102030405', usage = '{' WHERE rowid = 3")
    assert main(["grade", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"{folder / 'records.sqlite'} is damaged" in err and "Traceback" not in err
