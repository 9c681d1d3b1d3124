"""One leaderboard row per configuration: its verdict, accuracy change, speedup, drafting and memory, and the ranking.

A row is built from what the other stages already computed: the candidate's
comparisons with the shared baseline (one per task, `compare.Comparison`)
and its speed run's summary (`speedrun.analyze`).  Tasks combine as follows:

- verdict: the worst token verdict of its tasks (LOSSY, then UNDETERMINED,
  then NUMERICAL-ONLY, then IDENTICAL);
- accuracy: DIFFERENT if any task's accuracy is, EQUIVALENT if every task's
  is, else INCONCLUSIVE; `accuracy_delta` is the candidate's accuracy minus
  the baseline's over every graded sample of every task (a proportion);
- speedup: the speed run's overall figure (the decode speedup over every pair
  measured at concurrency 1, with its 95 % interval), acceptance and tau over
  the same requests.

Only lossless rows (IDENTICAL or NUMERICAL-ONLY) whose accuracy is not
DIFFERENT and whose speedup was measured are ranked, fastest first; the
others are listed apart with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from evalsuite.verdict.token import LOSSLESS_LABELS

if TYPE_CHECKING:
    from evalsuite.compare import Comparison

TOKEN_ORDER = ("LOSSY", "UNDETERMINED", "NUMERICAL-ONLY", "IDENTICAL")
BASELINE = "BASELINE"
NAN = math.nan


@dataclass
class Row:
    """One configuration on the leaderboard (proportions as fractions, memory in MiB; NaN: not measured)."""

    target: str
    verdict: str
    accuracy: str = ""
    accuracy_delta: float = NAN
    baseline_accuracy: float = NAN
    candidate_accuracy: float = NAN
    samples: int = 0
    speedup: float = NAN
    speedup_low: float = NAN
    speedup_high: float = NAN
    pairs: int = 0
    acceptance: float = NAN
    tau: float = NAN
    peak_memory_mb: float = NAN
    gpu_memory_mb: float = NAN
    session: str = ""
    grid: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, str] = field(default_factory=dict)
    speed: dict[str, Any] = field(default_factory=dict, repr=False)
    """The speed run's summary the speed figures come from (plots read its per-length speedups)."""
    rank: int | None = None
    folder: str = ""
    """Where its own reports are, relative to the leaderboard's folder."""

    @property
    def baseline(self) -> bool:
        return self.verdict == BASELINE

    def __json__(self) -> dict[str, Any]:
        """Every field but the speed summary (it has its own file), with why it is not ranked."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "speed"}
        return {**out, "not_ranked": self.unranked_reason()}

    def unranked_reason(self) -> str | None:
        """Why a candidate is kept out of the ranking (None: it is ranked, or it is the baseline)."""
        if self.baseline:
            return None
        if self.verdict not in LOSSLESS_LABELS:
            return self.verdict
        if self.accuracy == "DIFFERENT":
            return "accuracy DIFFERENT"
        if not math.isfinite(self.speedup):
            return "speed not measured"
        return None


def _worst(labels: Sequence[str]) -> str:
    return min(labels, key=TOKEN_ORDER.index) if labels else "UNDETERMINED"


def _accuracy(labels: Sequence[str]) -> str:
    if not labels:
        return ""
    if "DIFFERENT" in labels:
        return "DIFFERENT"
    return "EQUIVALENT" if all(a == "EQUIVALENT" for a in labels) else "INCONCLUSIVE"


def _f(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and value is not None else NAN


def speed_fields(summary: dict[str, Any] | None, role: str) -> dict[str, Any]:
    """The row's speed and memory figures from a speed summary (for `role`'s server)."""
    if not summary:
        return {}
    server = summary.get("servers", {}).get(role, {})
    out: dict[str, Any] = {
        "peak_memory_mb": _f(server.get("peak_memory_mb")),
        "gpu_memory_mb": _f(server.get("gpu_memory_mb")),
    }
    if role == "baseline":
        return out
    overall = summary.get("overall") or {}
    decode = overall.get("decode") or {}
    parting = (summary.get("session") or {}).get("parting") or []
    return {
        **out,
        "speedup": _f(decode.get("geometric_mean")),
        "speedup_low": _f(decode.get("low95")),
        "speedup_high": _f(decode.get("high95")),
        "pairs": int(decode.get("n") or 0),
        "acceptance": _f(overall.get("acceptance")),
        "tau": _f(overall.get("mean_accepted_length")),
        "session": session_text(parting),
        "speed": summary,
    }


def session_text(parting: Sequence[dict[str, Any]]) -> str:
    """`identical, 6 turns` or `part at turn 3` (the earliest over repetitions), '' without a session."""
    if not parting:
        return ""
    turns = [p["turn"] for p in parting if p["turn"] is not None]
    return f"part at turn {min(turns)}" if turns else f"identical, {max(p['turns'] for p in parting)} turns"


def candidate_row(target: str, comparisons: Sequence[Comparison], speed: dict[str, Any] | None) -> Row:
    """A candidate's row from its comparisons (one per task) and its speed summary."""
    overall = [r for c in comparisons for r in c.overall()]
    n = sum(r.summary.n for r in overall)
    weigh = lambda get: sum(get(r) * r.summary.n for r in overall) / n if n else NAN  # noqa: E731
    return Row(
        target,
        _worst([c.token.label for c in comparisons]),
        accuracy=_accuracy([r.verdict.label for r in overall]),
        accuracy_delta=weigh(lambda r: r.summary.difference),
        baseline_accuracy=weigh(lambda r: r.summary.baseline.accuracy),
        candidate_accuracy=weigh(lambda r: r.summary.candidate.accuracy),
        samples=n,
        tasks={str(c.candidate.get("task")): c.summary for c in comparisons},
        **speed_fields(speed, "candidate"),
    )


def baseline_row(target: str, speeds: Sequence[dict[str, Any]]) -> Row:
    """The shared baseline as the reference row: speedup 1 by definition, its largest peak memory seen."""
    memory = [speed_fields(s, "baseline") for s in speeds]
    peak = max((m["peak_memory_mb"] for m in memory if math.isfinite(m["peak_memory_mb"])), default=NAN)
    gpu = max((m["gpu_memory_mb"] for m in memory if math.isfinite(m["gpu_memory_mb"])), default=NAN)
    return Row(target, BASELINE, speedup=1.0, peak_memory_mb=peak, gpu_memory_mb=gpu)


def rank(rows: Sequence[Row]) -> tuple[list[Row], list[Row]]:
    """(ranked rows fastest first with the baseline among them as the reference at 1.00x, the rows kept out)."""
    ranked = [r for r in rows if r.unranked_reason() is None]
    ranked.sort(key=lambda r: (-r.speedup if math.isfinite(r.speedup) else math.inf, r.baseline, r.target))
    place = 0
    for r in ranked:
        if not r.baseline:
            place += 1
            r.rank = place
    return ranked, [r for r in rows if r.unranked_reason() is not None]
