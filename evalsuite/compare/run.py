"""Compare a candidate run with its baseline from stored runs only: diff, statistics, verdicts, speed.

`compare_runs` is the one comparison: `evalsuite compare`, `report`, `eval`
and the pytest gate all call it (through `compare_roles` when they hold runs
by role).  It refuses runs that are not comparable (naming the fields), diffs
every sample both runs answered, calibrates the divergence threshold with the
control runs when given and with the baseline's own logit resolution, judges tokens and accuracy (Holm-adjusted over the
family `compare.accuracy` defines), measures speed, and returns a
`Comparison` that serialises to a versioned JSON summary and to pandas frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evalsuite.compare.accuracy import OVERALL, AccuracyRow, HolmFamily, accuracy_rows, holm_family
from evalsuite.compare.comparable import MUST_MATCH, FieldDifference, check_comparable
from evalsuite.compare.distinct import check_distinct
from evalsuite.compare.evidence import stored_evidence
from evalsuite.compare.frames import accuracy_frame, diff_record, samples_frame
from evalsuite.compare.outputs import Truncation, truncation
from evalsuite.compare.roles import CONTROL_ROLES, SHOWN_ORDER, control_roles
from evalsuite.compare.speed import ComparisonSpeed, speed_of_requests
from evalsuite.compare.walk import walk_runs
from evalsuite.diff.align import SampleDiff
from evalsuite.diff.classify import (
    DEFAULT_CONTROL_SLACK,
    DEFAULT_NEAR_TIE_NATS,
    NO_EVIDENCE,
    ControlKind,
    ControlProfile,
    Thresholds,
    calibrate,
    classify_all,
)
from evalsuite.errors import NotComparableError
from evalsuite.records import Grade
from evalsuite.serialize import dumps, to_jsonable
from evalsuite.stats.intervals import BootstrapMethod
from evalsuite.store.reader import RunReader
from evalsuite.textfile import write_text
from evalsuite.verdict.summary import summary_line
from evalsuite.verdict.token import TokenVerdict, token_verdict

SCHEMA_VERSION = 5
"""2: control kinds named by their roles (`repeat`, `control`), `holm_family` and `speed` added.
3: `token.thresholds.resolution` (the baseline's logit grid, its evidence in `source`) and each
divergence's `margin_step` added.
4: divergences judged on the gap between the tokens chosen: each divergence's `gap`, `gap_bound`,
`gap_source` and `grid_step` (for `margin_step`), `explained_by` "near-tie" (for "margin"), the token
verdict's `max_gap` (for `max_margin`), the controls' `max_gap`, `median_gap`, `elsewhere` and flips,
`thresholds.thin`; the resolution's `step` is its common step (no `cap`).
5: `summary` opens with the token verdict's label, as `token.label` does ("IDENTICAL: ...", "NUMERICAL-ONLY:
...", for "LOSSLESS: ..." and "LOSSLESS within numerics: ...").  `evalsuite.compare.migrate` reads older files
as this version."""


RunLike = RunReader  # the one reader protocol: stored and in-memory runs alike
RunSource = RunLike | str | Path


def _open(source: RunSource) -> RunLike:
    if isinstance(source, (str, Path)):
        from evalsuite.store import open_run

        return open_run(source)
    return source


def _identity(run: RunLike) -> dict[str, Any]:
    m = run.manifest
    return {"fingerprint": m.fingerprint, "target": m.target, "task": m.task}


@dataclass
class Comparison:
    """Everything `evalsuite compare` knows about a candidate against its baseline."""

    candidate: dict[str, Any]
    baseline: dict[str, Any]
    differences: list[FieldDifference]
    waived: list[str]
    diffs: list[SampleDiff]
    controls: list[ControlProfile]
    control_differences: dict[str, list[FieldDifference]]
    thresholds: Thresholds
    token: TokenVerdict
    accuracy: list[AccuracyRow]
    summary: str
    missing: dict[str, list[str]]
    settings: dict[str, Any] = field(default_factory=dict)
    speed: ComparisonSpeed | None = None
    truncation: dict[str, Truncation] = field(default_factory=dict)

    def overall(self) -> list[AccuracyRow]:
        return [r for r in self.accuracy if r.stratum == OVERALL]

    @property
    def holm(self) -> HolmFamily:
        """The family of tests the accuracy rows' adjusted p-values were computed over."""
        return holm_family(self.accuracy)

    def __json__(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "summary": self.summary,
            "candidate": self.candidate,
            "baseline": self.baseline,
            "settings": self.settings,
            "differences": self.differences,
            "waived": self.waived,
            "missing": {k: len(v) for k, v in self.missing.items()},
            "token": self.token,
            "controls": [
                {**to_jsonable(c), "differences": self.control_differences.get(c.name, [])} for c in self.controls
            ],
            "accuracy": self.accuracy,
            "holm_family": self.holm,
            "divergences": [diff_record(d) for d in self.diffs if not d.identical],
            "speed": self.speed,
            "truncation": self.truncation,
        }

    def to_json(self, path: str | Path | None = None) -> str:
        """The versioned JSON summary (NaN written as null); written to `path` when given."""
        text = dumps(self, indent=2, ensure_ascii=False)
        if path is not None:
            write_text(path, text + "\n")
        return text

    def samples_frame(self) -> pd.DataFrame:
        """One row per sample: identity, divergence, gap and margin, classification, answer and correctness flips."""
        return samples_frame(self.diffs)

    def accuracy_frame(self) -> pd.DataFrame:
        """One row per task and stratum with both accuracies, the difference, intervals, p-values and verdict."""
        return accuracy_frame(self.accuracy)


def compare_runs(
    candidate: RunSource,
    baseline: RunSource,
    *,
    controls: Mapping[ControlKind, RunSource] | None = None,
    grades: Mapping[str, Mapping[str, Grade]] | None = None,
    delta: float | Mapping[str, float] = 0.02,
    seed: int = 0,
    near_tie: float = DEFAULT_NEAR_TIE_NATS,
    control_slack: float = DEFAULT_CONTROL_SLACK,
    bootstrap_method: BootstrapMethod = "bca",
    n_resamples: int = 10_000,
    must_match: Sequence[str] = MUST_MATCH,
    allow: Sequence[str] = (),
    stored: bool = True,
) -> Comparison:
    """Compare stored runs.

    `controls` maps "repeat" (the baseline run again) and/or "control" (the
    speculative server with the target as its own drafter) to runs.
    `grades` overrides stored grades: {"candidate": {...}, "baseline": {...}}.
    `delta` is the equivalence margin declared before the run (a proportion,
    0.02 = 2 points), one for all tasks or one per task name.  With `stored`,
    each control's flips on the other stored runs of its engine count too
    (`evalsuite.compare.evidence`).
    """
    cand_run, base_run = _open(candidate), _open(baseline)
    opened = {kind: _open(source) for kind, source in (controls or {}).items()}
    runs: dict[str, RunLike] = {"candidate": cand_run, "baseline": base_run}
    for kind, run in opened.items():
        runs[kind] = run
    check_distinct(runs)
    differences = check_comparable(base_run.manifest, cand_run.manifest, must_match=must_match, allow=allow)
    ids = {role: run.result_ids() for role, run in runs.items()}
    if not set(ids["baseline"]) & set(ids["candidate"]):
        raise NotComparableError(
            f"The candidate run ({cand_run.manifest.target}, {len(ids['candidate'])} samples) and the baseline "
            f"run ({base_run.manifest.target}, {len(ids['baseline'])} samples) have no sample in common, so "
            "there is nothing to compare (a 0/0 verdict would mean nothing). Run both on the same samples."
        )
    grades = grades or {}
    cand_grades = dict(grades.get("candidate") or cand_run.grades())
    base_grades = dict(grades.get("baseline") or base_run.grades())

    control_diffs: dict[str, list[FieldDifference]] = {}
    for kind, run in opened.items():
        if kind not in CONTROL_ROLES:
            raise NotComparableError(f"Unknown control role '{kind}'; use one of {', '.join(CONTROL_ROLES)}.")
        control_diffs[f"{kind}:{run.manifest.target}"] = check_comparable(
            base_run.manifest, run.manifest, other_name=kind, must_match=must_match, allow=allow
        )
    walk = walk_runs(runs, ids, cand_grades, base_grades)
    profiles = [
        ControlProfile.from_diffs(
            f"{kind}:{run.manifest.target}",
            kind,
            walk.control_diffs[kind],
            stored_evidence(base_run, run) if stored else NO_EVIDENCE,
        )
        for kind, run in opened.items()
    ]
    results = walk.shells
    cand_results, base_results = results["candidate"], results["baseline"]
    thresholds = calibrate(profiles, near_tie=near_tie, slack=control_slack, resolution=walk.resolution.result())
    diffs = classify_all(walk.diffs, thresholds, profiles)
    token = token_verdict(diffs, thresholds, profiles)
    rows: list[AccuracyRow] = []
    if cand_grades and base_grades:
        rows = accuracy_rows(
            cand_results,
            base_results,
            cand_grades,
            base_grades,
            delta=delta,
            seed=seed,
            bootstrap_method=bootstrap_method,
            n_resamples=n_resamples,
        )
    overall = [(r.task, r.summary, r.verdict) for r in rows if r.stratum == OVERALL]
    return Comparison(
        candidate=_identity(cand_run),
        baseline=_identity(base_run),
        differences=[d for d in differences],
        waived=list(allow),
        diffs=diffs,
        controls=profiles,
        control_differences=control_diffs,
        thresholds=thresholds,
        token=token,
        accuracy=rows,
        speed=speed_of_requests(runs, walk.requests, seed=seed),
        truncation={
            role: truncation(runs[role].manifest.target, results[role]) for role in SHOWN_ORDER if role in results
        },
        summary=summary_line(token, overall),
        missing={
            "candidate_only": sorted(cand_results.keys() - base_results.keys()),
            "baseline_only": sorted(base_results.keys() - cand_results.keys()),
        },
        settings={
            "delta": dict(delta) if isinstance(delta, Mapping) else delta,
            "seed": seed,
            "bootstrap_method": bootstrap_method,
            "n_resamples": n_resamples,
            "near_tie_nats": near_tie,
            "control_slack": control_slack,
            "must_match": list(must_match),
        },
    )


def compare_roles(roles: Mapping[str, RunSource], **options: Any) -> Comparison:
    """`compare_runs` over one task's runs held by role ("candidate", "baseline", and "repeat"/"control" if run)."""
    return compare_runs(roles["candidate"], roles["baseline"], controls=control_roles(roles), **options)
