"""Which runs the gate compares: stored folders given on the command line, found via the config, or run first.

A pair is (task, candidate folder, baseline folder, numerics control folders);
pairs travel to pytest-xdist workers as JSON so that only the controller ever
starts a server or generates anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evalsuite.compare.comparable import check_comparable
from evalsuite.compare.distinct import check_distinct
from evalsuite.diff.align import SampleDiff, diff_runs
from evalsuite.diff.classify import ControlProfile, Thresholds, calibrate, classify_all
from evalsuite.errors import EvalsuiteError, NotComparableError, StoreError
from evalsuite.records import Grade, SampleResult
from evalsuite.store import RunManifest, open_run


@dataclass(frozen=True)
class GatePair:
    """One task's candidate run, its baseline run and any control runs as (kind, folder)."""

    task: str
    candidate: str
    baseline: str
    controls: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    allow: tuple[str, ...] = field(default_factory=tuple)

    @staticmethod
    def dumps(pairs: Sequence[GatePair]) -> str:
        return json.dumps([asdict(p) for p in pairs])

    @staticmethod
    def loads(text: str) -> list[GatePair]:
        return [
            GatePair(
                d["task"], d["candidate"], d["baseline"], tuple((k, f) for k, f in d["controls"]), tuple(d["allow"])
            )
            for d in json.loads(text)
        ]


def _manifest(folder: str) -> RunManifest:
    store = open_run(folder)
    try:
        return store.manifest
    finally:
        store.close()


def find_baseline(candidate: str, config_path: str | None, allow: Sequence[str] = ()) -> str:
    """The newest stored run of the candidate target's configured baseline that is comparable to it."""
    from evalsuite.config import load_config

    man = _manifest(candidate)
    where = config_path or "evalsuite.toml"
    if not Path(where).exists():
        raise EvalsuiteError(
            f"--evalsuite-baseline was not given for {candidate} and there is no {where} to look up "
            f"target '{man.target}''s baseline; pass --evalsuite-baseline DIR."
        )
    config = load_config(where)
    target = config.target(man.target)
    if target.baseline is None:
        raise EvalsuiteError(f"Target '{target.name}' has no baseline in {config.path}; pass --evalsuite-baseline DIR.")
    found: list[tuple[float, str]] = []
    for path in sorted((config.root / config.defaults.runs_dir / target.baseline / man.task).glob("*/manifest.json")):
        try:
            other = _manifest(str(path.parent))
            check_comparable(other, man, allow=allow)
        except (NotComparableError, StoreError):  # another setting's run, or a damaged one: not this baseline
            continue
        found.append((other.created_at or 0.0, str(path.parent)))
    if not found:
        raise EvalsuiteError(
            f"No stored run of baseline target '{target.baseline}' for task '{man.task}' is "
            f"comparable to {candidate}; run `evalsuite run {target.baseline} --task {man.task}` "
            "or pass --evalsuite-baseline DIR."
        )
    return max(found)[1]


def stored_pairs(
    runs: Sequence[str],
    baselines: Sequence[str],
    controls: Sequence[str],
    config_path: str | None,
    allow: Sequence[str] = (),
) -> list[GatePair]:
    """Pair each --evalsuite-run folder with the baseline (and controls) of the same task."""

    def by_task(folders: Sequence[str], what: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for f in folders:
            out.setdefault(_manifest(f).task, []).append(f)
        return out

    base, ctl = by_task(baselines, "baseline"), by_task(controls, "control")
    pairs = []
    for task, folders in by_task(runs, "run").items():
        for folder in folders:
            if task in base:
                if len(base[task]) > 1:
                    raise EvalsuiteError(
                        f"Several --evalsuite-baseline runs are for task '{task}' "
                        f"({', '.join(base[task])}); give one per task."
                    )
                baseline = base[task][0]
            elif baselines and len(baselines) == 1 and len(runs) == 1:
                baseline = baselines[0]  # one pair given explicitly: let compare name any task mismatch
            else:
                baseline = find_baseline(folder, config_path, allow)
            pairs.append(
                GatePair(task, folder, baseline, tuple(("numerics", c) for c in ctl.get(task, [])), tuple(allow))
            )
    return pairs


def run_target(
    config_path: str | None,
    target_name: str,
    tasks: Sequence[str],
    limit: int | None,
    say: Callable[[str], None] = lambda _: None,
    allow: Sequence[str] = (),
) -> list[GatePair]:
    """Generate (or resume) the baseline, the controls and the target on each task, then pair them."""
    from evalsuite.config import load_config
    from evalsuite.workflow import RunOptions, eval_target

    config = load_config(config_path)
    waived = tuple(allow) + tuple(config.target(target_name).allow_differences)
    runs = eval_target(
        config, target_name, list(tasks) or list(config.defaults.tasks), RunOptions(limit=limit), say=say
    )
    pairs = []
    for task, roles in runs.folders.items():
        controls = tuple(
            (kind, str(roles[role]))
            for kind, role in (("determinism", "determinism"), ("numerics", "control"))
            if role in roles
        )
        pairs.append(GatePair(task, str(roles["candidate"]), str(roles["baseline"]), controls, waived))
    return pairs


@dataclass
class Judged:
    """Everything needed to judge and explain each sample of one pair."""

    pair: GatePair
    thresholds: Thresholds
    diffs: dict[str, SampleDiff]
    baseline: dict[str, SampleResult]
    candidate: dict[str, SampleResult]
    grades: dict[str, dict[str, Grade]]
    missing: list[str]


def judge_pair(pair: GatePair, near_tie: float) -> Judged:
    """Load the runs, refuse incomparable ones, diff every sample and classify it against the thresholds."""
    cand_run, base_run = open_run(pair.candidate), open_run(pair.baseline)
    controls = [(kind, open_run(folder)) for kind, folder in pair.controls]
    check_distinct([("candidate", cand_run), ("baseline", base_run), *controls])
    check_comparable(base_run.manifest, cand_run.manifest, allow=pair.allow)
    base, cand = base_run.results(), cand_run.results()
    profiles = []
    for kind, ctl in controls:
        check_comparable(base_run.manifest, ctl.manifest, other_name=f"{kind} control", allow=pair.allow)
        comps = {sid: r.completion for sid, r in ctl.results().items()}
        profiles.append(
            ControlProfile.from_diffs(
                f"{kind}:{ctl.manifest.target}",
                kind,  # type: ignore[arg-type]
                diff_runs(comps, {s: r.completion for s, r in base.items()}),
            )
        )
    thresholds = calibrate(profiles, near_tie=near_tie)
    grades = {"candidate": cand_run.grades(), "baseline": base_run.grades()}
    raw = diff_runs(
        {s: r.completion for s, r in cand.items()},
        {s: r.completion for s, r in base.items()},
        candidate_grades=grades["candidate"],
        baseline_grades=grades["baseline"],
    )
    diffs = {d.sample_id: d for d in classify_all(raw, thresholds, profiles)}
    return Judged(pair, thresholds, diffs, base, cand, grades, sorted(base.keys() - cand.keys()))
