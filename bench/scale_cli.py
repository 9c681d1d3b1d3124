"""Benchmark: `evalsuite run` from start to end, as a user runs it, against the parse floor of its answers.

`bench/scale.py` times the ingest inside a warm process.  Here the whole command runs, as the scale
issue first measured it: `python -m evalsuite run` in a fresh process (interpreter start, imports,
config, the store, every request, the last commit) asks the scripted server (`fixtures/fake_server.py`)
for N answers of T tokens with top-5 logprobs, 16 at a time.  Its CPU time (user + system, all threads)
and peak RSS come from the kernel when it exits (`os.wait4`), like `/usr/bin/time`.  As in scale.py,
the client is measured busy: a first run of the same command in another folder has the server render
every answer, and the measured one gets them again as fast as the server copies them (`--replay`); a
client waiting for each answer pays more a token for waking up cold (docs/speed.md).  Next to it,
measured in this run:

- start-up: the same command asking for one answer of one token: what every command pays once;
- the floor: orjson parsing the same bodies and pulling out ids, logprobs and the top-5 pairs
  (`scale.floor_cpu`), per token.

    .venv/bin/python bench/scale_cli.py              # 200 x 2,048, 16 x 16,000, 16 x 16,000 streamed
    SCALE=full .venv/bin/python bench/scale_cli.py   # 200 x 2,048 and 200 x 16,000, whole and streamed
    SCALE_CLI=64x512,8x32000s .venv/bin/python bench/scale_cli.py  # any rows, RESPONSESxTOKENS[s]

A row whose tokens end in "s" is streamed (the default's last row): there the client also keeps each
body for a generic re-read, past its first 2 MiB in a temporary file (`engines/kept.py`), which its
peak RSS shows.

Every command runs with the interpreter's bytecode cache, as an installed package has it (pip compiles
it when it installs): under a temporary PYTHONPYCACHEPREFIX, written by a start-up run that is not
counted.  A machine that sets PYTHONDONTWRITEBYTECODE would otherwise compile every module of the suite
and its libraries on every start, about a sixth of the start-up here, which no user's install pays.

Target (the ingest's): at most 2x the floor a token and at least 100,000 tokens a CPU second, start-up
included.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import scale
from projects import make_project

CONCURRENCY = 16
ROW = re.compile(r"(\d+)x(\d+)(s?)")


def command_cost(config: Path, tokens: int, env: dict[str, str]) -> tuple[float, int]:
    """(CPU seconds, peak RSS in KiB) of one `evalsuite run` of the config's target, read when it exits."""
    argv = [sys.executable, "-m", "evalsuite", "run", "base", "--no-grade", "-q", "--max-tokens", str(tokens)]
    proc = subprocess.Popen([*argv, "--config", str(config)], cwd=config.parent, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"`{' '.join(argv)}` failed (exit {os.waitstatus_to_exitcode(status)})")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def row(responses: int, tokens: int, stream: bool) -> dict[str, float]:
    """One row: the start-up run, the measured run, then the floor over the same bodies."""
    from evalsuite.config import load_config
    from evalsuite.heap import keep_freed_memory
    from evalsuite.runner import plan_run

    keep_freed_memory()  # the allocator as a run sets it, for the floor too (as in scale.py's client process)
    server, url = scale.start_server(tokens, replay_mib=scale.REPLAY_MIB)
    try:
        with tempfile.TemporaryDirectory(prefix="scale-cli-") as tmp:

            def project(name: str, n: int) -> Path:
                extra = f"concurrency = {CONCURRENCY}\nstream = {str(stream).lower()}"
                return make_project(Path(tmp) / name, url, n=n, target_extra=extra, defaults_extra="top_logprobs = 5")

            env = installed(Path(tmp) / "bytecode")
            command_cost(project("compile", 1), 1, env)  # writes the bytecode cache the others read
            start_s, _ = command_cost(project("once", 1), 1, env)
            command_cost(project("first", responses), tokens, env)  # the server renders each answer, and keeps it
            config = project("run", responses)
            cpu_s, peak_kib = command_cost(config, tokens, env)
            store = scale.store_bytes(config.parent / "runs")
            plan = plan_run(load_config(config), "base", "echo", max_tokens=tokens)
            floor_s = scale.floor_cpu(plan, scale.Case(tokens, responses, CONCURRENCY, stream=stream))
    finally:
        server.terminate()
        server.wait()
    n = responses * tokens
    return {"start_s": start_s, "cpu_s": cpu_s, "floor_s": floor_s, "tokens": n, "store": store, "peak_kib": peak_kib}


def installed(cache: Path) -> dict[str, str]:
    """This process's environment with the bytecode cache on, kept under `cache` (see the module's docstring)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(cache)}


def rows_asked() -> list[tuple[int, int, bool]]:
    """(responses, tokens, streamed) of each row: SCALE_CLI's, else the default or full sizes."""
    spec = os.environ.get("SCALE_CLI", "")
    if not spec:
        long = 200 if os.environ.get("SCALE") == "full" else 16
        return [(200, 2048, False), (long, 16_000, False), (long, 16_000, True)]
    rows = [ROW.fullmatch(part) for part in spec.split(",")]
    if not all(m and int(m[1]) > 0 and int(m[2]) > 0 for m in rows):
        raise SystemExit(
            f"SCALE_CLI={spec!r}: expected rows as RESPONSESxTOKENS (an s after: streamed), comma-separated"
        )
    return [(int(m[1]), int(m[2]), bool(m[3])) for m in rows if m]


def main() -> None:
    rows = rows_asked()
    print(f"`evalsuite run` start to end, {CONCURRENCY} in flight, top-5 logprobs, against fixtures/fake_server.py")
    print(
        f"{'route':>11} {'responses':>9} {'tokens':>7}  {'CPU s':>6} {'start-up s':>10}  {'CPU us/token':>12} {'tokens/CPU s':>12}  "
        f"{'floor us/token':>14} {'x floor':>7}  {'store B/token':>13} {'peak RSS MiB':>12}"
    )
    missed = []
    for responses, tokens, stream in rows:
        got = row(responses, tokens, stream)
        route = "chat stream" if stream else "chat"
        per_token, floor = got["cpu_s"] / got["tokens"] * 1e6, got["floor_s"] / got["tokens"] * 1e6
        rate = got["tokens"] / got["cpu_s"]
        print(
            f"{route:>11} {responses:>9} {tokens:>7}  {got['cpu_s']:>6.2f} {got['start_s']:>10.2f}  {per_token:>12.2f} {rate:>12,.0f}  "
            f"{floor:>14.2f} {per_token / floor:>6.2f}x  {got['store'] / got['tokens']:>13.1f} {got['peak_kib'] / 1024:>12.0f}"
        )
        if scale.short_of_target(got):
            missed.append(f"{route}, {responses} x {tokens} ({per_token / floor:.2f}x, {rate:,.0f} tokens/CPU s)")
    print(scale.target_line(missed, len(rows)))


if __name__ == "__main__":
    main()
