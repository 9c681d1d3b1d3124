"""The sandbox in a report: the level each run's code was graded at, an explicit `none` in the header, and the
programs the machine starved, counted and named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from stored_runs import manifest, write_run

from evalsuite.compare import compare_runs
from evalsuite.grading import grade_store
from evalsuite.records import Completion, Grade, Sample, SampleResult
from evalsuite.report import write_reports
from evalsuite.store import open_run

GRADER = {"name": "code", "extraction": ["last_code_block"], "options": {"timeout_s": 2}}
DOUBLE = [{"input": "2\n", "output": "4", "testtype": "stdin"}]


def code_runs(root: Path) -> dict[str, Path]:
    """A baseline and a candidate answering two code problems alike (one right, one wrong), grades not yet written."""
    reference = {"public_test_cases": json.dumps(DOUBLE), "fn_name": None}
    samples = [Sample(f"p{i}", "toy", ({"role": "user", "content": "double it"},), reference) for i in range(2)]
    answers = ["print(2 * int(input()))", "print(5)"]
    folders = {}
    for role, target in (("baseline", "base"), ("candidate", "spec")):
        man = manifest(target, role, task="toy") | {"grader": GRADER}
        results = [
            SampleResult(s.id, "toy", {}, Completion(f"```python\n{code}\n```", "stop"))
            for s, code in zip(samples, answers, strict=True)
        ]
        folders[role] = write_run(root / target / "toy" / "run", man, results, [], samples).folder
    return folders


def test_an_explicit_none_is_recorded_with_each_grade_and_shown_in_the_header(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the code grader's tests run as root (as in CI), like the sandbox tests")
    folders = code_runs(tmp_path)
    for role, setting in (("baseline", "auto"), ("candidate", "none")):
        store = open_run(folders[role], write=True)
        grades = grade_store(store, cache=False, sandbox=setting).grades
        store.close()
        assert [g.status for g in grades] == ["correct", "incorrect"]  # the same verdicts at every level
        expected = "none" if setting == "none" else "namespaces"
        assert {g.details["sandbox"]["isolation"] for g in grades} <= {expected, "uid"}
    stores = {role: open_run(folder) for role, folder in folders.items()}
    comparison = compare_runs(stores["candidate"], stores["baseline"], n_resamples=50)
    paths = write_reports([comparison], tmp_path / "report", runs={"toy": stores})
    md, html = paths.markdown.read_text(), paths.html.read_text()
    assert "> - Sandbox: Code of candidate was graded without a sandbox" in md, md
    assert "SANDBOX</span> Code of candidate was graded without a sandbox (<code>--sandbox none</code>" in html
    row = next(line for line in md.splitlines() if line.startswith("| code sandbox |"))
    assert "none (asked for: no isolation)" in row.split("|")[3] and "none" not in row.split("|")[2], row


def test_programs_the_machine_starved_are_counted_and_named(tmp_path: Path) -> None:
    folders = code_runs(tmp_path)
    level = {"sandbox": {"isolation": "namespaces"}}
    graded = {
        "baseline": [Grade("p0", "correct", "", "", 1.0, level), Grade("p1", "incorrect", "", "", 0.0, level)],
        "candidate": [Grade(sid, "ungraded", "", "starved", 0.0, {**level, "starved": True}) for sid in ("p0", "p1")],
    }
    for role, folder in folders.items():
        store = open_run(folder, write=True)
        store.write_grades(graded[role], "code", "1")
        store.close()
    stores = {role: open_run(folder) for role, folder in folders.items()}
    comparison = compare_runs(stores["candidate"], stores["baseline"], n_resamples=50)
    md = write_reports([comparison], tmp_path / "report", runs={"toy": stores}).markdown.read_text()
    assert "> - Sandbox: 2 program(s) ungraded because the machine starved them of CPU on every try " in md, md
    assert "(candidate: `p0`, `p1`)" in md
    assert "graded without a sandbox" not in md
