"""The CLI's commands.  Each one resolves arguments, calls the library and prints."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalsuite.cli.common import optional_config, progress_for, run_options, say_for, task_names
from evalsuite.config import Config, load_config
from evalsuite.grading import grade_store
from evalsuite.store import RunManifest, open_run
from evalsuite.workflow import compare_eval, eval_target, run_target


def cmd_run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    outcomes = run_target(
        config,
        args.target,
        task_names(args, config),
        run_options(args),
        say=say_for(args),
        progress=progress_for(args),
    )
    for outcome in outcomes.values():
        print(outcome.folder)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    runs = eval_target(
        config,
        args.target,
        task_names(args, config),
        run_options(args),
        repeat_baseline=args.repeat_baseline,
        say=say_for(args),
        progress=progress_for(args),
    )
    for task, roles in runs.folders.items():
        for role, folder in roles.items():
            print(f"{task}\t{role}\t{folder}")
    stores = {task: runs.stores(task) for task in runs.folders}
    comparisons = compare_eval(config, runs, stores)
    sampled = None
    if getattr(args, "sampling", False):  # lossless under sampling too: its own draws, folded into the report
        from evalsuite.cli.sample_test import eval_sampling, fold_into_report

        sampled = eval_sampling(args, config)
    add = (lambda folder: fold_into_report(sampled, folder)) if sampled else None
    code = _finish(args, config, comparisons, stores, args.target, add)
    return max(code, 0 if sampled is None or sampled.verdict.outcome == "SAME" else 1)


def cmd_compare(args: argparse.Namespace) -> int:
    from evalsuite.compare import compare_roles
    from evalsuite.workflow import task_margins

    config = optional_config(args)
    given = {"candidate": args.candidate, "baseline": args.baseline, "repeat": args.repeat, "control": args.control}
    stores = {role: open_run(folder) for role, folder in given.items() if folder}
    task = stores["candidate"].manifest.task
    delta = args.delta if args.delta is not None else task_margins(config, [task]).get(task, 0.02)
    allow = _allowed(args.allow, stores["candidate"].manifest)
    comparison = compare_roles(stores, delta=delta, seed=args.seed, allow=allow)
    if args.json:
        comparison.to_json(args.json)
    return _finish(args, config, [comparison], {task: stores}, comparison.candidate.get("target", "compare"))


def _finish(
    args: argparse.Namespace,
    config: Config | None,
    comparisons: list[Any],
    stores: dict,
    target: str,
    add: Callable[[Path], None] | None = None,
) -> int:
    """Print each verdict and write the reports (unless --no-report); exit 1 on a failing verdict."""
    for comparison in comparisons:
        task = comparison.candidate.get("task")
        print(f"{task}: {comparison.summary}" if len(comparisons) > 1 else comparison.summary)
    if not getattr(args, "no_report", False):
        from evalsuite.report import report_folder, write_reports

        reports_dir = (config.root / config.defaults.reports_dir) if config else Path("reports")
        paths = write_reports(comparisons, report_folder(reports_dir, target), runs=stores)
        print(f"report: {paths.markdown}\nreport: {paths.html}")
        if add is not None:  # another section written into the same report folder
            add(paths.folder)
    failed = any(
        c.token.label == "LOSSY" or any(r.verdict.label == "DIFFERENT" for r in c.overall()) for c in comparisons
    )
    return 1 if failed else 0


def _allowed(given: list[str] | None, candidate_manifest: RunManifest) -> list[str]:
    """--allow fields plus the ones the candidate target's config waived when it ran (allow_differences)."""
    return list(dict.fromkeys([*(given or []), *candidate_manifest.target_config.allow_differences]))


