"""Speed as part of a comparison: each run's tokens/s, the candidate's paired speedup, the repeat's noise floor.

`compare_runs` computes these once from the same results it diffs, so
`comparison.json` carries the speedup and a report only formats it.  The
repeat (the baseline run again) is the same arm: its paired speed ratio to
the baseline is how far speed moves on this machine with nothing changed, and
when that is beyond REPEAT_LIMIT the speed figures carry a warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalsuite.compare.roles import SHOWN_ORDER
from evalsuite.records import SampleResult
from evalsuite.speed import RequestSpeed, SpeedSummary, Speedup, paired_speedup, request_speed
from evalsuite.speed.robust import disagreement
from evalsuite.speed.summary import run_engine, summarize
from evalsuite.store.reader import RunReader

REPEAT_LIMIT = 1.10
"""Two runs of the same arm further apart than this in paired decode speed make speed figures untrustworthy."""


@dataclass(frozen=True)
class ComparisonSpeed:
    """Speed of every run in one comparison, by role, with the candidate's speedup over the baseline."""

    arms: dict[str, SpeedSummary]
    speedup: Speedup | None
    repeat_speedup: Speedup | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def timed(self) -> bool:
        """Whether any request of any run carried timing (in-memory runs without timings have none)."""
        return any(s.timed for s in self.arms.values())

    def __json__(self) -> dict[str, Any]:
        return {
            "speedup": self.speedup,
            "repeat_speedup": self.repeat_speedup,
            "warnings": self.warnings,
            "arms": {role: self.arms[role] for role in SHOWN_ORDER if role in self.arms},
        }


def repeat_warnings(repeat: Speedup | None) -> list[str]:
    """A sentence when the baseline and its repeat differ in decode speed by more than REPEAT_LIMIT."""
    if repeat is None:
        return []
    gap = disagreement(repeat.geometric_mean, 1.0)
    if not (math.isfinite(gap) and gap > REPEAT_LIMIT):
        return []
    return [
        f"The two runs of the baseline differ in decode speed by {repeat.geometric_mean:.2f}x (paired over "
        f"{repeat.n} samples): speed differences smaller than that are noise on this machine; measure speed on "
        f"its own with `evalsuite speed`."
    ]


def comparison_speed(
    runs: Mapping[str, RunReader], results: Mapping[str, Mapping[str, SampleResult]], *, seed: int = 0
) -> ComparisonSpeed:
    """Speed by role from the results a comparison already loaded; `runs` (role -> run) gives targets and sessions.

    The sessions carry the engine counters read before and after each one,
    which is where vLLM's acceptance comes from (it reports none per request).
    """
    requests = {
        role: {sid: request_speed(sid, r.completion) for sid, r in arm.items()} for role, arm in results.items()
    }
    return speed_of_requests(runs, requests, seed=seed)


def speed_of_requests(
    runs: Mapping[str, RunReader], requests: Mapping[str, Mapping[str, RequestSpeed]], *, seed: int = 0
) -> ComparisonSpeed:
    """`comparison_speed` from each run's per-request speeds (role -> sample id -> speed, in the run's order),
    which a comparison measures while it reads each sample once."""
    arms: dict[str, SpeedSummary] = {}
    for role in SHOWN_ORDER:
        if role not in requests:
            continue
        run = runs[role]
        arms[role] = summarize(run.manifest.target, dict(requests[role]), run.sessions(), run_engine(run.manifest))
    speedup = repeat = None
    if {"candidate", "baseline"} <= arms.keys():
        speedup = paired_speedup(arms["candidate"], arms["baseline"], seed=seed)
    if {"repeat", "baseline"} <= arms.keys():
        repeat = paired_speedup(arms["repeat"], arms["baseline"], seed=seed)
    warnings = [w for s in arms.values() for w in s.warnings] + (speedup.warnings if speedup is not None else [])
    return ComparisonSpeed(arms, speedup, repeat, warnings + repeat_warnings(repeat))
