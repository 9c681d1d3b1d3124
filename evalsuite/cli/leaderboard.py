"""`evalsuite leaderboard TARGET [TARGET ...]`: the command line (the work is in `evalsuite.leaderboard`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

EPILOG = """\
examples:
  evalsuite leaderboard dflash-n ngram-n draft        a grid's name stands for all its points
  evalsuite leaderboard 'dflash-n[n_max=2]' draft --task gsm8k --limit 10
  evalsuite leaderboard dflash-n --session coding --lengths 256,2048 --reps 3
  evalsuite leaderboard my-dflash my-mtp --one-at-a-time   one GPU: baseline, then each candidate, alone

Writes leaderboard.md, leaderboard.html and leaderboard.csv (one row per configuration) and each
configuration's accuracy and speed reports to reports/leaderboard/<timestamp>/. Runs are stored and
resumed as by `eval`, and each speed run is kept: the same command after an interruption asks only
for what is missing (--fresh-speed measures the speed again).

exit codes: 0 the leaderboard was written and ranks at least one configuration (LOSSY ones are
listed apart, not a failure: a leaderboard exists to find them); 1 no configuration is ranked (all
LOSSY, UNDETERMINED, accuracy DIFFERENT or unmeasured), or with --strict any configuration is LOSSY,
UNDETERMINED or DIFFERENT; 2 bad input or config; 3 the endpoint failed, or speed requests failed
(the speed reports list them); 4 this machine failed; 5 a run is being written by another process;
130/143 interrupted (finished work is kept; re-run to resume).
"""


def add_parser(
    sub: Any,
    common: Callable[[argparse.ArgumentParser], None],
    data_options: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Register `leaderboard` on the CLI's subparsers."""
    from evalsuite.cli.speed import add_speed_options

    p = sub.add_parser(
        "leaderboard",
        help="several configurations against one baseline: lossless?, accuracy, speed, memory; ranked",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
        description="Run the shared baseline (and its repeat) and each control once, then every TARGET's "
        "accuracy and token-by-token comparison and its speed run against the baseline, and rank the "
        "lossless configurations by decode speedup (with its interval, draft acceptance, tau and the peak "
        "memory of each server the suite started). Every TARGET must have the same baseline.",
    )
    p.add_argument("targets", nargs="+", metavar="TARGET", help="targets or grid names (a grid: all its points)")
    p.add_argument("--task", action="append", metavar="NAME", help="task(s) (repeatable; default: defaults.tasks)")
    p.add_argument(
        "--repeat-baseline",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the baseline twice (default: defaults.repeat_baseline)",
    )
    p.add_argument(
        "--strict", action="store_true", help="exit 1 when any configuration is LOSSY, UNDETERMINED or DIFFERENT"
    )
    p.add_argument(
        "--fresh-speed", action="store_true", help="measure every speed run again instead of reusing kept ones"
    )
    data_options(p)
    add_speed_options(p)
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.set_defaults(handler=cmd_leaderboard)
    common(p)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from evalsuite.cli.common import progress_for, run_options, say_for, task_names
    from evalsuite.cli.speed import speed_settings
    from evalsuite.config import load_config
    from evalsuite.leaderboard import LeaderboardOptions, run_leaderboard, summary_line
    from evalsuite.speedrun import SpeedPlan

    config = load_config(args.config)
    args.concurrency = (1,)
    args.sweep_length = SpeedPlan.sweep_length
    plan, session = speed_settings(args, config)
    run = run_options(args)
    options = LeaderboardOptions(
        task_names(args, config),
        run,
        plan,
        session=session,
        one_at_a_time=args.one_at_a_time,
        fresh_speed=args.fresh_speed,
        seed=args.seed,
        repeat_baseline=args.repeat_baseline,
    )
    board = run_leaderboard(config, args.targets, options, say=say_for(args), progress=progress_for(args))
    for row in [*board.ranked, *board.apart]:
        print(summary_line(row))
    print(f"leaderboard: {board.paths.markdown}\nleaderboard: {board.paths.html}\nleaderboard: {board.paths.csv}")
    if board.failed_requests:
        print(f"error: {board.failed_requests} speed request(s) failed; see the speed reports", file=sys.stderr)
        return 3
    ranked = [r for r in board.ranked if not r.baseline]
    if not ranked:
        print(
            "no configuration is ranked: none is lossless with its accuracy kept and its speed measured",
            file=sys.stderr,
        )
        return 1
    return 1 if args.strict and board.apart else 0
