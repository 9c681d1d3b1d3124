"""`evalsuite leaderboard`: several speculative configurations against one baseline, as library calls.

1. Accuracy and losslessness: `workflow.eval_targets` runs the shared
   baseline (and its repeat), each control and each candidate once, every
   run resumable from the run store, then each candidate is compared with the
   baseline task by task (`compare`), its reports written beside the
   leaderboard.
2. Speed: one `speedrun.bench.SpeedBench` holds the baseline's server and
   prompts while each candidate is measured against it (together, or one
   server at a time).  A candidate's speed run is kept in the runs folder
   (`runs/<candidate>/.speed/<key>/`), keyed by everything that changes what
   it measures (the speed options, the session, and the fingerprints of the
   baseline's and the candidate's runs, which name their servers and model
   files), so the same command after an interruption measures only what is
   missing; `fresh_speed` measures again.
3. The rows (`leaderboard.rows`) and the files (`leaderboard.render`) in
   `reports/leaderboard/<timestamp>/`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsuite.config import Config
from evalsuite.errors import ConfigError, writing
from evalsuite.folders import folder_name
from evalsuite.leaderboard.render import LeaderboardPaths, write_leaderboard
from evalsuite.leaderboard.rows import Row, baseline_row, candidate_row, rank
from evalsuite.report.folder import report_folder
from evalsuite.serialize import to_jsonable
from evalsuite.speedrun import summarize, task_text
from evalsuite.speedrun.bench import SpeedBench
from evalsuite.speedrun.report import write_speed_report
from evalsuite.speedrun.run import SpeedPlan
from evalsuite.speedrun.session import Session
from evalsuite.workflow import EvalRuns, ProgressFactory, RunOptions, compare_eval, eval_targets

SPEED_STORE = ".speed"


@dataclass
class LeaderboardOptions:
    """What to run: the tasks and their options, and the speed run's plan."""

    tasks: list[str]
    run: RunOptions
    speed: SpeedPlan
    session: Session | None = None
    rig_slots: int = 1
    one_at_a_time: bool | None = None
    """None: the config's `defaults.one_server_at_a_time`."""
    fresh_speed: bool = False
    seed: int = 0
    repeat_baseline: bool | None = None
    """None: the config's `defaults.repeat_baseline`."""


@dataclass
class Leaderboard:
    """The ranked rows (the baseline among them as the reference), the rows kept out, and the files."""

    baseline: str
    ranked: list[Row]
    apart: list[Row]
    paths: LeaderboardPaths
    failed_requests: int


def resolve(config: Config, names: Sequence[str]) -> tuple[str, list[str]]:
    """(the shared baseline, the configurations): a grid table's name stands for all its points."""
    targets: list[str] = []
    for name in names:
        targets += config.grids.get(name) or [config.target(name).name]
    targets = list(dict.fromkeys(targets))
    if not targets:
        raise ConfigError("Name at least one target (or grid) to put on the leaderboard.")
    baselines = {t: config.target(t).baseline for t in targets}
    for t in targets:
        if t in baselines.values():
            raise ConfigError(f"'{t}' is the baseline itself; it is on every leaderboard as the reference row.")
    missing = [t for t, b in baselines.items() if b is None]
    if missing:
        raise ConfigError(
            f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no baseline in {config.path or 'the config'}; "
            "a leaderboard ranks configurations against one baseline (set targets.NAME.baseline)."
        )
    shared = sorted({str(b) for b in baselines.values()})
    if len(shared) > 1:
        split = "; ".join(f"{b}: {', '.join(t for t in targets if baselines[t] == b)}" for b in shared)
        raise ConfigError(
            f"A leaderboard compares configurations with one baseline; these have {len(shared)} ({split})."
        )
    return shared[0], targets


def run_leaderboard(
    config: Config,
    names: Sequence[str],
    options: LeaderboardOptions,
    *,
    say: Callable[[str], None] = lambda _m: None,
    progress: ProgressFactory | None = None,
) -> Leaderboard:
    """Run, compare and measure every configuration against the shared baseline; write the leaderboard."""
    baseline, targets = resolve(config, names)
    say(f"leaderboard: {len(targets)} configuration(s) against '{baseline}': {', '.join(targets)}")
    runs = eval_targets(
        config, targets, options.tasks, options.run, repeat_baseline=options.repeat_baseline, say=say, progress=progress
    )
    folder = report_folder(config.root / config.defaults.reports_dir, "leaderboard")
    rows = []
    speeds = _speeds(config, baseline, targets, runs, options, folder, say)
    for target in targets:
        with _opened(runs[target]) as stores:
            comparisons = compare_eval(config, runs[target], stores, seed=options.seed)
            from evalsuite.report import write_reports

            write_reports(comparisons, folder / folder_name(target) / "accuracy", runs=stores)
        row = candidate_row(target, comparisons, speeds.get(target))
        row.grid = dict((config.target(target).grid_point or ("", {}))[1])
        row.folder = folder_name(target)
        rows.append(row)
    ranked, apart = rank([baseline_row(baseline, list(speeds.values())), *rows])
    failed = sum(len(s.get("failed") or []) for s in speeds.values())
    paths = write_leaderboard(folder, ranked, apart, _meta(config, baseline, options, speeds))
    return Leaderboard(baseline, ranked, apart, paths, failed)


