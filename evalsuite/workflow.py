"""`eval` as a library call: run the roles a comparison needs, then compare each task.

Roles (`evalsuite.compare.roles`): `baseline`, optionally `repeat` (the
baseline again, in its own run folder), `control` (the target drafting for
itself) and `candidate`.  Each
role's server is started once (for rig targets) and serves every task, so a
speed figure never shares the CPU with another server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evalsuite.config import Config, TargetConfig
from evalsuite.errors import ConfigError, DatasetError
from evalsuite.grading import grade_store
from evalsuite.runner import RunOutcome, RunPlan, execute, plan_run
from evalsuite.serve.process import RunningServer
from evalsuite.store import RunStore, open_run
from evalsuite.tasks.data import DataChoice

if TYPE_CHECKING:
    from evalsuite.compare import Comparison
    from evalsuite.compare.run import RunSource

ProgressFactory = Callable[[str], Callable[[int, int], Any]]


@dataclass
class RunOptions:
    data: DataChoice | None = None
    data_path: str | None = None
    limit: int | Literal["all"] | None = None
    """First N samples of each task; None: the config's `defaults.limit`; "all": every sample."""
    max_tokens: int | None = None
    grade: bool = True
    sandbox: str | None = None
    """The sandbox setting for model-written code; None: the config's `defaults.sandbox`."""


@dataclass
class EvalRuns:
    """Run folders by task and role."""

    target: str
    folders: dict[str, dict[str, Path]] = field(default_factory=dict)

    def stores(self, task: str) -> dict[str, RunStore]:
        return {role: open_run(path) for role, path in self.folders[task].items()}


@contextlib.contextmanager
def serving(
    target: TargetConfig, say: Callable[[str], None], root: Path | None = None, *, rig_threads: int | None = None
) -> Iterator[RunningServer | None]:
    """Start the server a target needs (its `serve` command or rig configuration) for the duration of the block,
    with the digests of the model files it reads (hashed here, once per server, not once per run).

    `rig_threads` sets a rig server's thread count (its own default otherwise); a `serve` command runs as written.
    """
    if target.serve is None and target.rig is None:
        yield None
        return
    from evalsuite.rig.build import cache_root
    from evalsuite.serve.files import CACHE_NAME, model_digests

    with _started(target, say, root, rig_threads) as server:
        server.model_files = model_digests(server.args, server.cwd, cache_root() / CACHE_NAME, say)
        yield server


@contextlib.contextmanager
def _started(
    target: TargetConfig, say: Callable[[str], None], root: Path | None, rig_threads: int | None
) -> Iterator[RunningServer]:
    if target.serve is not None:
        from evalsuite.serve.target import default_log_dir, serve_target

        with serve_target(target, root or Path.cwd(), default_log_dir(), say) as server:
            yield server
        return
    from evalsuite.rig.launcher import serve

    threads = f" ({rig_threads} thread{'s' if rig_threads != 1 else ''})" if rig_threads else ""
    say(f"starting rig server '{target.rig}' for target '{target.name}'{threads}...")
    with serve([str(target.rig)], threads=rig_threads, extra_args=target.rig_args) as servers:
        yield servers[str(target.rig)]


def run_target(
    config: Config,
    target_name: str,
    tasks: Sequence[str],
    options: RunOptions,
    *,
    repeats: Sequence[int] = (0,),
    say: Callable[[str], None] = lambda _: None,
    progress: ProgressFactory | None = None,
) -> dict[tuple[str, int], RunOutcome]:
    """Generate (and grade) one target on tasks, one server start for all of them."""
    target = config.target(target_name)
    preflight_targets(config, [target_name])
    outcomes: dict[tuple[str, int], RunOutcome] = {}
    plans = {
        (task, repeat): plan_checked(config, target_name, task, options, repeat=repeat)
        for task in tasks
        for repeat in repeats
    }
    with serving(target, say, config.root) as server:
        for task in tasks:
            for repeat in repeats:
                plan = plans[(task, repeat)]
                plan.served_by(server)
                label = f"{target_name}/{task}" + (f" (repeat {repeat})" if repeat else "")
                bar = progress(label) if progress else None
                outcome = asyncio.run(execute(plan, progress=bar, on_warning=lambda w: say(f"warning: {w}")))
                say(f"{label}: {outcome.recorded} new, {outcome.skipped} already stored -> {outcome.folder}")
                if options.grade:
                    graded = grade_store(
                        outcome.store, tasks_dir=config.root / "tasks", sandbox=sandbox_setting(config, options)
                    )
                    grades, saved = graded.grades, graded.count.saved
                    correct = sum(g.correct for g in grades)
                    ungraded = sum(g.status == "ungraded" for g in grades)
                    say(
                        f"{label}: {correct}/{len(grades)} correct"
                        + (f", {ungraded} ungraded" if ungraded else "")
                        + (f" ({saved} grades reused, not graded again)" if saved else "")
                    )
                outcomes[(task, repeat)] = outcome
    return outcomes


