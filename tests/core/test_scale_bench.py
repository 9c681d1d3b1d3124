"""The ingest benchmark runs a workload given on its command line end to end, and refuses a bad one by name."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from types import ModuleType

import httpx
import pytest
from fake_server import FakeServer, FakeState
from projects import ROOT, checkout_env

ROW = re.compile(
    r"^\s+chat\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)x\s+(\d+)%\s+(\d+)\s+([\d.]+)\s+(\d+)$"
)


def _bench(*args: str, repeat: tuple[str, ...] = ("--repeat", "1")) -> subprocess.CompletedProcess[str]:
    env = checkout_env("SCALE")
    command = [sys.executable, str(ROOT / "bench" / "scale.py"), "--sections", "ingest", *repeat, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)


def test_a_workload_from_the_command_line_is_the_one_measured() -> None:
    done = _bench("--lengths", "48,96", "--concurrency", "3", "--rows", "grid")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "top-5 logprobs" in done.stdout, done.stdout
    rows = [ROW.match(line) for line in done.stdout.splitlines()[2:-1]]
    assert all(rows) and len(rows) == 2, done.stdout
    got = [(int(m[1]), int(m[3])) for m in rows if m]
    assert got == [(48, 3), (96, 3)], done.stdout
    assert all(m[9] == m[2] for m in rows if m), done.stdout  # every timed answer came from the first pass
    missed = 0
    for m in filter(None, rows):
        cpu, floor, ratio = float(m[4]), float(m[6]), float(m[7])
        assert cpu > 0 and floor > 0 and abs(cpu / floor - ratio) < 0.02 * ratio + 0.01, m[0]
        missed += ratio > 2 or int(m[5].replace(",", "")) < 100_000
    summary = done.stdout.splitlines()[-1]
    assert summary.startswith("target (at most 2x the floor, at least 100,000 tokens a CPU second): "), summary
    assert f"met by {2 - missed} of 2 rows" in summary and summary.count("tokens/CPU s)") == missed, summary


def test_by_default_a_row_runs_more_than_once_and_shows_a_run_inside_their_spread() -> None:
    done = _bench("--lengths", "48", "--concurrency", "2", "--rows", "grid", repeat=())
    assert done.returncode == 0, done.stdout + done.stderr
    header, line = done.stdout.splitlines()[1:3]
    assert header.endswith("x floor, lowest-highest"), done.stdout
    shown, spread = line.rsplit(None, 1)
    row = ROW.match(shown)
    low, high = (float(x) for x in spread.removesuffix("x").split("-"))
    assert row and low <= float(row[7]) <= high, done.stdout


def test_the_top_k_asked_for_reaches_the_server() -> None:
    stored = []
    for k in ("0", "4"):
        done = _bench("--lengths", "48", "--concurrency", "2", "--top-logprobs", k, "--rows", "grid")
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert f"top-{k} logprobs" in lines[0], done.stdout
        row = ROW.match(lines[2])
        assert row, done.stdout
        stored.append(float(row[10]))
        assert lines[-1].endswith(f", set for top-5 logprobs): not judged at top-{k}"), done.stdout
    assert stored[1] > stored[0] + 8, stored  # four alternatives' ids and logprobs are stored beyond none


def test_the_waiting_client_is_measured_on_request() -> None:
    done = _bench("--lengths", "48", "--concurrency", "2", "--rows", "grid", "--no-replay")
    assert done.returncode == 0, done.stdout + done.stderr
    row = ROW.match(done.stdout.splitlines()[2])
    assert row and row[9] == "0" and 0 < int(row[8]) <= 100, done.stdout  # every answer rendered as it was asked for


def _scale() -> ModuleType:
    return _bench_module("scale")


def _bench_module(name: str) -> ModuleType:
    """bench/NAME.py, loaded as a module."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_row_but_the_paced_one_replays_and_none_with_no_replay() -> None:
    scale = _scale()
    assert [case.label for case in scale.ingest_cases(False) if not case.replay] == ["chat stream, paced"]
    assert not any(case.replay for case in scale.ingest_cases(False, scale.Workload(replay=False)))


def _ask(state: FakeState, prompt: str, stream: bool = False) -> bytes:
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 8, "top_logprobs": 2, "stream": stream}
    return state.answer(json.dumps(body).encode(), body)


