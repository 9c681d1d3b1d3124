"""The CLI's commands.  Each one resolves arguments, calls the library and prints."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any, Iterator

from evalsuite.config import Config, TargetConfig, load_config
from evalsuite.errors import ConfigError
from evalsuite.grading import grade_run
from evalsuite.runner import RunOutcome, execute, plan_run
from evalsuite.store import open_run


def _say(args: argparse.Namespace, message: str) -> None:
    if not args.quiet:
        print(message, file=sys.stderr)


@contextlib.contextmanager
def serving(target: TargetConfig, args: argparse.Namespace) -> Iterator[tuple[str | None, list[str] | None]]:
    """Start the rig server a target needs (if any) for the duration of the block."""
    if target.rig is None:
        yield None, None
        return
    from evalsuite.rig.launcher import serve

    _say(args, f"starting rig server '{target.rig}' for target '{target.name}'...")
    with serve([target.rig]) as servers:
        server = servers[target.rig]
        yield server.base_url, list(server.args)


class _Progress:
    """A tqdm bar with rate and ETA; silent under --quiet."""

    def __init__(self, label: str, quiet: bool):
        self.label, self.quiet, self.bar = label, quiet, None

    def __call__(self, done: int, total: int) -> None:
        if self.quiet:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=self.label, unit="sample", dynamic_ncols=True, file=sys.stderr)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_one(config: Config, target_name: str, task: str, args: argparse.Namespace, role: str) -> RunOutcome:
    """Generate (and grade unless --no-grade) one target on one task."""
    target = config.target(target_name)
    plan = plan_run(config, target_name, task, data=args.data, data_path=args.data_path, limit=args.limit,
                    max_tokens=args.max_tokens, role=role)  # fmt: skip
    with serving(target, args) as (base_url, server_args):
        plan.base_url, plan.server_args = base_url, server_args
        progress = _Progress(f"{target_name}/{task}", args.quiet)
        try:
            outcome = asyncio.run(execute(plan, progress=progress, on_warning=lambda w: _say(args, f"warning: {w}")))
        finally:
            progress.close()
    _say(args, f"{target_name}/{task}: {outcome.recorded} new, {outcome.skipped} already stored -> {outcome.folder}")
    if not getattr(args, "no_grade", False):
        grades = grade_run(outcome.store, tasks_dir=config.root / "tasks")
        correct = sum(g.correct for g in grades)
        ungraded = sum(g.status == "ungraded" for g in grades)
        _say(args, f"{target_name}/{task}: {correct}/{len(grades)} correct" + (f", {ungraded} ungraded" if ungraded else ""))
    return outcome


def _tasks(args: argparse.Namespace, config: Config) -> list[str]:
    """--task may repeat and may hold a comma list (as `make eval TASKS=a,b` passes it)."""
    names = [n.strip() for arg in (args.task or []) for n in arg.split(",") if n.strip()]
    return names or list(config.defaults.tasks)


def cmd_run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    for task in _tasks(args, config):
        outcome = run_one(config, args.target, task, args, args.role)
        print(outcome.folder)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    target = config.target(args.target)
    if target.baseline is None:
        raise ConfigError(f"Target '{target.name}' has no baseline; set targets.{target.name}.baseline in {config.path}.")
    folders: dict[str, dict[str, Path]] = {}
    for task in _tasks(args, config):
        roles = [("baseline", target.baseline), ("candidate", target.name)]
        if target.control:
            roles.insert(1, ("control", target.control))
        for role, name in roles:
            folders.setdefault(task, {})[role] = run_one(config, name, task, args, role).folder
    for task, by_role in folders.items():
        for role, folder in by_role.items():
            print(f"{task}\t{role}\t{folder}")
    return _compare_if_available(args, folders)


def _compare_if_available(args: argparse.Namespace, folders: dict[str, dict[str, Path]]) -> int:
    try:
        from evalsuite.compare.command import compare_and_report
    except ImportError:
        _say(args, "runs stored; compare them with `evalsuite compare CANDIDATE BASELINE`.")
        return 0
    return compare_and_report(folders, quiet=args.quiet)


def cmd_grade(args: argparse.Namespace) -> int:
    config = load_config(args.config) if args.config or Path("evalsuite.toml").exists() else None
    tasks_dir = config.root / "tasks" if config else None
    for path in args.runs:
        store = open_run(path)
        grades = grade_run(store, tasks_dir=tasks_dir, workers=args.workers)
        counts: dict[str, int] = {}
        for g in grades:
            counts[g.status] = counts.get(g.status, 0) + 1
        print(f"{store.folder}\t" + "\t".join(f"{k}={v}" for k, v in sorted(counts.items())))
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    runs_dir = config.root / config.defaults.runs_dir
    rows: list[tuple[Any, ...]] = []
    for manifest in sorted(runs_dir.glob("*/*/*/manifest.json")):
        store = open_run(manifest.parent)
        if args.target and store.manifest["target"] != args.target:
            continue
        graded = store.grades()
        rows.append((store.manifest["target"], store.manifest["task"], len(store), len(graded), store.folder))
        store.close()
    if not rows:
        print(f"No runs under {runs_dir}.", file=sys.stderr)
        return 0
    print("target\ttask\tsamples\tgraded\tfolder")
    for row in rows:
        print("\t".join(map(str, row)))
    return 0


def cmd_targets(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    print("name\tengine\tendpoint\tbaseline\tdescription")
    for name, t in config.targets.items():
        endpoint = f"rig:{t.rig}" if t.rig else t.base_url
        print(f"{name}\t{t.engine}\t{endpoint}\t{t.baseline or '-'}\t{t.description}")
    return 0
