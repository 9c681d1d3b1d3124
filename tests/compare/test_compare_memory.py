"""Compare and report hold one sample of each run at a time, never a whole run.

Four stored arms of 24 samples x 4,000 tokens with top-5 logprobs take about
28 MB as arrays when read whole; one sample of each takes about 1 MB. The
peak traced while comparing must stay near the second, and the report's
(rendering included) far below the first.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalsuite.compare import compare_roles
from evalsuite.records import Completion, Grade, SampleResult, TokenTrace
from evalsuite.report import write_reports
from evalsuite.store import RunManifest, RunStore, open_run

SAMPLES, TOKENS, K = 24, 4_000, 5
ROLES = {"baseline": "base", "repeat": "again", "control": "self", "candidate": "spec"}
COMPARE_LIMIT = 8 * 2**20
REPORT_LIMIT = 14 * 2**20


def _write(root: Path) -> None:
    rng = np.random.default_rng(0)
    fields = {"task": "t", "prompt_template": "p", "params": {}, "dataset": {}, "server": {"model": "m"}}
    writers, stores = {}, {}
    for role, name in ROLES.items():
        target = "base" if role == "repeat" else name
        manifest = RunManifest(
            fingerprint=name,
            target=target,
            task="t",
            fingerprint_fields={**fields, "target": target, **({"repeat": 1} if role == "repeat" else {})},
        )
        stores[role] = RunStore.create(root / name, manifest)
        writers[role] = stores[role].writer()
    for i in range(SAMPLES):
        ids = rng.integers(0, 32_000, TOKENS)
        top_ids = np.concatenate([ids[:, None], rng.integers(0, 32_000, (TOKENS, K - 1))], axis=1)
        top_lp = np.sort(-rng.exponential(2.0, (TOKENS, K)).astype(np.float32), axis=1)[:, ::-1].copy()
        for role in ROLES:
            arm = ids.copy()
            if role in ("candidate", "control") and i % 4 == 1:
                arm[TOKENS // 2 :] = top_ids[TOKENS // 2, 1]
            pieces = [f" w{t}" for t in arm.tolist()]
            trace = TokenTrace(
                arm, pieces, [p.encode() for p in pieces], top_lp[:, 0].copy(), top_ids, top_lp, [[" x"] * K] * TOKENS
            )
            writers[role].put(SampleResult(f"s{i:02d}", "t", {}, Completion("text", "length", trace)))
    for role, store in stores.items():
        writers[role].close()
        store.write_grades([Grade(f"s{i:02d}", "correct", "1", "r") for i in range(SAMPLES)], "g", "1")
        store.close()


class WholeRunRefused:
    """A stored run that refuses to be read whole: compare and report must read it one sample at a time."""

    def __init__(self, folder: Path):
        self.store = open_run(folder)

    def results(self, **_: Any) -> Any:
        raise AssertionError("a whole run was read")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("arms")
    _write(root)
    return root


def test_compare_and_report_read_each_run_one_sample_at_a_time(runs: Path, tmp_path: Path) -> None:
    stores = {role: WholeRunRefused(runs / name) for role, name in ROLES.items()}
    tracemalloc.start()
    try:
        comparison = compare_roles(stores, n_resamples=200)
        compare_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        write_reports([comparison], tmp_path / "report", runs={"t": stores})
        report_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(not d.identical for d in comparison.diffs) == SAMPLES // 4
    assert comparison.token.n == SAMPLES and len(comparison.controls) == 2
    assert compare_peak < COMPARE_LIMIT and report_peak < REPORT_LIMIT, (compare_peak, report_peak)


def test_reading_one_sample_at_a_time_compares_as_reading_whole_runs(runs: Path) -> None:
    """The same runs held in memory whole (MemoryRun) give the same comparison, to the byte."""
    from evalsuite.store import MemoryRun

    opened = {role: open_run(runs / name) for role, name in ROLES.items()}
    whole = {
        role: MemoryRun(run.manifest, run.results(strings="all"), run.grades(), folder=run.folder)
        for role, run in opened.items()
    }
    assert compare_roles(opened, n_resamples=200).to_json() == compare_roles(whole, n_resamples=200).to_json()
