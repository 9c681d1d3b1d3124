"""Soak: one long run at concurrency 64 with every fault at once, checked for loss, duplicates and memory.

Against the scripted server (a separate process, `fixtures/fake_server.py`), streaming, with each of these
fault kinds hitting a few percent of all requests: 429 with Retry-After, 500, 503, connections reset,
bodies dripped past the timeout, malformed JSON, oversized bodies, gzip bombs, error events inside 200
streams and streams cut short.  Meanwhile the client (`python -m evalsuite run`) is killed with SIGKILL at
random moments and resumed, the server is killed and started again on the same port (same model, same
fingerprint), and the run's disk fills up once (a small tmpfs in a private mount namespace, filled with
a ballast file): the client must exit 4, a resume while the disk is still full must exit 4 without
asking for anything, and a resume after the ballast is removed carries on.

It checks, and exits 1 when any check fails:
  - every sample is stored exactly once, with the tokens and text the server sent;
  - no client session asked for a sample an earlier session had stored, and none asked for one sample
    more often than its retry policy allows (max_retries + 1);
  - every client exit is the one its event calls for (-9 killed, 4 disk full, 0 done);
  - the client's memory is bounded: in the reference run (one uninterrupted session, no faults), RSS at
    the end is within max(16 MB, 15 %) of RSS at a quarter; no faulted session's RSS exceeds the
    reference's peak by more than the responses in flight may hold (concurrency x max_response_mb: the
    oversized bodies and gzip bombs are read up to that limit, and the heap keeps their high-water mark);
    and the longest faulted session, past its warm-up (its first WARM_UP samples, or the first quarter of
    the run when that is shorter: the reference is judged flat from there), ends within max(16 MB, 15 %)
    of its RSS at a quarter of the rest.  A judgement needs at least MIN_READINGS readings; fewer fail it;
  - the disk-full episode ran: where the system lets no process mount a small filesystem of its own, the
    verdict line says "not measured" and the bench exits 1, unless told to skip it (`--skip-disk`, or
    SOAK_SKIP_DISK=1);
and prints, with the wall time of the same run with no faults measured in the same invocation as reference.

    python bench/soak.py            # short mode (make bench, CI): 2,000 requests, under a minute on two cores
    python bench/soak.py --full     # 20,000 requests (SOAK=full make bench)
    python bench/soak.py --skip-disk  # pass without the disk-full episode where it cannot run (SOAK_SKIP_DISK=1)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures"))
sys.path.insert(0, str(ROOT / "tests"))

from fake_server import fake_answer  # noqa: E402
from projects import make_project, prompt_key  # noqa: E402
from small_disk import fill, mount_namespace, mount_tmpfs  # noqa: E402

TOKENS = 16
MAX_RETRIES = 8
RATE = 0.01  # of all requests, for each fault kind
FAULTS = [
    {"kind": "429", "retry_after": 0.2},
    {"kind": "500"},
    {"kind": "503"},
    {"kind": "drop"},
    {"kind": "drip", "delay_s": 0.002},  # ~5 KB a byte at a time: far past timeout_s
    {"kind": "malformed"},
    {"kind": "oversize", "size": 1_500_000},  # over max_response_mb = 1
    {"kind": "gzip_bomb", "size": 3_000_000},
    {"kind": "stream_error", "after": 3},
    {"kind": "stream_cut", "after": 3},
]
CONCURRENCY, MAX_RESPONSE_MB = 64, 1
TARGET = (
    f"concurrency = {CONCURRENCY}\nmax_retries = {MAX_RETRIES}\ntimeout_s = 3.0\nstream = true\n"
    f"max_response_mb = {MAX_RESPONSE_MB}"
)
WARM_UP = 1_500
"""Samples after which a client's RSS stops growing at this concurrency (measured: 12,000-sample runs)."""
MIN_READINGS = 8
"""RSS readings (one every 50 ms) below which a session's memory is not judged, and the bench fails."""
INSIDE = "EVALSUITE_SOAK_NAMESPACE"