def plan_checked(config: Config, target_name: str, task: str, options: RunOptions, *, repeat: int = 0) -> RunPlan:
    """A run plan with everything that could fail later checked now, before any server starts or request goes out.

    The dataset is read and every prompt rendered (plan_run), the generation
    parameters are range-checked, the limit must leave samples, and the
    task's grader is built once so an unknown grader or extraction step is
    found before generation, not after it (and, when the run is graded, its
    sandbox: a machine that cannot run model-written code says so now).
    """
    limit = options.limit if options.limit is not None else config.defaults.limit
    if limit == "all":
        limit = None
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be a positive number of samples, got {limit}.")
    if options.max_tokens is not None and options.max_tokens < 1:
        raise ConfigError(f"--max-tokens must be a positive number of tokens, got {options.max_tokens}.")
    plan = plan_run(
        config,
        target_name,
        task,
        data=options.data,
        data_path=options.data_path,
        limit=limit,
        max_tokens=options.max_tokens,
        repeat=repeat,
    )
    if not plan.samples:
        raise DatasetError(f"Task '{task}' has no samples to run ({plan.data.location}); nothing to evaluate.")
    from evalsuite.graders import get_grader
    from evalsuite.sandbox.levels import requested

    grader = get_grader(plan.task.grader)
    ready = getattr(grader, "ready", None)
    if options.grade and ready is not None:
        with requested(sandbox_setting(config, options)):
            ready()
    return plan


def sandbox_setting(config: Config, options: RunOptions) -> str:
    """The sandbox setting: --sandbox when given, else the config's `defaults.sandbox`."""
    return options.sandbox or config.defaults.sandbox


def eval_target(
    config: Config,
    target_name: str,
    tasks: Sequence[str],
    options: RunOptions,
    *,
    repeat_baseline: bool | None = None,
    say: Callable[[str], None] = lambda _: None,
    progress: ProgressFactory | None = None,
) -> EvalRuns:
    """Baseline (and its repeat when asked), control and candidate on every task."""
    runs = eval_targets(
        config, [target_name], tasks, options, repeat_baseline=repeat_baseline, say=say, progress=progress
    )
    return runs[config.target(target_name).name]


def eval_targets(
    config: Config,
    names: Sequence[str],
    tasks: Sequence[str],
    options: RunOptions,
    *,
    repeat_baseline: bool | None = None,
    say: Callable[[str], None] = lambda _: None,
    progress: ProgressFactory | None = None,
) -> dict[str, EvalRuns]:
    """`eval_target` for several candidates at once: a baseline, repeat or control they share runs once.

    Every role's target is checked (its baseline, a control that is not the candidate itself, API keys,
    served commands) before anything runs; then each distinct target runs once, baselines first.
    """
    twice = config.defaults.repeat_baseline if repeat_baseline is None else repeat_baseline
    plans = {name: _roles(config, config.target(name), twice) for name in dict.fromkeys(names)}
    jobs: dict[str, set[int]] = {}  # target -> repeats, baselines first, then controls, then candidates
    for role in ("baseline", "control", "candidate"):
        for roles in plans.values():
            for _, name, repeats in (r for r in roles if r[0] == role):
                jobs.setdefault(name, set()).update(repeats)
    ordered = list(jobs)
    for name in ordered:
        config.target(name).api_key()  # a missing key stops the eval now, not after the baseline has run
    preflight_targets(config, ordered)
    folders: dict[tuple[str, str, int], Path] = {}
    for name in ordered:
        outcomes = run_target(config, name, tasks, options, repeats=sorted(jobs[name]), say=say, progress=progress)
        folders |= {(name, task, repeat): outcome.folder for (task, repeat), outcome in outcomes.items()}
    out: dict[str, EvalRuns] = {}
    for candidate, roles in plans.items():
        runs = out[candidate] = EvalRuns(candidate)
        for role, name, repeats in roles:
            for task in tasks:
                for repeat in repeats:
                    runs.folders.setdefault(task, {})["repeat" if repeat else role] = folders[(name, task, repeat)]
    return out


