"""Real run stores on disk for report, speed and gate tests: synthetic pairs and the H200 recordings.

`synthetic_runs` writes a baseline, a speculative candidate and optionally a
control through the run store's own writer, with llama.cpp-shaped
token traces (accepted draft tokens carry no alternatives), timings with draft
counts, grades, prompts and strata.  Divergences are placed by hand: at a
near-tie (the candidate takes the baseline's second choice, margin 0.03 nats)
or where the baseline was confident (margin 3 nats).
"""

from __future__ import annotations

import gzip
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from projects import recordings_dir

from evalsuite.engines.parse import completion_from_chat
from evalsuite.records import Completion, Grade, Sample, SampleResult, TokenTrace
from evalsuite.store import MANIFEST_VERSION, RunStore, open_run

SUBJECTS = ("Algebra", "Geometry", "Number Theory")
K = 5


def manifest(target: str, role: str, task: str = "math500", **server: Any) -> dict[str, Any]:
    """A manifest shaped like the runner's, comparable across targets (same model, params, dataset)."""
    fields = {
        "suite_version": "0.1.0",
        "target": target,
        "endpoint": {"rig": target, "server_args": ["-m", "target.gguf", *server.get("args", [])]},
        "server": {"model": "tiny-llama", "model_meta": {"n_params": 1000}, "build_info": server.get("build", "b1")},
        "engine": {"dialect": "llamacpp", "api": "chat", "extra": {}},
        "task": task,
        "prompt_template": "tmpl0001",
        "params": {"max_tokens": 256, "temperature": 0.0, "top_k": 1, "seed": 42, "top_logprobs": K},
        "dataset": {"name": task, "revision": "sha256:feedbeef", "rows": "0-39"},
    }
    return {
        "fingerprint": f"fp-{target}-{task}-{role}",
        "fingerprint_fields": fields,
        "target": target,
        "task": task,
        "schema_version": MANIFEST_VERSION,
        "created_at": 1_760_000_000.0,
        "suite_version": "0.1.0",
        "server_args": fields["endpoint"]["server_args"],
        "probe": {"model": "tiny-llama", "build_info": server.get("build", "b1")},
        "host": {"python": "3.11", "platform": "linux"},
    }


def _trace(ids: np.ndarray, top_ids: np.ndarray, top_lp: np.ndarray, has_top: np.ndarray) -> TokenTrace:
    top_lp = np.where(has_top[:, None], top_lp, np.nan).astype(np.float32)
    pieces = [f" w{i}" for i in ids.tolist()]
    return TokenTrace(
        ids=ids.astype(np.int64),
        pieces=pieces,
        raw=[p.encode() for p in pieces],
        logprobs=np.where(has_top, top_lp[:, 0], np.nan).astype(np.float32),
        top_ids=np.where(has_top[:, None], top_ids, -1).astype(np.int64),
        top_logprobs=top_lp,
        top_pieces=[[f" w{j}" for j in row] if h else [] for row, h in zip(top_ids.tolist(), has_top.tolist())],
    )


@dataclass
class Plan:
    """What to put in the synthetic runs."""

    n: int = 40
    tokens: int = 60
    task: str = "math500"
    numerical: set[int] = field(default_factory=set)
    confident: set[int] = field(default_factory=set)
    flips: set[int] = field(default_factory=set)
    control_diverges: set[int] = field(default_factory=set)
    truncated: set[int] = field(default_factory=set)
    speedup: float = 1.8
    seed: int = 0


def _arm_tokens(plan: Plan, i: int, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], int]:
    n = plan.tokens
    ids = rng.integers(100, 30_000, n)
    top_ids = np.stack([ids] + [rng.integers(100, 30_000, n) for _ in range(K - 1)], axis=1)
    gaps = np.cumsum(np.full((n, K), 3.0), axis=1) - 3.0
    top_lp = -0.05 - gaps
    pos = 10 + (i * 7) % (n - 20)
    top_lp[pos, 1] = top_lp[pos, 0] - (0.03 if i in plan.numerical or i in plan.control_diverges else 3.0)
    return {"ids": ids, "top_ids": top_ids, "top_lp": top_lp}, pos


def _completion(trace: TokenTrace, *, finish: str, tps: float, draft: tuple[int, int] | None) -> Completion:
    n = len(trace)
    timings = {
        "prompt_n": 40.0,
        "prompt_ms": 20.0,
        "predicted_n": float(n),
        "predicted_ms": 1000.0 * max(n - 1, 1) / tps,
    }
    if draft is not None:
        timings["draft_n"], timings["draft_n_accepted"] = float(draft[0]), float(draft[1])
    text = "".join(trace.pieces)
    return Completion(
        text=text,
        finish_reason=finish,
        tokens=trace,
        usage={"completion_tokens": n},
        timings=timings,
        latency_s=0.02 + n / tps,
        ttft_s=0.02,
    )