def test_the_server_sends_an_answer_again_only_for_the_same_request_and_within_its_budget() -> None:
    state = FakeState(tokens=8, replay_bytes=1 << 20)
    first = _ask(state, "one")
    assert _ask(state, "one") is first and first.startswith(b"HTTP/1.1 200 OK")  # kept: sent again as it was
    assert _ask(state, "two") != first and _ask(state, "one", stream=True) != first  # another request: its own answer
    assert b"data: [DONE]" in _ask(state, "one", stream=True)
    assert len(state.replayed) == 3 and state.replays == 2
    tight = FakeState(tokens=8, replay_bytes=len(first) + 1)
    assert _ask(tight, "one") == first and _ask(tight, "two") != first
    assert list(tight.replayed.values()) == [first]  # the second did not fit beside the first
    assert _ask(tight, "two") is not _ask(tight, "two")  # over the budget: rendered again each time
    off = FakeState(tokens=8)
    assert _ask(off, "one") == first and _ask(off, "one") == first and not off.replayed and not off.replays


def test_a_running_server_replays_and_forgets_what_it_kept_when_scripted(fake_server: FakeServer) -> None:
    fake_server.state.replay_bytes = 1 << 20
    body = {"messages": [{"role": "user", "content": "one"}], "max_tokens": 8}
    with httpx.Client(base_url=fake_server.base_url) as client:
        answers = [client.post("/chat/completions", json=body).json() for _ in range(2)]
        assert answers[0] == answers[1] and fake_server.state.replays == 1
        assert client.get(fake_server.base_url.removesuffix("/v1") + "/stats").json()["replays"] == 1
        client.post(fake_server.base_url.removesuffix("/v1") + "/script", json={"tokens": 3})
        short = client.post("/chat/completions", json=body).json()  # the tokens changed: rendered again
    assert (
        fake_server.state.replays == 1
        and short["usage"]["completion_tokens"] == 3 != answers[0]["usage"]["completion_tokens"]
    )


def test_a_bad_workload_is_refused_with_the_option_named() -> None:
    for args, named in (
        (("--lengths", "64,0"), "--lengths"),
        (("--top-logprobs", "21"), "--top-logprobs"),
        (("--rows", "grid,bogus"), "--rows"),
    ):
        done = _bench(*args)
        assert done.returncode == 2 and f"argument {named}:" in done.stderr, done.stderr


CLI_ROW = re.compile(
    r"^\s*(chat|chat stream)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)x"
    r"\s+([\d.]+)\s+(\d+)$"
)


def test_the_command_bench_runs_the_rows_asked_for_start_to_end() -> None:
    env = {**checkout_env("SCALE"), "SCALE_CLI": "3x24,2x40s"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale_cli.py")], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [CLI_ROW.match(line) for line in done.stdout.splitlines()[2:-1]]
    asked = [("chat", 3, 24), ("chat stream", 2, 40)]
    assert all(rows) and [(m[1], int(m[2]), int(m[3])) for m in rows if m] == asked, done.stdout
    for m in filter(None, rows):
        cpu_s, start_s, floor = float(m[4]), float(m[5]), float(m[8])
        # a few short answers cost about what start-up alone does: either may read higher
        assert cpu_s > 0 and start_s > 0 and floor > 0 and float(m[10]) > 0, done.stdout
    assert "met by 0 of 2 rows; not by chat, 3 x 24" in done.stdout.splitlines()[-1], (
        done.stdout
    )  # short answers: nearly all start-up
    bad = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale_cli.py")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "SCALE_CLI": "3x24,3x"},
    )
    assert bad.returncode != 0 and "SCALE_CLI='3x24,3x'" in bad.stderr


@pytest.mark.parametrize(("pace_s", "legacy"), [(0.0, False), (0.0005, False), (0.0005, True)])
def test_the_bare_reader_reads_every_token_of_every_stream(
    fake_server: FakeServer, pace_s: float, legacy: bool
) -> None:
    """The paced row's second reference reads every answer to its end, several on one connection: all at
    once or paced, llama.cpp's entries or vLLM's lists."""
    fake_server.state.pace_s, fake_server.state.legacy = pace_s, legacy
    bare = _bench_module("bare_reader")
    model = fake_server.state.model
    if legacy:
        bodies = [{"model": model, "prompt": f"q{i}", "max_tokens": 12, "logprobs": 3} for i in range(5)]
    else:
        ask = {"model": model, "max_tokens": 12, "logprobs": True, "top_logprobs": 3}
        bodies = [{**ask, "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(5)]
    route = "/completions" if legacy else "/chat/completions"
    assert bare.read_all(fake_server.base_url, bodies, 2, route, _scale().extract) == 5 * 12
