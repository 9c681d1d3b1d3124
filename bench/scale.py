"""Benchmark: the suite at thinking-model lengths, against floors measured in the same run.

Ingest: `evalsuite.runner.execute` asks the scripted server (`fixtures/fake_server.py`, a separate
process) for responses of 2k, 16k and 32k tokens with top-5 logprobs, at concurrency 1 and 64, and
stores them.  Each row runs in a fresh client process and prints its CPU time (user + system, all
threads, from the start of the run to its end: the interpreter's start-up and a first pass, which
makes the first imports and calls, are left out) per token and tokens per CPU second, next to the
floor: orjson parsing the same bodies (the server's own generator, fed the same requests, writes them
again; a stream's `data:` lines one by one) and pulling out the ids, logprobs and top-5 (id, logprob)
pairs, measured in the same process.  Target: at most 2x the floor at every length, and at least
100,000 tokens per client CPU second.  Store bytes per token and the client's peak RSS
(interpreter and imports included) complete the row.  Streamed and completions-route rows follow at
16k tokens; the scripted server sends each event of a stream as an HTTP chunk of its own, as
llama-server, vLLM and SGLang do.  The "(lists)" rows are the completions route as vLLM answers it:
logprobs in parallel `tokens` / `token_logprobs` / `top_logprobs` lists (no ids, each token's
alternatives an object), whose floor pulls out those lists and the (token, logprob) pairs.  The
"paced" row is a server generating slower than its client reads, as a real one streaming tokens
as it makes them: the events come 0.5 ms apart, so a read that looked at once would bring one, and
what the client does per read (the event loop's wait, the HTTP layers, a cold cache) is paid every
few tokens (the client's reads gather what comes within a short wait, engines/sockets.py).  A line
under it gives a second reference measured in the same process: `bare_reader.py`, the least a Python
client does to read the same server (asyncio streams and orjson, each event read as it comes,
nothing checked or stored).  The short row, 256-token answers 16 at a time, shows what a response
costs apart from its tokens (the request and response through the HTTP layers, the checks' and the
store's fixed costs).  The
"(recorded)" rows answer with a real llama-server's tokens (`fake_server.py --recorded`, the H200
recording in shared/data: a 32,000-token vocabulary's strings, full-precision logprobs, 650 bytes of
JSON a token against the scripted words' 431); the "(recorded, drafted)" rows with the same server's
tokens under speculation, where the accepted draft tokens (nearly all) carry no alternatives, as in
every speculative arm of a comparison.  They are left out where that folder is absent.

The client is measured busy, as on a node whose engine answers faster than one client process reads:
the scripted server renders an answer in Python at a few times the client's cost, so a first, untimed
pass asks for every answer and the timed pass gets each again as fast as the server can copy it
(`fake_server.py --replay`).  `busy` is the client's CPU time over the timed pass's wall time,
`replayed` how many of its answers the server sent again (all of them but where the server's budget
ran out).  With --no-replay the server renders every answer in the timed pass: the client waits for
each, as one reading a single GPU does, and pays more a token for waking up cold (docs/speed.md); the
paced row always runs so.  Peak RSS covers both passes; the store is sized once it is closed.

    .venv/bin/python bench/scale.py [--full] [--sections ingest] [--repeat 1]
    SCALE=full .venv/bin/python bench/scale.py
    .venv/bin/python bench/scale.py --lengths 1024,8000 --concurrency 1,16 --top-logprobs 10 --rows grid

--lengths and --concurrency set the grid of chat rows, --top-logprobs the alternatives every row asks
for (0-20), --rows which groups of rows run (grid, routes, paced, short, recorded), --no-replay the waiting
client.  A last line names the rows that miss the target.  The default run asks for 64 responses of
2k tokens and 8 of 16k and 32k (concurrency 64 then has fewer requests than slots: the row says how
many were in flight); --full asks for 200 of each.  The short row asks for 16 times its 2k count (1,024;
3,200 with --full): with 256 it measured under half a CPU second, and the machine's slow moments (a
few hundred ms at a time) decided its ratio.  Another section is one more function in SECTIONS.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures"))
sys.path.insert(0, str(ROOT / "tests"))

from projects import recordings_dir  # noqa: E402  (tests/ on the path first)

LENGTHS = (2048, 16_000, 32_000)
CONCURRENCY = (1, 64)
TOP_LOGPROBS = 5
PACE_S = 0.0005
SHORT = 256
"""A non-thinking model's GSM8K answer: the row where a response's own cost, apart from its tokens, shows."""
REPLAY_MIB = 4096
"""What the scripted server may keep of the answers it sends again (a full run's 32k-token row: about 3.3 GB at top-5;
past it answers are rendered again, and the row's `replayed` and `busy` say so)."""
TARGET_RATIO, TARGET_RATE = 2.0, 100_000
"""What the ingest rows aim for at top-5 logprobs: client CPU at most this many times the floor's, at least this many
tokens a CPU second.  At another top-k neither holds its meaning (the floor's work a token grows with k; at 0 a body
has no token entries, and a response's own cost is all there is), and the rows are not judged."""
TARGET = f"target (at most {TARGET_RATIO:g}x the floor, at least {TARGET_RATE:,} tokens a CPU second"
"""The closing line's start; its parenthesis is closed by what follows (the top-k it is set for, or nothing)."""


@dataclass(frozen=True)
class Case:
    """One ingest row: how many responses of how many tokens, how many at once, over which route."""

    tokens: int
    responses: int
    concurrency: int
    api: str = "chat"
    stream: bool = False
    legacy: bool = False
    """Completions logprobs in vLLM's parallel lists instead of llama.cpp's entries."""
    pace_s: float = 0.0
    """A stream's events sent one at a time, this long apart: each read of the client brings about one."""
    top_logprobs: int = TOP_LOGPROBS
    replay: bool = True
    """The server sends each answer again from a first pass (see `child`); False (always for a paced row, whose
    server's pace is its point): it renders every one."""
    recorded: str = ""
    """The recording (a file in RECORDINGS) whose real tokens the answers are made of; empty: the scripted
    server's short ASCII words."""

    @property
    def label(self) -> str:
        paced = ", paced" if self.pace_s else ""
        recorded = f" ({RECORDED_LABELS[self.recorded]})" if self.recorded else ""
        return f"{self.api}{' (lists)' if self.legacy else ''}{' stream' if self.stream else ''}{recorded}{paced}"


ROWS = ("grid", "routes", "paced", "short", "recorded")
"""The groups of ingest rows: chat at each length and concurrency, the other routes at 16k tokens, the
paced stream, short answers, and answers made of a real server's tokens."""
RECORDINGS = recordings_dir()
BASELINE_RECORDING, DRAFTED_RECORDING = "base_f16.json.gz", "spec_f16_self.json.gz"
"""Real llama-server answers (a 32,000-token vocabulary, top-5 alternatives), the recorded rows' tokens: without
speculation, and with the target drafting for itself, where the accepted draft tokens (6,103 of 6,129) come
without alternatives, as every speculative llama-server's do."""
RECORDED_LABELS = {BASELINE_RECORDING: "recorded", DRAFTED_RECORDING: "recorded, drafted"}
RECORDED_K = 5
"""The alternatives a recorded token carries: the recorded rows run at top-k up to this."""


@dataclass(frozen=True)
class Workload:
    """What the ingest rows ask for: the grid's lengths and concurrencies, the top-k, which groups run."""

    lengths: tuple[int, ...] = LENGTHS
    concurrency: tuple[int, ...] = CONCURRENCY
    top_logprobs: int = TOP_LOGPROBS
    rows: tuple[str, ...] = ROWS
    replay: bool = True


def ingest_cases(full: bool, load: Workload = Workload()) -> list[Case]:
    def count(tokens: int) -> int:
        return 200 if full else (64 if tokens <= 4096 else 8)

    k, replay = load.top_logprobs, load.replay
    cases = []
    if "grid" in load.rows:
        cases += [Case(n, count(n), c, top_logprobs=k, replay=replay) for n in load.lengths for c in load.concurrency]
    if "routes" in load.rows:
        routes = [("chat", True, False), ("completions", False, False), ("completions", True, False)]
        routes += [("completions", False, True), ("completions", True, True)]
        cases += [
            Case(16_000, count(16_000), 8, api, stream, legacy, top_logprobs=k, replay=replay)
            for api, stream, legacy in routes
        ]
    if "paced" in load.rows:
        cases.append(Case(2048, count(2048), 8, "chat", stream=True, pace_s=PACE_S, top_logprobs=k, replay=False))
    if "short" in load.rows:
        cases.append(Case(SHORT, 16 * count(2048), 16, top_logprobs=k, replay=replay))
    if "recorded" in load.rows and recorded_rows_left_out(load) is None:
        real = [(BASELINE_RECORDING, 2048, 64, False), (BASELINE_RECORDING, 16_000, 8, True)]
        real += [(BASELINE_RECORDING, 32_000, 8, False), (DRAFTED_RECORDING, 2048, 64, False)]
        real += [(DRAFTED_RECORDING, 16_000, 8, True)]
        cases += [
            Case(n, count(n), c, stream=stream, top_logprobs=k, replay=replay, recorded=file)
            for file, n, c, stream in real
        ]
    return cases


def recorded_rows_left_out(load: Workload) -> str | None:
    """Why the recorded rows asked for do not run (the recording is absent, or has fewer alternatives), if so."""
    if "recorded" not in load.rows:
        return None
    absent = [RECORDINGS / file for file in RECORDED_LABELS if not (RECORDINGS / file).is_file()]
    if absent:
        return f"the recorded rows are left out: {absent[0]} is absent (see shared/data/README.md)"
    if load.top_logprobs > RECORDED_K:
        return f"the recorded rows are left out: the recording has {RECORDED_K} alternatives a token, not {load.top_logprobs}"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    tokens: int, legacy: bool = False, pace_s: float = 0.0, replay_mib: int = 0, recorded: str = ""
) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    cmd = [sys.executable, str(ROOT / "fixtures" / "fake_server.py"), "--port", str(port), "--tokens", str(tokens)]
    cmd += ["--legacy"] if legacy else []
    cmd += ["--recorded", str(RECORDINGS / recorded)] if recorded else []
    proc = subprocess.Popen(
        [*cmd, "--pace", str(pace_s), "--replay", str(replay_mib)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
    return proc, f"http://127.0.0.1:{port}/v1"


def run_child(case: Case, url: str, folder: Path) -> dict[str, Any]:
    """One ingest in a fresh process (its own heap, its own peak RSS); returns what it measured."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps({**case.__dict__, "url": url, "folder": str(folder)})],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"the ingest of {case} failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def child(spec: dict[str, Any]) -> None:
    """The client side of one row: the run, then the floor over the same bodies, as one JSON line.

    A first, untimed pass asks for every answer of the row, so that the server sends them again as fast as
    it can copy them in the timed pass: rendered in Python, an answer costs the server a few times what
    it costs the client to read, and a client waiting for each answer is measured as it wakes, cold, as
    one that a big node keeps busy never is.  `busy` is the share of the timed pass's wall time
    the client spent on its CPU.  A case without `replay` (the paced row's) warms up with one answer instead.
    """
    from projects import make_project

    from evalsuite.config import load_config
    from evalsuite.runner import execute, plan_run

    case = Case(**{key: value for key, value in spec.items() if key not in ("url", "folder")})
    folder = Path(spec["folder"])
    extra = f'concurrency = {case.concurrency}\napi = "{case.api}"\nstream = {str(case.stream).lower()}'
    defaults = f"top_logprobs = {case.top_logprobs}"
    config = load_config(
        make_project(folder, spec["url"], n=case.responses, target_extra=extra, defaults_extra=defaults)
    )
    warm = plan_run(config, "base", "echo", max_tokens=case.tokens, limit=None if case.replay else 1)
    warm.runs_dir = folder / "warm"  # also the first imports and calls
    asyncio.run(execute(warm, progress=lambda done, total: None))
    plan = plan_run(config, "base", "echo", max_tokens=case.tokens)
    plan.runs_dir = folder / "runs"
    gc.collect()
    replays = _replays(spec["url"])
    cpu, wall = time.process_time(), time.perf_counter()
    outcome = asyncio.run(execute(plan, progress=lambda done, total: None))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    replays = _replays(spec["url"]) - replays
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert outcome.recorded == case.responses, outcome
    outcome.store.close()  # the last connection to close folds the write-ahead log into the database
    stored = store_bytes(outcome.folder)
    del outcome
    floor = floor_cpu(plan, case)
    tokens = case.responses * case.tokens
    got = {
        "cpu_s": cpu,
        "wall_s": wall,
        "replayed": replays,
        "floor_s": floor,
        "tokens": tokens,
        "store": stored,
        "peak_kib": peak_kib,
    }
    if case.pace_s:
        got["bare_s"] = bare_cpu(spec["url"], plan, case)
    print(json.dumps(got))


def bare_cpu(url: str, plan: Any, case: Case) -> float:
    """CPU seconds `bare_reader` takes to read the run's answers again from the same server, as many at once."""
    from bare_reader import read_all
    from fake_server import FakeState

    bodies = list(requests(plan, FakeState(tokens=case.tokens).model))
    route = "/chat/completions" if case.api == "chat" else "/completions"
    start = time.process_time()
    tokens = read_all(url, bodies, case.concurrency, route, extract)
    spent = time.process_time() - start
    assert tokens == case.responses * case.tokens, f"the bare reader read {tokens} tokens"
    return spent


def requests(plan: Any, model: str) -> Iterator[dict[str, Any]]:
    """The body the engine sends for each sample of the run, to a server that serves `model`."""
    from evalsuite.engines import make_engine

    engine = make_engine(plan.target)
    engine.model = model
    return (engine.request_body(sample, plan.params) for sample in plan.samples)


def _replays(url: str) -> int:
    """How many answers the scripted server has sent again so far (its /stats)."""
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=10) as answer:
        return int(json.load(answer)["replays"])


def floor_cpu(plan: Any, case: Case) -> float:
    """CPU seconds orjson takes to parse every body of the run and pull out ids, logprobs and top-5 pairs.

    The bodies are written again by the server's own code from the requests the engine sent, one at a
    time (only the parse and the extraction are timed).  The garbage collector is off while they are
    timed: a 32k-token body is some 200,000 dicts and lists, and collections walking them again would
    put into the floor the very cost a lean client avoids.
    """
    from fake_faults import _sse, stream_events
    from fake_server import FakeState, completion_body, load_recording

    state = FakeState(tokens=case.tokens, legacy=case.legacy)
    if case.recorded:
        state.recorded, state.n_vocab, state.model = load_recording(RECORDINGS / case.recorded)
    total = 0.0
    for request in requests(plan, state.model):
        answer = completion_body(state, request)
        body = _sse(stream_events(answer)) if case.stream else json.dumps(answer).encode()
        del answer
        gc.disable()
        try:
            start = time.process_time()
            if case.stream:
                _extract_events(body)
            else:
                extract(orjson.loads(body))
            total += time.process_time() - start
        finally:
            gc.enable()
    return total


def extract(data: dict[str, Any]) -> tuple[list[Any], ...]:
    """Ids, logprobs and (id, logprob) of every alternative: the least any client reads from a body."""
    choices = data["choices"]
    if not choices:
        return [], [], []
    lists = choices[0].get("logprobs") or {}
    if "tokens" in lists:  # vLLM's completions lists: tokens as strings, each alternative a (token, logprob) item
        return lists["tokens"], lists["token_logprobs"], [pair for top in lists["top_logprobs"] for pair in top.items()]
    content = lists.get("content") or []
    ids = [e["id"] for e in content]
    logprobs = [e["logprob"] for e in content]
    top = [(a["id"], a["logprob"]) for e in content for a in e["top_logprobs"]]
    return ids, logprobs, top


def _extract_events(body: bytes) -> tuple[list[Any], ...]:
    """`extract` over a stream body: each `data:` line parsed, its columns appended."""
    ids: list[Any] = []
    logprobs: list[Any] = []
    top: list[Any] = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            got = extract(orjson.loads(line[6:]))
            ids += got[0]
            logprobs += got[1]
            top += got[2]
    return ids, logprobs, top


def ingest(full: bool, repeat: int = 3, load: Workload = Workload()) -> None:
    """The ingest table: client CPU per token against the parse floor, store size and peak RSS.

    Each row runs `repeat` times (each in a fresh client process against a fresh server) and shows the
    run whose ratio to the floor is the median (the higher middle one for an even N), with the lowest and
    highest ratios.  On a shared virtual machine the same fixed work takes up to about twice its fastest
    CPU time in slow stretches of a few hundred ms (user time, not waiting or system time), which may fall
    on the client's run or on the floor's: a single run would judge the machine's moment, not the client.
    """
    print(
        "ingest: evalsuite.runner.execute against fixtures/fake_server.py, "
        f"top-{load.top_logprobs} logprobs, one client process a run"
    )
    spread = f"  {'x floor, lowest-highest':>23}" if repeat > 1 else ""
    print(
        f"{'route':>31} {'tokens':>7} {'responses':>9} {'in flight':>9}  {'CPU us/token':>12} {'tokens/CPU s':>12}  "
        f"{'floor us/token':>14} {'x floor':>7}  {'busy':>4} {'replayed':>8}  {'store B/token':>13} {'peak RSS MiB':>12}{spread}"
    )
    cases, missed = ingest_cases(full, load), []
    left_out = recorded_rows_left_out(load)
    judged = load.top_logprobs == TOP_LOGPROBS  # the targets' own top-k (see TARGET_RATIO)
    for case in cases:
        runs = sorted(map(ingest_once, [case] * repeat), key=_ratio)
        got = runs[len(runs) // 2]
        per_token = got["cpu_s"] / got["tokens"] * 1e6
        floor = got["floor_s"] / got["tokens"] * 1e6
        rate = got["tokens"] / got["cpu_s"]
        print(
            f"{case.label:>31} {case.tokens:>7} {case.responses:>9} {min(case.concurrency, case.responses):>9}  "
            f"{per_token:>12.2f} {rate:>12,.0f}  {floor:>14.2f} {_ratio(got):>6.2f}x  {got['cpu_s'] / got['wall_s']:>4.0%} {got['replayed']:>8}  "
            f"{got['store'] / got['tokens']:>13.1f} {got['peak_kib'] / 1024:>12.0f}"
            + (f"  {_ratio(runs[0]):>11.2f}-{_ratio(runs[-1]):.2f}x" if repeat > 1 else ""),
            flush=True,
        )
        if "bare_s" in got:
            bare = got["bare_s"] / got["tokens"] * 1e6
            print(
                f"{'':>31} a bare reader of the same server, each event as it comes (bench/bare_reader.py): "
                f"{bare:.2f} us/token; the suite {got['cpu_s'] / got['bare_s']:.2f}x that",
                flush=True,
            )
        if judged and short_of_target(got):
            missed.append(f"{case.label}, {case.tokens} tokens ({_ratio(got):.2f}x, {rate:,.0f} tokens/CPU s)")
    if left_out:
        print(left_out)
    if not judged:
        print(f"{TARGET}, set for top-{TOP_LOGPROBS} logprobs): not judged at top-{load.top_logprobs}")
        return
    print(target_line(missed, len(cases)))


def target_line(missed: list[str], rows: int) -> str:
    """The closing line: how many of the rows met the target, and which did not (each as `missed` says it)."""
    return f"{TARGET}): met by {rows - len(missed)} of {rows} rows" + (
        f"; not by {', '.join(missed)}" if missed else ""
    )


def short_of_target(run: dict[str, Any]) -> bool:
    """Whether a run's client CPU is over TARGET_RATIO times its floor's, or under TARGET_RATE tokens a CPU second."""
    return _ratio(run) > TARGET_RATIO or run["tokens"] / run["cpu_s"] < TARGET_RATE


def _ratio(run: dict[str, Any]) -> float:
    """A run's client CPU over its parse floor's."""
    return float(run["cpu_s"] / run["floor_s"])


def store_bytes(folder: Path) -> int:
    """What a closed run's files take (its lock file, held only while it is written, left out)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and p.suffix != ".lock")


def ingest_once(case: Case) -> dict[str, Any]:
    """One run of a row: a fresh server, a fresh client process."""
    server, url = start_server(case.tokens, case.legacy, case.pace_s, REPLAY_MIB if case.replay else 0, case.recorded)
    try:
        with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
            return run_child(case, url, Path(tmp))
    finally:
        server.terminate()
        server.wait()


SECTIONS: dict[str, Callable[[bool, int, Workload], None]] = {"ingest": ingest}
"""Each section prints its own table; `--sections` picks some (default: all, in this order)."""


def positive(text: str) -> int:
    """A positive whole number, for --repeat (argparse names the option when this raises)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def positives(text: str) -> tuple[int, ...]:
    """Comma-separated positive whole numbers, for --lengths and --concurrency."""
    try:
        return tuple(map(positive, text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of positive whole numbers") from None


def top_k(text: str) -> int:
    """0-20, as the config allows, for --top-logprobs."""
    if not text.isdigit() or int(text) > 20:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 0 to 20")
    return int(text)


def row_groups(text: str) -> tuple[str, ...]:
    """Comma-separated groups of ROWS, for --rows."""
    groups = tuple(text.split(","))
    if not set(groups) <= set(ROWS):
        raise argparse.ArgumentTypeError(f"{text!r} names no group of rows; known: {', '.join(ROWS)}")
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the full sizes (also SCALE=full)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    parser.add_argument(
        "--repeat",
        type=positive,
        default=3,
        metavar="N",
        help="run each row N times and show the median run (default 3: one run can be half again the next)",
    )
    parser.add_argument(
        "--lengths",
        type=positives,
        default=LENGTHS,
        metavar="N,N",
        help=f"the grid's answer lengths in tokens (default {','.join(map(str, LENGTHS))})",
    )
    parser.add_argument(
        "--concurrency",
        type=positives,
        default=CONCURRENCY,
        metavar="N,N",
        help=f"the grid's requests in flight (default {','.join(map(str, CONCURRENCY))})",
    )
    parser.add_argument(
        "--top-logprobs",
        type=top_k,
        default=TOP_LOGPROBS,
        metavar="K",
        help=f"alternatives a token, 0-20 (default {TOP_LOGPROBS})",
    )
    parser.add_argument(
        "--rows",
        type=row_groups,
        default=ROWS,
        metavar="G,G",
        help=f"groups of ingest rows, of {', '.join(ROWS)} (default all)",
    )
    parser.add_argument(
        "--no-replay",
        dest="replay",
        action="store_false",
        help="the server renders every answer, a few times slower than the client reads it: the client waits for each",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    full = args.full or os.environ.get("SCALE") == "full"
    for name in args.sections.split(","):
        if name not in SECTIONS:
            parser.error(f"unknown section {name!r}; known: {', '.join(SECTIONS)}")
        SECTIONS[name](
            full, args.repeat, Workload(args.lengths, args.concurrency, args.top_logprobs, args.rows, args.replay)
        )


if __name__ == "__main__":
    main()