class Server:
    """The scripted server as its own process, restartable on the same port."""

    def __init__(self, seed: int):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.seed = seed
        self.faults: list[dict] = []
        self.hits: Counter = Counter()
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [sys.executable, str(ROOT / "fixtures" / "fake_server.py"), "--port", str(self.port)]
        for _ in range(50):  # the port may linger a moment after a kill
            self.proc = subprocess.Popen([*cmd, "--tokens", str(TOKENS)], stdout=subprocess.PIPE, text=True)
            assert self.proc.stdout is not None
            if self.proc.stdout.readline().startswith("ready"):
                self.script(self.faults, seed=self.seed)
                return
            self.proc.wait()
            time.sleep(0.1)
        raise RuntimeError("the scripted server did not start")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def _post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(self.url + path, json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def script(self, faults: list[dict], seed: int | None = None) -> None:
        self.faults = faults
        spec: dict = {"faults": faults, "reset": True}
        if seed is not None:
            spec["seed"] = seed
        self._post("/script", spec)

    def harvest(self) -> Counter:
        """Requests per prompt since the last harvest (faults sent, by kind, are added to `self.hits`)."""
        with urllib.request.urlopen(self.url + "/stats", timeout=30) as resp:
            stats = json.loads(resp.read())
        self.hits.update(stats["faults"])
        self.script(self.faults)
        return Counter(stats["requests"])


def stored_count(db: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return -1


def stored_ids(db: Path) -> set[str]:
    if not db.exists():
        return set()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return {r[0] for r in conn.execute("SELECT sample_id FROM results")}
    finally:
        conn.close()


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


@dataclass
class Session:
    event: str  # what ends it: kill, disk_full, still_full, done
    rc: int | None = None
    stderr: str = ""
    asked: Counter = field(default_factory=Counter)
    stored_before: set[str] = field(default_factory=set)
    rss: list[tuple[int, float]] = field(default_factory=list)  # (stored, MB)
    wall_s: float = 0.0


def client(config: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "evalsuite", "run", "base", "--config", str(config), "--no-grade", "-q"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log.open("w"), env=env)


def watch(proc: subprocess.Popen, db: Path, session: Session, until: int | None, timeout: float) -> None:
    """Sample RSS and progress until the client exits or `until` results are stored (then return, still running)."""
    deadline = time.time() + timeout
    while proc.poll() is None and time.time() < deadline:
        count = stored_count(db)
        mb = rss_mb(proc.pid)
        if mb is not None and count >= 0:
            session.rss.append((count, mb))
        if until is not None and count >= until:
            return
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"a client session ran past {timeout:.0f} s")


def run_reference(folder: Path, server: Server, n: int) -> Session:
    server.script([])
    config = make_project(folder, server.url + "/v1", n=n, target_extra=TARGET)
    session = Session("done")
    proc = client(config, folder / "client.log")
    started = time.perf_counter()
    db = next_db(folder / "runs", proc)
    watch(proc, db, session, None, 600)
    session.wall_s = time.perf_counter() - started
    session.rc = proc.returncode
    session.stderr = (folder / "client.log").read_text()
    session.asked = server.harvest()
    return session


def next_db(runs: Path, proc: subprocess.Popen) -> Path:
    """The run database the client creates (one target, one task, one fingerprint)."""
    while True:
        found = list(runs.glob("base/echo/*/records.sqlite"))
        if found:
            return found[0]
        if proc.poll() is not None:
            return runs / "missing.sqlite"
        time.sleep(0.02)


def plan_events(rng: random.Random, n: int, kills: int) -> list[tuple[int, str]]:
    """Stored-sample counts at which things go wrong: SIGKILLs spread over the run, one server restart, one full disk."""
    events = [(rng.uniform(0.3, 0.4), "restart"), (rng.uniform(0.55, 0.65), "disk_full")]
    for k in range(kills):
        lo, hi = 0.05 + 0.85 * k / kills, 0.05 + 0.85 * (k + 1) / kills
        events.append((rng.uniform(lo, hi - 0.02), "kill"))
    return sorted((int(at * n), what) for at, what in events)


def run_faulted(folder: Path, server: Server, n: int, kills: int, rng: random.Random, disk: bool) -> list[Session]:
    config = make_project(folder, server.url + "/v1", n=n, target_extra=TARGET)
    runs = folder / "runs"
    if disk:
        mount_tmpfs(runs, f"{max(64, n // 100)}m")
    server.script([{**f, "times": -1, "rate": RATE} for f in FAULTS])
    events = plan_events(rng, n, kills)
    if not disk:
        events = [e for e in events if e[1] != "disk_full"]
    sessions: list[Session] = []
    db = runs / "missing.sqlite"
    while True:
        session = Session("done")
        session.stored_before = stored_ids(db)
        sessions.append(session)
        log = folder / f"client{len(sessions)}.log"
        proc = client(config, log)
        started = time.perf_counter()
        db = next_db(runs, proc)
        while events and proc.poll() is None:
            at, what = events[0]
            watch(proc, db, session, at, 900)
            if proc.poll() is not None:
                break
            events.pop(0)
            log_event(what, at, db)
            if what == "restart":
                session.asked += server.harvest()
                server.kill()
                server.start()
                continue
            if what == "kill":
                time.sleep(rng.uniform(0, 0.2))  # not on a commit boundary
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                session.event = "kill"
                break
            ballast = fill(runs)
            session.event = "disk_full"
            watch(proc, db, session, None, 120)
            session.rc, session.wall_s, session.stderr = proc.returncode, time.perf_counter() - started, log.read_text()
            session.asked += server.harvest()
            still = Session("still_full", stored_before=stored_ids(db))
            sessions.append(still)
            again = client(config, folder / "client-still-full.log")
            watch(again, db, still, None, 120)
            still.rc, still.stderr = again.returncode, (folder / "client-still-full.log").read_text()
            still.asked = server.harvest()
            ballast.unlink()
            break
        if session.event != "disk_full":
            watch(proc, db, session, None, 900)
            session.rc, session.wall_s, session.stderr = proc.returncode, time.perf_counter() - started, log.read_text()
            session.asked += server.harvest()
        if session.event == "done" or (session.rc not in (-signal.SIGKILL, 4)):
            return sessions


EVENTS: list[str] = []


def log_event(what: str, at: int, db: Path) -> None:
    EVENTS.append(f"{what} at {max(at, stored_count(db)):,}")


def flat(rss: list[tuple[int, float]]) -> tuple[bool | None, float, float]:
    """(flat? None when there are too few readings to judge, RSS at a quarter of the session's samples, at its end)."""
    if len(rss) < MIN_READINGS:
        return None, float("nan"), float("nan")
    first, last = rss[0][0], rss[-1][0]
    quarter = next(mb for count, mb in rss if count >= first + (last - first) / 4)
    end = max(mb for _, mb in rss[-max(1, len(rss) // 10) :])
    return end - quarter <= max(16.0, 0.15 * quarter), quarter, end


def past_warm_up(rss: list[tuple[int, float]], warm_up: int) -> list[tuple[int, float]]:
    """The readings taken after the session's first `warm_up` stored samples."""
    return [(count, mb) for count, mb in rss if count >= rss[0][0] + warm_up] if rss else []


def check(n: int, ref: Session, sessions: list[Session], db: Path, disk: bool) -> tuple[list[str], dict]:
    failures: list[str] = []
    keys = {prompt_key(i): f"q{i:04d}" for i in range(n)}
    if ref.rc != 0:
        failures.append(f"the reference run exited {ref.rc}: {ref.stderr[-500:]}")
    expected = {"kill": -signal.SIGKILL, "disk_full": 4, "still_full": 4, "done": 0}
    for s in sessions:
        if s.rc != expected[s.event]:
            failures.append(f"a session ended by {s.event} exited {s.rc}, not {expected[s.event]}: {s.stderr[-800:]}")
        if s.event in ("disk_full", "still_full") and "the disk is full" not in s.stderr:
            failures.append(f"the {s.event} session did not say the disk is full: {s.stderr[-500:]}")
        again = {keys.get(k) for k in s.asked} & s.stored_before
        if again:
            failures.append(f"{len(again)} samples stored by an earlier session were asked again, e.g. {min(again)}")
        worst = max(s.asked.values(), default=0)
        if worst > MAX_RETRIES + 1:
            failures.append(f"a sample was asked {worst} times in one session; the policy allows {MAX_RETRIES + 1}")
    still = [s for s in sessions if s.event == "still_full"]
    if still and sum(still[0].asked.values()):
        failures.append(f"the resume on a full disk asked for {sum(still[0].asked.values())} samples")
    if disk and not still:
        failures.append("the disk-full episode did not happen")

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    layout2 = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'tokens'").fetchone() is not None
    token_ids = "t.ids FROM results r LEFT JOIN tokens t USING (sample_id)" if layout2 else "r.ids FROM results r"
    rows = conn.execute(f"SELECT r.sample_id, r.text, {token_ids}").fetchall()
    distinct = conn.execute("SELECT COUNT(DISTINCT sample_id) FROM results").fetchone()[0]
    conn.close()
    import numpy as np

    intact = 0
    for sid, text, ids in rows:
        i = int(sid[1:])
        answer = fake_answer(f"You are terse.\nQuestion q{i:04d}: what is {i}+1?", TOKENS)
        if text == "".join(p for _, p, _ in answer) and np.frombuffer(ids, "<i4").tolist() == [t for t, _, _ in answer]:
            intact += 1
    ids_stored = {r[0] for r in rows}
    if len(rows) != n or distinct != n or ids_stored != set(keys.values()):
        failures.append(f"{len(rows)} results ({distinct} distinct) stored for {n} samples")
    if intact != len(rows):
        failures.append(f"{len(rows) - intact} stored results differ from what the server sent")

    total = Counter[str]()
    for s in sessions:
        total.update(s.asked)
    ref_flat = flat(ref.rss)
    longest = max(sessions, key=lambda s: len(s.rss))
    warm_up = min(WARM_UP, n // 4)
    run_flat = flat(past_warm_up(longest.rss, warm_up))
    peak_ref = max((mb for _, mb in ref.rss), default=float("nan"))
    peak_run = max((mb for s in sessions for _, mb in s.rss), default=float("nan"))
    if peak_run > peak_ref + CONCURRENCY * MAX_RESPONSE_MB:
        failures.append(
            f"RSS in a faulted session reached {peak_run:.0f} MB, past the reference's peak {peak_ref:.0f} MB plus "
            f"what the responses in flight may hold ({CONCURRENCY} x {MAX_RESPONSE_MB} MB)"
        )
    if ref_flat[0] is None:
        failures.append(f"the reference run's memory was not judged: {len(ref.rss)} readings, {MIN_READINGS} needed")
    elif not ref_flat[0]:
        failures.append(
            f"RSS grew in the reference run: {ref_flat[1]:.0f} MB at a quarter, {ref_flat[2]:.0f} MB at the end"
        )
    if run_flat[0] is None:
        failures.append(
            f"the longest faulted session's memory was not judged: {len(past_warm_up(longest.rss, warm_up))} "
            f"readings past its first {warm_up:,} samples, {MIN_READINGS} needed"
        )
    elif not run_flat[0]:
        failures.append(
            f"RSS grew in the longest faulted session past its warm-up: {run_flat[1]:.0f} MB at a quarter, "
            f"{run_flat[2]:.0f} MB at the end"
        )
    figures = {
        "stored": len(rows),
        "distinct": distinct,
        "intact": intact,
        "requests": sum(total.values()),
        "per_sample": sum(total.values()) / n,
        "max_per_session": max((max(s.asked.values(), default=0) for s in sessions), default=0),
        "exits": [s.rc for s in sessions],
        "events": [s.event for s in sessions],
        "ref_rss": ref_flat,
        "run_rss": run_flat,
        "peak_ref": peak_ref,
        "peak_run": peak_run,
        "longest": len(longest.rss) and longest.rss[-1][0] - longest.rss[0][0],
        "warm_up": warm_up,
    }
    return failures, figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="20,000 requests (default: the short mode, 2,000)")
    parser.add_argument("--samples", type=int, help="override the number of samples")
    parser.add_argument("--kills", type=int, help="SIGKILLs of the client (default: 2 short, 5 full)")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", "1")))
    parser.add_argument(
        "--skip-disk",
        action="store_true",
        default=os.environ.get("SOAK_SKIP_DISK") == "1",
        help="pass without the disk-full episode where the system cannot run it (default: fail; SOAK_SKIP_DISK=1)",
    )
    args = parser.parse_args()
    full = args.full or os.environ.get("SOAK") == "full"
    if os.environ.get(INSIDE) is None:  # a private mount namespace, where the run's disk can be a small tmpfs
        prefix = mount_namespace()
        os.environ[INSIDE] = "1" if prefix else "0"
        if prefix:
            sys.stdout.flush()
            os.execvp(prefix[0], [*prefix, sys.executable, *sys.argv])
    disk = os.environ.get(INSIDE) == "1"
    n = args.samples or (20_000 if full else 2_000)
    kills = args.kills if args.kills is not None else (5 if full else 2)
    rng = random.Random(args.seed)
    kinds = ", ".join(f["kind"] for f in FAULTS)
    print(
        f"soak ({'full' if full else 'short'}): {n:,} samples, concurrency 64, streaming, {RATE:.0%} of requests "
        f"each: {kinds}; {kills} SIGKILLs, 1 server restart, {'1 full disk' if disk else 'no full disk'}; seed {args.seed}"
    )
    if not disk:
        print("  (no disk-full episode: this system lets no process mount a small filesystem of its own)")
    server = Server(args.seed)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            ref = run_reference(Path(tmp) / "reference", server, n)
            ref_wall = time.perf_counter() - started
            started = time.perf_counter()
            sessions = run_faulted(Path(tmp) / "faulted", server, n, kills, rng, disk)
            wall = time.perf_counter() - started
            runs = Path(tmp) / "faulted" / "runs"
            try:
                failures, f = check(n, ref, sessions, next(iter(runs.glob("base/echo/*/records.sqlite"))), disk)
            finally:
                if disk:
                    subprocess.run(["umount", str(runs)], check=False)
    finally:
        server.kill()
    print(f"  samples stored once each: {f['distinct']:,}/{n:,}; as the server sent them: {f['intact']:,}")
    print(
        f"  requests: {f['requests']:,} ({f['per_sample']:.2f} per sample); most for one sample in one session: "
        f"{f['max_per_session']} (the policy allows {MAX_RETRIES + 1})"
    )
    print(
        f"  client sessions: {len(sessions)}, ended by {', '.join(f'{e} ({rc})' for e, rc in zip(f['events'], f['exits']))}"
    )
    print(
        f"  client RSS: reference peak {f['peak_ref']:.0f} MB ({f['ref_rss'][1]:.0f} MB at a quarter, "
        f"{f['ref_rss'][2]:.0f} MB at the end); faulted peak {f['peak_run']:.0f} MB, longest session "
        f"({f['longest']:,} samples) "
        + (
            f"past its first {f['warm_up']:,} samples {f['run_rss'][1]:.0f} -> {f['run_rss'][2]:.0f} MB"
            if f["run_rss"][0] is not None
            else f"too short to judge past its first {f['warm_up']:,} samples"
        )
    )
    print(f"  wall: {wall:.1f} s with faults vs {ref_wall:.1f} s for the same run without ({wall / ref_wall:.2f}x)")
    print(f"  events (stored samples when each happened): {'; '.join(EVENTS)}")
    hits = ", ".join(f"{kind} {server.hits[kind]}" for kind in [f["kind"] for f in FAULTS])
    print(f"  faults sent: {sum(server.hits.values()):,} ({hits})")
    missing = [f["kind"] for f in FAULTS if not server.hits[f["kind"]]]
    if missing:
        failures.append(f"fault kinds never sent: {', '.join(missing)}")
    if not disk and not args.skip_disk:
        failures.append("the disk-full episode was not measured (--skip-disk or SOAK_SKIP_DISK=1 to pass without it)")
    for failure in failures:
        print(f"  FAILED: {failure}")
    print(verdict(failures, disk))
    return 1 if failures else 0


def verdict(failures: list[str], disk: bool) -> str:
    """The closing line: PASS or the number of failed checks, saying when the disk-full episode was not run."""
    line = "  PASS" if not failures else f"  {len(failures)} check(s) failed"
    return line if disk else f"{line}; disk-full episode not measured"


if __name__ == "__main__":
    sys.exit(main())