@contextlib.contextmanager
def _opened(runs: EvalRuns) -> Iterator[dict[str, dict[str, Any]]]:
    stores = {task: runs.stores(task) for task in runs.folders}
    try:
        yield stores
    finally:
        for roles in stores.values():
            for store in roles.values():
                store.close()


def speed_key(runs: EvalRuns, options: LeaderboardOptions, one_at_a_time: bool) -> str:
    """A digest of everything that changes what a candidate's speed run measures (module docstring)."""
    session = options.session
    identity = {
        "plan": to_jsonable(options.speed),
        "session": [session.name, session.system, list(session.turns)] if session else None,
        "tasks": options.tasks,
        "data": [options.run.data, options.run.data_path],
        "slots": options.rig_slots,
        "one_at_a_time": one_at_a_time,
        "seed": options.seed,
        "runs": sorted(
            f"{task}/{role}/{path.name}" for task, roles in runs.folders.items() for role, path in roles.items()
        ),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def _speeds(
    config: Config,
    baseline: str,
    targets: Sequence[str],
    runs: dict[str, EvalRuns],
    options: LeaderboardOptions,
    folder: Path,
    say: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    """Each candidate's speed summary: stored ones reused, the rest measured against the baseline and stored."""
    alone = config.defaults.one_server_at_a_time if options.one_at_a_time is None else options.one_at_a_time
    runs_dir = config.root / config.defaults.runs_dir
    stored = {t: runs_dir / folder_name(t) / SPEED_STORE / speed_key(runs[t], options, alone) for t in targets}
    summaries: dict[str, dict[str, Any]] = {}
    todo = [t for t in targets if options.fresh_speed or not (stored[t] / "speed.json").is_file()]
    for target in targets:
        if target not in todo:
            summaries[target] = json.loads((stored[target] / "speed.json").read_text(encoding="utf-8"))
            say(
                f"speed of '{target}': measured before ({summaries[target].get('created')}), reused from {stored[target]}"
            )
    if todo:
        corpus, prompts = task_text(config, baseline, options.tasks, options.run.data)
        with SpeedBench(
            config,
            config.target(baseline),
            options.speed,
            corpus=corpus,
            prompts=prompts,
            session=options.session,
            slots=options.rig_slots,
            one_at_a_time=alone,
            say=say,
        ) as bench:
            for i, target in enumerate(todo, 1):
                say(f"speed {i}/{len(todo)}: '{target}' against '{baseline}'")
                record = bench.measure(config.target(target))
                summaries[target] = summarize(record, options.seed)
                _store(stored[target], summaries[target], record.measurements)
    for target in targets:
        with writing(folder, "copy the speed reports into"):
            shutil.copytree(stored[target], folder / folder_name(target) / "speed")
    return summaries


def _store(final: Path, summary: dict[str, Any], measurements: list[Any]) -> None:
    """Write a speed run's files whole, then put them in place (a killed write leaves no half folder)."""
    temp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    with writing(final.parent, "keep the speed run in"):
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(temp, ignore_errors=True)
        temp.mkdir()
        write_speed_report(summary, measurements, temp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(temp, final)


def _meta(
    config: Config, baseline: str, options: LeaderboardOptions, speeds: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """What the leaderboard says about how it was made."""
    plan = options.speed
    limit = options.run.limit if options.run.limit is not None else config.defaults.limit
    notes = sorted({n for s in speeds.values() for n in s.get("notes", [])})
    facts = [
        f"Tasks {', '.join(options.tasks)} ({limit or 'all'} samples each, data {options.run.data or config.defaults.data}): "
        "every configuration's outputs compared token by token with the baseline's (with its control where it has "
        "one) and graded; the verdict is the worst of its tasks'.",
        "Speedup: the paired decode speedup over every request measured at concurrency 1 (all workloads pooled) "
        "with its 95 % bootstrap interval; acceptance and tau over the same requests; peak memory of the server "
        "the suite started for the speed run (MiB).",
        f"Speed run: input lengths {list(plan.lengths)}, {plan.output_tokens} output tokens, {plan.reps} repetitions, "
        f"{plan.task_prompts} task prompts"
        + (f", session '{options.session.name}' ({len(options.session.turns)} turns)" if options.session else "")
        + ".",
        "Ranked: configurations whose verdict is IDENTICAL or NUMERICAL-ONLY and whose accuracy is not DIFFERENT, "
        "fastest first, with the baseline as the reference at 1.00x; the others are listed apart.",
        *[f"Note: {n}." for n in notes],
    ]
    return {
        "baseline": baseline,
        "facts": facts,
        "created": max((s.get("created", "") for s in speeds.values()), default=""),
    }