def write_run(
    folder: Path,
    man: dict[str, Any],
    results: list[SampleResult],
    grades: list[Grade],
    samples: list[Sample],
    sessions: list[dict[str, Any]] | None = None,
) -> RunStore:
    """Write one run folder through the store's own writer and return it reopened for reading."""
    store = RunStore.create(folder, man)
    store.write_samples(samples)
    writer = store.writer()
    for r in results:
        writer.put(r)
    writer.close()
    if grades:
        store.write_grades(grades, "test-grader", "1")
    for info in sessions or []:
        store.record_session(time.time(), len(results), len(results), "complete", info)
    store.close()
    return open_run(folder)


def synthetic_runs(root: Path, plan: Plan, *, control: bool = False) -> dict[str, RunStore]:
    """Baseline, candidate (and control) stores under root/<target>/<task>/<fp>; keys are the roles."""
    rng = np.random.default_rng(plan.seed)
    roles = {"baseline": "base", "candidate": "spec"} | ({"control": "ctl"} if control else {})
    results: dict[str, list[SampleResult]] = {r: [] for r in roles}
    grades: dict[str, list[Grade]] = {r: [] for r in roles}
    samples = []
    for i in range(plan.n):
        sid = f"{plan.task}-{i:04d}"
        strata = {"subject": SUBJECTS[i % len(SUBJECTS)], "level": str(1 + i % 3)}
        samples.append(
            Sample(sid, plan.task, ({"role": "user", "content": f"Problem {i}: what is {i} + 1?"},), f"{i + 1}", strata)
        )
        cols, pos = _arm_tokens(plan, i, rng)
        has_top = np.ones(plan.tokens, bool)
        base = _trace(cols["ids"], cols["top_ids"], cols["top_lp"], has_top)
        right = (i % 10) < 7
        answer = f"{i + 1}" if right else f"{i + 2}"
        finish = "length" if i in plan.truncated else "stop"
        results["baseline"].append(
            SampleResult(sid, plan.task, strata, _completion(base, finish=finish, tps=50.0, draft=None))
        )
        lenient = {"rule": "approximation"} if right and i % 20 == 0 else {}  # a few accepted by a lenient rule
        grades["baseline"].append(
            Grade(sid, "correct" if right else "incorrect", answer, "matched" if right else "mismatch", 1.0, lenient)
        )
        for role in [r for r in roles if r != "baseline"]:
            diverges = (
                (i in plan.numerical or i in plan.confident) if role == "candidate" else i in plan.control_diverges
            )
            ids, top_ids, top_lp = cols["ids"].copy(), cols["top_ids"].copy(), cols["top_lp"].copy()
            if diverges:
                ids[pos] = top_ids[pos, 1]
                ids[pos + 1 :] = rng.integers(100, 30_000, plan.tokens - pos - 1)
                top_ids[pos:, 0] = ids[pos:]
            cand_top = np.arange(plan.tokens) % 3 == 0  # tokens between were accepted drafts: no alternatives
            trace = _trace(ids, top_ids, top_lp, cand_top)
            flip = role == "candidate" and i in plan.flips
            ok = right != flip
            ans = answer if not flip else (f"{i + 1}" if ok else f"{i + 3}")
            drafted = plan.tokens
            comp = _completion(trace, finish=finish, tps=50.0 * plan.speedup, draft=(drafted, int(drafted * 0.75)))
            results[role].append(SampleResult(sid, plan.task, strata, comp))
            grades[role].append(Grade(sid, "correct" if ok else "incorrect", ans, "matched" if ok else "mismatch"))
    stores = {}
    for role, target in roles.items():
        man = manifest(target, role, plan.task, args=["-md", "draft.gguf"] if role != "baseline" else [])
        folder = root / target / plan.task / man["fingerprint"][:16]  # the runner's layout: runs/<target>/<task>/<fp>
        stores[role] = write_run(folder, man, results[role], grades[role], samples)
    return stores


def recording_store(root: Path, name: str, pass_: int = 0) -> RunStore:
    """One pass of a recorded llama-server file (24 GSM8K questions) as a run store on disk."""
    with gzip.open(recordings_dir() / f"{name}.json.gz", "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    results, samples, request = [], [], {}
    for entry in data["responses"]:
        if entry["pass"] != pass_:
            continue
        request = entry["request"]
        sid = f"gsm8k-test-{entry['index']}"
        msgs = tuple({"role": m["role"], "content": m["content"]} for m in request["messages"])
        samples.append(Sample(sid, "gsm8k", msgs, None, {}))
        results.append(SampleResult(sid, "gsm8k", {}, completion_from_chat(entry["response"])))
    man = manifest(data["config"], "candidate", "gsm8k", args=list(data["args"]))
    man["fingerprint_fields"]["params"] = {k: v for k, v in request.items() if k != "messages"}
    return write_run(root / f"{data['config']}-{pass_}", man, results, [], samples)