def _roles(config: Config, target: TargetConfig, twice: bool) -> list[tuple[str, str, tuple[int, ...]]]:
    """(role, target, repeats) of one candidate's eval: its baseline (twice when asked), control, itself."""
    if target.baseline is None:
        where = config.path or "the config"
        raise ConfigError(f"Target '{target.name}' has no baseline; set targets.{target.name}.baseline in {where}.")
    roles: list[tuple[str, str, tuple[int, ...]]] = [("baseline", target.baseline, (0, 1) if twice else (0,))]
    if target.control:
        roles.append(("control", target.control, (0,)))
    roles.append(("candidate", target.name, (0,)))
    _check_roles_differ(config, target)
    return roles


def _endpoint(t: TargetConfig) -> tuple[Any, ...]:
    """Where a target's answers come from: its rig configuration and flags, its serve command, or its URL."""
    from evalsuite.compare.distinct import normal_url

    if t.rig is not None:
        return ("rig", t.rig, tuple(t.rig_args))
    if t.serve is not None:
        return ("serve", tuple(t.serve.argv()), t.serve.cwd, tuple(sorted(t.serve.env.items())))
    return ("url", normal_url(t.base_url))


def _same_endpoint(a: TargetConfig, b: TargetConfig) -> bool:
    return _endpoint(a) == _endpoint(b) and (a.engine, a.api, a.extra, a.model) == (b.engine, b.api, b.extra, b.model)


def _check_roles_differ(config: Config, target: TargetConfig) -> None:
    """Refuse before anything runs a control that is the candidate's own endpoint under another name."""
    if target.control and _same_endpoint(config.target(target.control), target):
        raise ConfigError(
            f"targets.{target.name}.control = '{target.control}' is the same endpoint, asked the same "
            f"way, as '{target.name}' itself; a control that is the candidate always agrees with it. "
            "Point the control at the speculative server drafting for itself."
        )


def preflight_targets(config: Config, names: Sequence[str]) -> None:
    """Check every served target's command (binary, model files, {port}) before anything runs."""
    from evalsuite.serve.target import preflight

    for name in dict.fromkeys(names):
        preflight(config.target(name), config.root, str(config.path or "the config"))


def compare_eval(
    config: Config, runs: EvalRuns, stores: Mapping[str, Mapping[str, RunSource]] | None = None, *, seed: int = 0
) -> list[Comparison]:
    """One Comparison per task (candidate vs baseline, with whatever controls ran), over `stores` when opened."""
    target = config.target(runs.target)
    return compare_folders(
        stores or runs.folders, margins=task_margins(config, runs.folders), allow=target.allow_differences, seed=seed
    )


def task_margins(config: Config | None, tasks: Iterable[str]) -> dict[str, float]:
    """Each task's equivalence margin as its spec declares it (tasks without a spec at hand get the default)."""
    if config is None:
        return {}
    from evalsuite.tasks.spec import find_task, locate_task

    tasks_dir = config.root / "tasks"
    return {t: find_task(t, tasks_dir).equivalence_margin for t in tasks if locate_task(t, tasks_dir) is not None}


def compare_folders(
    folders: Mapping[str, Mapping[str, RunSource]],
    *,
    margins: Mapping[str, float] | None = None,
    allow: Sequence[str] = (),
    seed: int = 0,
) -> list[Comparison]:
    """Compare runs (folders or opened stores) given by task and role, one `compare_roles` call per task.

    Each task is its own Holm family (`evalsuite.compare.accuracy`), so a
    task's p-values here are the ones `evalsuite compare` prints for it, and
    its token verdict the one `compare` gives: a control's flips on every task
    stored for its engine count in each (`evalsuite.compare.evidence`).
    """
    from evalsuite.compare import compare_roles

    return [
        compare_roles(roles, delta=(margins or {}).get(task, 0.02), seed=seed, allow=list(allow))
        for task, roles in folders.items()
    ]


def folders_by_role(
    paths: Sequence[str | Path],
    explicit: Mapping[str, Sequence[str | Path]] | None = None,
) -> dict[str, dict[str, Path]]:
    """Group stored runs by task and by the role each plays in this comparison.

    Roles given in `explicit` ("baseline", "control", "repeat" -> folders)
    come first; the rest are placed by the relations their targets' config
    recorded (see `evalsuite.compare.roles`), never by the role a folder was
    first created with.
    """
    from evalsuite.compare.roles import StoredRun, assign_roles

    def stored(path: str | Path) -> StoredRun:
        store = open_run(path)
        try:
            return StoredRun.from_manifest(store.folder, store.manifest)
        finally:
            store.close()

    given = {role: [stored(p) for p in folders] for role, folders in (explicit or {}).items() if folders}
    return assign_roles([stored(p) for p in paths], given)