def cmd_report(args: argparse.Namespace) -> int:
    from evalsuite.workflow import compare_folders, folders_by_role, task_margins

    config = optional_config(args)
    explicit = {"baseline": args.baseline, "control": args.control, "repeat": args.repeat}
    folders = folders_by_role(args.runs, {role: runs for role, runs in explicit.items() if runs})
    stores = {task: {role: open_run(path) for role, path in roles.items()} for task, roles in folders.items()}
    allow = [f for roles in stores.values() for f in _allowed(args.allow, roles["candidate"].manifest)]
    comparisons = compare_folders(
        stores, margins=task_margins(config, folders), allow=list(dict.fromkeys(allow)), seed=args.seed
    )
    target = str(comparisons[0].candidate.get("target", "report"))
    return _finish(args, config, comparisons, stores, target)


def cmd_grade(args: argparse.Namespace) -> int:
    config = optional_config(args)
    tasks_dir = config.root / "tasks" if config else None
    sandbox = _sandbox_setting(args, config)
    for path in args.runs:
        store = open_run(path, write=True)  # grades are written: one writer per run folder, as for `run`
        try:
            graded = grade_store(store, tasks_dir=tasks_dir, workers=args.workers, sandbox=sandbox)
        finally:
            store.close()
        counts: dict[str, int] = {}
        for g in graded.grades:
            counts[g.status] = counts.get(g.status, 0) + 1
        counts["reused"] = graded.count.saved
        print(f"{store.folder}\t" + "\t".join(f"{k}={v}" for k, v in sorted(counts.items())))
    return 0


def _sandbox_setting(args: argparse.Namespace, config: Config | None) -> str:
    """--sandbox, else the config's `defaults.sandbox` (when there is a config), else auto."""
    return args.sandbox or (config.defaults.sandbox if config else "auto")


def cmd_sandbox(args: argparse.Namespace) -> int:
    """Build the sandbox the setting gives this user here and say what it protects; exit 4 where there is none."""
    import json

    from evalsuite.errors import HostError
    from evalsuite.sandbox import Sandbox
    from evalsuite.sandbox.levels import SandboxRefused, available, requested, summary

    setting = _sandbox_setting(args, optional_config(args))
    try:
        with requested(setting):
            sandbox = Sandbox()
    except SandboxRefused as exc:
        raise HostError(str(exc)) from None
    info = {"setting": setting, **sandbox.describe(), "available": available()}
    print(json.dumps(info, indent=2) if args.json else summary(info))
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    """List stored runs; a damaged run folder is named on stderr and never stops the listing (or is touched)."""
    from evalsuite.errors import EvalsuiteError

    config = load_config(args.config)
    runs_dir = config.root / config.defaults.runs_dir
    rows: list[tuple[Any, ...]] = []
    broken: list[str] = []
    for manifest in sorted(runs_dir.glob("*/*/*/manifest.json")):
        try:
            store = open_run(manifest.parent)
            try:
                if args.target and store.manifest.target != args.target:
                    continue
                rows.append((store.manifest.target, store.manifest.task, len(store), len(store.grades()), store.folder))
            finally:
                store.close()
        except EvalsuiteError as exc:
            broken.append(f"{manifest.parent}: {exc}")
    if rows:
        print("target\ttask\tsamples\tgraded\tfolder")
        for row in rows:
            print("\t".join(map(str, row)))
    elif not broken:
        print(f"No runs under {runs_dir}.", file=sys.stderr)
    if broken:
        print(f"{len(broken)} run folder(s) cannot be read and were left as they are:", file=sys.stderr)
        for line in broken:
            print(f"  {line}", file=sys.stderr)
    return 0


def cmd_targets(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    print("name\tengine\tendpoint\tbaseline\tdescription")
    for name, t in config.targets.items():
        endpoint = (
            f"rig:{' '.join([t.rig, *t.rig_args])}"
            if t.rig
            else (f"serve:{t.serve.argv()[0]}" if t.serve else t.base_url)
        )
        print(f"{name}\t{t.engine}\t{endpoint}\t{t.baseline or '-'}\t{t.description}")
    return 0
