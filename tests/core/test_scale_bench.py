"""The ingest benchmark runs a workload given on its command line end to end, and refuses a bad one by name."""

from __future__ import annotations

import re
import subprocess
import sys

from projects import ROOT, checkout_env

ROW = re.compile(r"^\s+chat\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)x\s+([\d.]+)\s+(\d+)$")


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = checkout_env("SCALE")
    command = [sys.executable, str(ROOT / "bench" / "scale.py"), "--sections", "ingest", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)


def test_a_workload_from_the_command_line_is_the_one_measured() -> None:
    done = _bench("--lengths", "48,96", "--concurrency", "3", "--top-logprobs", "2", "--rows", "grid")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "top-2 logprobs" in done.stdout, done.stdout
    rows = [ROW.match(line) for line in done.stdout.splitlines()[2:-1]]
    assert all(rows) and len(rows) == 2, done.stdout
    got = [(int(m[1]), int(m[3])) for m in rows if m]
    assert got == [(48, 3), (96, 3)], done.stdout
    missed = 0
    for m in filter(None, rows):
        cpu, floor, ratio = float(m[4]), float(m[6]), float(m[7])
        assert cpu > 0 and floor > 0 and abs(cpu / floor - ratio) < 0.02 * ratio + 0.01, m[0]
        missed += ratio > 2 or int(m[5].replace(",", "")) < 100_000
    summary = done.stdout.splitlines()[-1]
    assert summary.startswith("target (at most 2x the floor, at least 100,000 tokens a CPU second): "), summary
    assert f"met by {2 - missed} of 2 rows" in summary and summary.count("tokens/CPU s)") == missed, summary


def test_the_top_k_asked_for_reaches_the_server() -> None:
    stored = []
    for k in ("0", "4"):
        done = _bench("--lengths", "48", "--concurrency", "2", "--top-logprobs", k, "--rows", "grid")
        assert done.returncode == 0, done.stdout + done.stderr
        row = ROW.match(done.stdout.splitlines()[2])
        assert row, done.stdout
        stored.append(float(row[8]))
    assert stored[1] > stored[0] + 8, stored  # four alternatives' ids and logprobs are stored beyond none


def test_a_bad_workload_is_refused_with_the_option_named() -> None:
    for args, named in (
        (("--lengths", "64,0"), "--lengths"),
        (("--top-logprobs", "21"), "--top-logprobs"),
        (("--rows", "grid,bogus"), "--rows"),
    ):
        done = _bench(*args)
        assert done.returncode == 2 and f"argument {named}:" in done.stderr, done.stderr
