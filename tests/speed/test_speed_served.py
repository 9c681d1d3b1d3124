"""`evalsuite speed` on targets that start their own servers: together or one at a time, memory, a session.

The served program is the scripted fake server (fixtures/fake_server.py) as a real subprocess; the real
llama-server path is in test_speed_rig.py and the leaderboard's rig test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fake_server import fake_answer
from projects import ROOT, make_project

from evalsuite.cli import main

FAKE = ROOT / "fixtures" / "fake_server.py"
SESSION = {"name": "mini", "system": "Be brief.", "turns": ["Write f.", "Now change f.", "Show f again."]}


def _served(tmp_path: Path, base_tokens: int = 12, spec_tokens: int = 12) -> Path:
    config = make_project(tmp_path, "http://unused")
    head = config.read_text().split("[targets.base]")[0]

    def table(name: str, tokens: int, extra: str = "") -> str:
        command = json.dumps([sys.executable, str(FAKE), "--port", "{port}", "--tokens", str(tokens)])
        return (
            f'[targets.{name}]\nengine = "llamacpp"\n{extra}[targets.{name}.serve]\ncommand = {command}\n'
            'health_path = "/v1/models"\nstartup_timeout_s = 30\n\n'
        )

    config.write_text(head + table("base", base_tokens) + table("spec", spec_tokens, 'baseline = "base"\n'))
    (tmp_path / "session.json").write_text(json.dumps(SESSION))
    return config


def _speed(config: Path, out: Path, *extra: str) -> int:
    grid = ["--lengths", "16", "--reps", "2", "--concurrency", "1", "--warmup", "1", "--task-prompts", "1"]
    return main(
        ["speed", "spec", "--config", str(config), *grid, "--output-tokens", "8", "--out", str(out), "-q", *extra]
    )


def _lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]


def test_served_targets_are_started_measured_and_their_memory_shown(tmp_path: Path) -> None:
    config = _served(tmp_path)
    out = tmp_path / "speed"
    assert _speed(config, out) == 0
    summary = json.loads((out / "speed.json").read_text())
    # the scripted server streams an answer as one event, so pairs show in latency (no decode interval)
    assert summary["failed"] == [] and summary["speedups"][0]["latency"]["n"] == 2
    for role in ("baseline", "candidate"):
        server = summary["servers"][role]
        assert server["target"] == ("base" if role == "baseline" else "spec")
        assert server["peak_memory_mb"] > 5 and server["one_at_a_time"] is False  # a Python process, measured
    assert "peak memory" in (out / "report.md").read_text()
    assert not any("one after the other" in n for n in summary["notes"])
    # together: the arms' requests alternate step by step
    arms = [m["arm"] for m in _lines(out) if m["arm"] != "warmup"]
    assert arms[:4] in (
        ["baseline", "candidate", "candidate", "baseline"],
        ["candidate", "baseline", "baseline", "candidate"],
    )


def test_one_at_a_time_measures_the_baseline_first_on_the_same_prompts_and_says_so(tmp_path: Path) -> None:
    config = _served(tmp_path)
    out = tmp_path / "speed"
    assert _speed(config, out, "--one-at-a-time") == 0
    summary = json.loads((out / "speed.json").read_text())
    lines = [m for m in _lines(out) if m["arm"] != "warmup"]
    arms = [m["arm"] for m in lines]
    first_candidate = arms.index("candidate")
    assert set(arms[:first_candidate]) == {"baseline"} and set(arms[first_candidate:]) == {"candidate"}
    last_baseline_answer = max(m["started_at"] + m["latency_s"] for m in lines if m["arm"] == "baseline")
    assert min(m["started_at"] for m in lines if m["arm"] == "candidate") >= last_baseline_answer
    assert sorted((m["workload"], m["rep"]) for m in lines if m["arm"] == "baseline") == sorted(
        (m["workload"], m["rep"]) for m in lines if m["arm"] == "candidate"
    )
    assert all(s["latency"]["n"] >= 1 for s in summary["speedups"])  # every workload paired
    assert any("one after the other" in n for n in summary["notes"])
    assert "one after the other" in (out / "report.md").read_text()
    assert summary["servers"]["baseline"]["peak_memory_mb"] > 5 and summary["servers"]["candidate"]["one_at_a_time"]


def test_a_session_feeds_each_arm_its_own_history_and_says_where_they_part(tmp_path: Path) -> None:
    # the scripted server's answer is a function of the whole prompt, and 13 tokens extend the same 12
    config = _served(tmp_path, base_tokens=12, spec_tokens=13)
    out = tmp_path / "speed"
    assert _speed(config, out, "--session", str(tmp_path / "session.json"), "--output-tokens", "64") == 0
    summary = json.loads((out / "speed.json").read_text())
    turns = [m for m in _lines(out) if m["workload"].startswith("turn-") and m["rep"] == 0]
    for arm, tokens in (("baseline", 12), ("candidate", 13)):
        history: list[str] = [SESSION["system"]]
        for turn, text in enumerate(SESSION["turns"]):
            (answer,) = [m for m in turns if m["arm"] == arm and m["workload"] == f"turn-{turn + 1}"]
            history.append(text)
            expected = "".join(piece for _, piece, _ in fake_answer("\n".join(history), tokens))
            assert answer["text"] == expected, (arm, turn)  # its own earlier answers are in its prompt
            history.append(expected)
    parting = summary["session"]["parting"]
    assert [p["turn"] for p in parting] == [1, 1]
    base_first = next(m["text"] for m in turns if m["arm"] == "baseline" and m["workload"] == "turn-1")
    assert parting[0]["offset"] == len(base_first) and parting[0]["baseline"] == ""
    assert [s["workload"] for s in summary["speedups"]][-3:] == ["turn-1", "turn-2", "turn-3"]
    md = (out / "report.md").read_text()
    assert "## Multi-turn session" in md and "answers part at turn 1" in md


def test_identical_arms_never_part(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _served(tmp_path)
    out = tmp_path / "speed"
    assert _speed(config, out, "--session", str(tmp_path / "session.json"), "--session-turns", "2") == 0
    summary = json.loads((out / "speed.json").read_text())
    assert summary["plan"]["session"]["turns"] == 2
    assert [(p["turn"], p["identical_turns"]) for p in summary["session"]["parting"]] == [(None, 2), (None, 2)]
    assert "never part" in (out / "report.md").read_text()
    assert main(["speed", "spec", "--config", str(config), "--session", "nope"]) == 2
    err = capsys.readouterr().err
    assert "Unknown session 'nope'" in err and "(shipped: coding)" in err
