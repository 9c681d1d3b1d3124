"""What a report says, as plain data: one `TaskReport` per comparison, shared by Markdown and HTML.

Every figure comes from the `Comparison` (statistics, Holm family, speed) or
from the stored runs (texts, provenance); this module only formats them with
`evalsuite.report.fmt`, so both renderings print identical figures, the same
as `comparison.json`, and the templates only lay out.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalsuite.compare import Comparison, ComparisonSpeed
from evalsuite.compare.accuracy import OVERALL
from evalsuite.compare.roles import SHOWN_ORDER
from evalsuite.diff.classify import ControlProfile
from evalsuite.graders.cache import saved_sentence
from evalsuite.records import Grade, SampleResult
from evalsuite.report import fmt
from evalsuite.report.provenance import provenance, reproduce
from evalsuite.report.sandboxing import notes as sandbox_notes
from evalsuite.speed import SpeedSummary
from evalsuite.speed.measure import TOKENS_PER_S_DEFINITION
from evalsuite.store import RunManifest, RunReader
from evalsuite.store.reader import named_at

TTFT_MARK = "¹"
"""Marks a TTFT cell left empty; the note under the speed table says why (`ttft_note`)."""
_TOKEN_TONE = {"IDENTICAL": "good", "NUMERICAL-ONLY": "good", "LOSSY": "bad", "UNDETERMINED": "unsure"}
_ACC_TONE = {"EQUIVALENT": "good", "DIFFERENT": "bad", "INCONCLUSIVE": "unsure"}


class DetailResults(Mapping[str, SampleResult]):
    """The results a report shows in detail, read from their run one at a time when asked for, never kept.

    A report reads each divergent sample once (the viewer's entry), so it holds one sample's tokens at a
    time however long or many the outputs are.  Each is read with its chosen tokens' strings, and with
    its alternatives' strings only at the one token the viewer shows them (`positions`: sample id ->
    token index): all of them are five strings a token, most of the time a long output's read took.
    """

    def __init__(self, store: RunReader, ids: Iterable[str], positions: Mapping[str, int]):
        wanted = set(ids)
        self._store = store
        self._ids = sorted(wanted & set(store.result_ids())) if wanted else []
        self._positions = positions

    def __getitem__(self, sample_id: str) -> SampleResult:
        result = self._store.result(sample_id, strings="pieces") if sample_id in self._ids else None
        if result is None:
            raise KeyError(sample_id)
        named = named_at(self._store, sample_id, result.completion, self._positions.get(sample_id))
        return replace(result, completion=named)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


@dataclass
class Arm:
    """One stored run loaded for the report: results with token strings (read when shown), grades, prompts."""

    role: str
    manifest: RunManifest
    folder: str
    results: Mapping[str, SampleResult]
    grades: dict[str, Grade]
    samples: dict[str, Any]

    @staticmethod
    def load(
        role: str,
        store: RunReader,
        detail: set[str] | frozenset[str] = frozenset(),
        positions: Mapping[str, int] | None = None,
    ) -> Arm:
        """Read a run: results only for the `detail` samples (the viewer's), their alternatives' strings only
        at `positions` (see `DetailResults`).

        Counts over all samples (speed, truncation) come with the comparison,
        so the other results are not read again.
        """
        results = DetailResults(store, detail, positions or {})
        folder = str(store.folder) if store.folder is not None else ""
        return Arm(role, store.manifest, folder, results, store.grades(), store.samples())


@dataclass
class TaskReport:
    """Everything the report shows for one task (one comparison)."""

    task: str
    comparison: Comparison
    arms: dict[str, Arm]
    tone: str
    accuracy: list[dict[str, Any]]
    holm: str
    token: dict[str, Any]
    divergence: dict[str, Any]
    speed: dict[str, Any] | None
    truncation: list[dict[str, Any]]
    rules: list[dict[str, Any]]
    provenance: list[dict[str, Any]]
    reproduce: list[str]
    differences: list[str] = field(default_factory=list)
    grading: str = ""
    sandbox: list[str] = field(default_factory=list)

    @property
    def speeds(self) -> dict[str, SpeedSummary]:
        return role_speeds(self.comparison.speed)


def task_of(c: Comparison) -> str:
    return str(c.candidate.get("task") or c.baseline.get("task") or "task")


def tone_of(c: Comparison) -> str:
    tones = [_TOKEN_TONE[c.token.label]] + [_ACC_TONE[r.verdict.label] for r in c.overall()]
    return "bad" if "bad" in tones else "unsure" if "unsure" in tones else "good"


def accuracy_table(c: Comparison) -> list[dict[str, Any]]:
    """The accuracy rows of the comparison, formatted for the report's table."""
    rows = []
    for r in c.accuracy:
        s = r.summary
        rows.append(
            {
                "label": "overall" if r.stratum == OVERALL else f"{r.stratum} = {r.value}",
                "stratum": r.stratum,
                "value": r.value,
                "overall": r.stratum == OVERALL,
                "n": s.n,
                "baseline": fmt.pct(s.baseline.accuracy),
                "baseline_ci": fmt.interval_pct(s.baseline.wilson.low, s.baseline.wilson.high),
                "candidate": fmt.pct(s.candidate.accuracy),
                "candidate_ci": fmt.interval_pct(s.candidate.wilson.low, s.candidate.wilson.high),
                "difference": fmt.pts(s.difference),
                "ci95": fmt.interval_pts(s.interval95.low, s.interval95.high),
                "ci90": fmt.interval_pts(s.interval90.low, s.interval90.high),
                "p": fmt.pval(s.p_value),
                "p_holm": fmt.pval(s.p_adjusted),
                "verdict": r.verdict.label,
                "tone": _ACC_TONE[r.verdict.label],
                "reason": r.verdict.reason,
                "ungraded": r.ungraded,
                "flips": f"+{s.counts.candidate_only} / −{s.counts.baseline_only}",
                "raw": s,
            }
        )
    return rows


def _elsewhere(p: ControlProfile) -> str:
    """The stored runs a control's evidence also came from, in a few words ("" when none)."""
    e = p.elsewhere
    if not e.samples:
        return ""
    return f"+{len(e.gaps)} flips in {e.samples} samples of {', '.join(e.tasks)}"


def token_section(c: Comparison) -> dict[str, Any]:
    t = c.token
    return {
        "label": t.label,
        "tone": _TOKEN_TONE[t.label],
        "reason": t.reason,
        "n": t.n,
        "identical": t.identical,
        "rate": fmt.pct(t.identical / t.n if t.n else math.nan),
        "level": t.level,
        "kinds": t.kinds,
        "threshold": fmt.num(t.thresholds.effective),
        "threshold_source": t.thresholds.source,
        "max_gap": fmt.num(t.max_gap),
        "thin": t.thresholds.thin,
        "explained_by_control": t.explained_by_control,
        "controls": [
            {
                "name": p.name,
                "kind": p.kind,
                "divergent": len(p.divergent),
                "n": p.n,
                "rate": fmt.pct(p.rate),
                "max_gap": fmt.num(float(p.own_gaps.max()) if len(p.own_gaps) else math.nan),
                "elsewhere": _elsewhere(p),
            }
            for p in c.controls
        ],
        "rate_checks": [
            {
                "control": r.control,
                "candidate": f"{r.candidate_divergent}/{r.n}",
                "control_rate": f"{r.control_divergent}/{r.n}",
                "p": fmt.pval(r.p_value),
                "more_frequent": r.more_frequent,
            }
            for r in t.rate_checks
        ],
    }


def divergence_section(c: Comparison, arms: Mapping[str, Arm]) -> dict[str, Any]:
    div = [d for d in c.diffs if not d.identical]
    pos = [d.first_divergence for d in div if d.first_divergence is not None]
    cand = arms.get("candidate")
    gained = lost = 0
    for d in div:
        if d.correctness_flipped and cand is not None and d.sample_id in cand.grades:
            gained += cand.grades[d.sample_id].correct
            lost += not cand.grades[d.sample_id].correct
    unit = "characters" if div and all(d.level == "text" for d in div) else "tokens"
    return {
        "count": len(div),
        "n": len(c.diffs),
        "kinds": {k: sum(d.kind == k for d in div) for k in ("numerical", "confident", "unknown")},
        "by_control": sum(1 for d in div if (d.explained_by or "").startswith("control:")),
        "first": min(pos) if pos else None,
        "median": statistics.median(pos) if pos else None,
        "last": max(pos) if pos else None,
        "unit": unit,
        "answer_changed": sum(bool(d.answer_changed) for d in div),
        "flipped": sum(bool(d.correctness_flipped) for d in div),
        "gained": gained,
        "lost": lost,
        "flip_direction_known": cand is not None,
        "missing": {k: len(v) for k, v in c.missing.items()},
    }


def role_speeds(speed: ComparisonSpeed | None) -> dict[str, SpeedSummary]:
    """Each role's speed, in the report's order of roles; none when no request of any run was timed."""
    if speed is None or not speed.timed:
        return {}
    return {role: speed.arms[role] for role in SHOWN_ORDER if role in speed.arms}


def drafted_cell(s: SpeedSummary) -> str:
    """`accepted/drafted` draft tokens, from per-request counts or the server's counters, whichever the engine gave."""
    accepted, drafted = s.accepted_tokens, s.drafted_tokens
    return f"{accepted:,}/{drafted:,}" if accepted is not None and drafted is not None else fmt.DASH


def ttft_cell(s: SpeedSummary) -> str:
    """The median TTFT, or a dash marked for the note that says why there is none."""
    return fmt.seconds(s.median_ttft_s) if fmt.ok(s.median_ttft_s) else fmt.DASH + TTFT_MARK


def ttft_note(speeds: Mapping[str, SpeedSummary]) -> str | None:
    """Why some runs have no TTFT, one sentence per engine; None when every run has one.

    Only a streamed response times its first token (llama.cpp also reports
    its prompt time without streaming), so a run without any TTFT was most
    likely made without `stream = true` on its target.
    """
    missing: dict[str | None, list[str]] = {}
    for s in speeds.values():
        if not fmt.ok(s.median_ttft_s):
            missing.setdefault(s.engine, []).append(s.target)
    if not missing:
        return None
    sentences = [
        f"No time to first token for {', '.join(f'`{t}`' for t in sorted(set(targets)))}: a non-streamed "
        f"{engine + ' response' if engine else 'response from this engine'} carries no timing, so TTFT needs "
        "`stream = true` on the target."
        for engine, targets in missing.items()
    ]
    return f"{TTFT_MARK} " + " ".join(sentences)


def speed_section(speed: ComparisonSpeed | None) -> dict[str, Any] | None:
    """The comparison's speed figures, formatted; None when no request of any run was timed."""
    if speed is None or not speed.timed:
        return None
    speeds = role_speeds(speed)
    sp = speed.speedup
    rows = [
        {
            "role": role,
            "target": s.target,
            "n": s.n,
            "timed": s.timed,
            "median_tps": fmt.fixed(s.median_tokens_per_s),
            "aggregate_tps": fmt.fixed(s.aggregate_tokens_per_s),
            "ttft": ttft_cell(s),
            "latency": fmt.seconds(s.median_latency_s),
            "acceptance": fmt.pct(s.acceptance_rate),
            "drafted": drafted_cell(s),
            "tau": fmt.fixed(s.mean_accepted_length, 2),
            "acceptance_source": s.acceptance_source,
            "source": s.decode_source,
            "outliers": len(s.outliers),
        }
        for role, s in speeds.items()
    ]
    summary = None
    if sp is not None and sp.n:
        summary = {
            "n": sp.n,
            "geometric_mean": fmt.ratio(sp.geometric_mean),
            "ci": f"[{fmt.ratio(sp.low95)}, {fmt.ratio(sp.high95)}]",
            "median": fmt.ratio(sp.median),
            "aggregate": fmt.ratio(sp.aggregate),
            "wall_clock": fmt.ratio(sp.wall_clock),
            "faster_share": fmt.pct(sp.faster_share, 0),
            "slower": sp.slower,
        }
    return {
        "rows": rows,
        "ttft_note": ttft_note(speeds),
        "speedup": summary,
        "warnings": speed.warnings,
        "definition": TOKENS_PER_S_DEFINITION,
    }


def truncation_rows(c: Comparison) -> list[dict[str, Any]]:
    """The comparison's truncation counts by role, formatted."""
    return [
        {
            "role": role,
            "target": t.target,
            "truncated": t.truncated,
            "n": t.n,
            "in_reasoning": t.in_reasoning,
            "share": fmt.pct(t.truncated / t.n if t.n else math.nan),
        }
        for role in SHOWN_ORDER
        if (t := c.truncation.get(role)) is not None
    ]


STRICT_RULE = "strict"
"""The name counted for a correct grade that no lenient rule decided (an exact or math-verify comparison)."""


def rule_counts(grades: Mapping[str, Grade]) -> dict[str, int]:
    """Correct grades by the rule that accepted them (`details["rule"]`), strict ones first.

    A grade a lenient rule accepted names it (`approximation`, `renamed`...),
    so the report shows how much of an accuracy rests on those rules.
    """
    counts = Counter(str(g.details.get("rule") or STRICT_RULE) for g in grades.values() if g.correct)
    return dict(sorted(counts.items(), key=lambda kv: (kv[0] != STRICT_RULE, -kv[1], kv[0])))


def rule_rows(arms: Mapping[str, Arm]) -> list[dict[str, Any]]:
    """Per arm with grades: its correct count and how many each rule decided."""
    rows = []
    for role in SHOWN_ORDER:
        arm = arms.get(role)
        if arm is None or not arm.grades:
            continue
        counts = rule_counts(arm.grades)
        correct = sum(counts.values())
        rows.append(
            {
                "role": role,
                "target": arm.manifest.target,
                "correct": correct,
                "lenient": correct - counts.get(STRICT_RULE, 0),
                "rules": ", ".join(f"{name} {n}" for name, n in counts.items()) or fmt.DASH,
            }
        )
    return rows


def task_report(c: Comparison, stores: Mapping[str, Any] | None) -> TaskReport:
    """Build the report data for one comparison; `stores` maps roles to run stores (optional)."""
    divergent = frozenset(d.sample_id for d in c.diffs if not d.identical)
    at = {d.sample_id: d.first_divergence for d in c.diffs if d.first_divergence is not None and d.level != "text"}
    shown = ("baseline", "candidate")  # the viewer's two arms
    arms = {
        role: Arm.load(role, store, divergent, at) if role in shown else Arm.load(role, store)
        for role, store in (stores or {}).items()
        if role in SHOWN_ORDER
    }
    return TaskReport(
        task=task_of(c),
        comparison=c,
        arms=arms,
        tone=tone_of(c),
        accuracy=accuracy_table(c),
        holm=c.holm.sentence(),
        token=token_section(c),
        divergence=divergence_section(c, arms),
        speed=speed_section(c.speed),
        truncation=truncation_rows(c),
        rules=rule_rows(arms),
        provenance=provenance(c, arms),
        reproduce=reproduce(c, arms),
        differences=[f"{d.path}: baseline {d.baseline!r}, candidate {d.other!r}" for d in c.differences],
        grading=saved_sentence(
            [(Path(a.folder), a.manifest.target, a.manifest.task) for a in arms.values() if a.folder]
        ),
        sandbox=sandbox_notes(arms),
    )


def overall_tone(tasks: list[TaskReport]) -> str:
    tones = [t.tone for t in tasks]
    return "bad" if "bad" in tones else "unsure" if "unsure" in tones else "good"
