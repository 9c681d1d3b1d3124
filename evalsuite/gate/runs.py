"""Which runs the gate compares: stored folders given on the command line, found via the config, or run first.

A pair is (task, candidate folder, baseline folder, control folders by role);
pairs travel to pytest-xdist workers as JSON so that only the controller ever
starts a server or generates anything.  Each pair is compared by
`evalsuite.compare.compare_runs`, the same comparison `evalsuite compare` and
`evalsuite report` make, so the gate passes and fails on the very diffs and
threshold the report shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

from evalsuite.compare import Comparison, compare_runs, control_roles
from evalsuite.compare.comparable import check_comparable
from evalsuite.diff.align import SampleDiff
from evalsuite.diff.classify import ControlKind, Thresholds
from evalsuite.errors import EvalsuiteError, NotComparableError, StoreError
from evalsuite.folders import folder_name
from evalsuite.records import Grade, SampleResult
from evalsuite.store import RunManifest, open_run


@dataclass(frozen=True)
class GatePair:
    """One task's candidate run, its baseline run and any control runs as (role, folder)."""

    task: str
    candidate: str
    baseline: str
    controls: tuple[tuple[ControlKind, str], ...] = field(default_factory=tuple)
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
    baseline_runs = config.root / config.defaults.runs_dir / folder_name(target.baseline) / man.task
    for path in sorted(baseline_runs.glob("*/manifest.json")):
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

    def by_task(folders: Sequence[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for f in folders:
            out.setdefault(_manifest(f).task, []).append(f)
        return out

    base, ctl = by_task(baselines), by_task(controls)
    pairs = []
    for task, folders in by_task(runs).items():
        for folder in folders:
            baseline = _one_per_task(base, task, "--evalsuite-baseline")
            if baseline is None and baselines and len(baselines) == 1 and len(runs) == 1:
                baseline = baselines[0]  # one pair given explicitly: let compare name any task mismatch
            elif baseline is None:
                baseline = find_baseline(folder, config_path, allow)
            control = _one_per_task(ctl, task, "--evalsuite-control")
            pairs.append(GatePair(task, folder, baseline, (("control", control),) if control else (), tuple(allow)))
    return pairs


def _one_per_task(given: dict[str, list[str]], task: str, flag: str) -> str | None:
    """The run given with `flag` for this task, if any: a comparison holds one run per role."""
    folders = given.get(task, [])
    if len(folders) > 1:
        raise EvalsuiteError(f"Several {flag} runs are for task '{task}' ({', '.join(folders)}); give one per task.")
    return folders[0] if folders else None


def eval_pairs(
    config_path: str | None,
    target_name: str,
    tasks: Sequence[str],
    limit: int | Literal["all"] | None,
    say: Callable[[str], None] = lambda _: None,
    allow: Sequence[str] = (),
) -> list[GatePair]:
    """Generate (or resume) the baseline, the controls and the target on each task (`eval`), then pair them."""
    from evalsuite.config import load_config
    from evalsuite.workflow import RunOptions, eval_target

    config = load_config(config_path)
    waived = tuple(allow) + tuple(config.target(target_name).allow_differences)
    runs = eval_target(
        config, target_name, list(tasks) or list(config.defaults.tasks), RunOptions(limit=limit), say=say
    )
    return [
        GatePair(
            task,
            str(roles["candidate"]),
            str(roles["baseline"]),
            tuple((role, str(folder)) for role, folder in control_roles(roles).items()),
            waived,
        )
        for task, roles in runs.folders.items()
    ]


@dataclass
class GateComparison:
    """One pair's comparison, and what explaining a failing sample needs: its results with token strings."""

    pair: GatePair
    comparison: Comparison
    diffs: dict[str, SampleDiff]
    baseline: dict[str, SampleResult]
    candidate: dict[str, SampleResult]
    grades: dict[str, dict[str, Grade]]

    @property
    def thresholds(self) -> Thresholds:
        return self.comparison.thresholds

    def answered(self, role: str) -> frozenset[str]:
        """Sample ids the candidate (or baseline) run answered (built once per role: every gate item asks)."""
        return self._answered[role]

    @cached_property
    def _answered(self) -> dict[str, frozenset[str]]:
        both = set(self.diffs)
        return {
            role: frozenset(both.union(self.comparison.missing[f"{role}_only"])) for role in ("candidate", "baseline")
        }


def compare_pair(pair: GatePair, near_tie: float) -> GateComparison:
    """Compare the pair's runs (refusing incomparable ones) and load the divergent samples' token strings."""
    runs = {"candidate": open_run(pair.candidate), "baseline": open_run(pair.baseline)}
    comparison = compare_runs(
        runs["candidate"],
        runs["baseline"],
        controls={role: open_run(folder) for role, folder in pair.controls},
        near_tie=near_tie,
        allow=pair.allow,
    )
    diffs = {d.sample_id: d for d in comparison.diffs}
    divergent = [sid for sid, d in diffs.items() if not d.identical]
    loaded = {role: run.results(ids=divergent, strings="all") if divergent else {} for role, run in runs.items()}
    grades = {role: run.grades() for role, run in runs.items()}
    return GateComparison(pair, comparison, diffs, loaded["baseline"], loaded["candidate"], grades)
