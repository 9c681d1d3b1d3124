"""`evalsuite speed TARGET`: the speed run's command line (the work is in `evalsuite.speedrun`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from evalsuite.errors import ConfigError

EPILOG = """\
examples:
  evalsuite speed draft                                   the full grid against draft's baseline
  evalsuite speed draft --lengths 128,1024 --reps 3 --concurrency 1
  evalsuite speed draft --rig-slots 4 --concurrency 1,2,4  rig servers with 4 slots: a concurrency sweep
  evalsuite speed my-dflash --lengths 128,1024,4096,16384 --concurrency 1,2,4,8 --output-tokens 256
  evalsuite speed ngram --session coding                   adds a multi-turn coding session, speed per turn
  evalsuite speed my-dflash --one-at-a-time                one GPU: the baseline first, then the candidate

Writes speed.json, measurements.jsonl, report.md and report.html to reports/<target>-speed/<timestamp>/.
"""


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of whole numbers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive whole numbers, got {text!r}")
    return values


def add_speed_options(p: argparse.ArgumentParser) -> None:
    """The speed run's options (`speed` and `leaderboard` share them)."""
    p.add_argument(
        "--lengths",
        type=_ints,
        default=(128, 1024, 4096, 16384),
        metavar="N,N",
        help="input lengths in tokens, capped at the server's context (default 128,1024,4096,16384)",
    )
    p.add_argument(
        "--output-tokens", type=int, default=128, metavar="N", help="output tokens per request (default 128)"
    )
    p.add_argument("--reps", type=int, default=5, metavar="N", help="repetitions per cell (default 5)")
    p.add_argument("--warmup", type=int, default=2, metavar="N", help="warm-up requests per arm (default 2)")
    p.add_argument(
        "--task-prompts",
        type=int,
        default=6,
        metavar="N",
        help="prompts of the configured tasks measured as their own workload (default 6; 0 = none)",
    )
    p.add_argument(
        "--session",
        metavar="NAME|FILE",
        help="also run a multi-turn session, every turn holding the earlier turns and the model's own answers: "
        "a shipped one by name (coding: an iterative coding session) or a JSON file (docs/speed.md)",
    )
    p.add_argument("--session-turns", type=int, metavar="N", help="only the session's first N turns")
    p.add_argument(
        "--one-at-a-time",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="measure the baseline alone, then the candidate on the same prompts, for servers that cannot be up "
        "together (one GPU); the report says so (default: defaults.one_server_at_a_time, else both up, interleaved)",
    )


def speed_settings(args: argparse.Namespace, config: Any) -> tuple[Any, Any]:
    """(SpeedPlan, Session or None) from the shared speed options, each checked."""
    from evalsuite.speedrun import SpeedPlan
    from evalsuite.speedrun.session import load_session

    for name in ("output_tokens", "reps", "sweep_length", "rig_slots"):
        if getattr(args, name, 1) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}.")
    if args.warmup < 0 or args.task_prompts < 0:
        raise ConfigError("--warmup and --task-prompts cannot be negative.")
    if args.session_turns is not None and args.session is None:
        raise ConfigError("--session-turns needs --session NAME|FILE (the session whose turns to keep).")
    session = load_session(args.session, config.root, args.session_turns) if args.session else None
    plan = SpeedPlan(
        lengths=args.lengths,
        output_tokens=args.output_tokens,
        reps=args.reps,
        warmup=args.warmup,
        concurrency=getattr(args, "concurrency", (1,)),
        sweep_length=getattr(args, "sweep_length", SpeedPlan.sweep_length),
        task_prompts=args.task_prompts,
        session_turns=len(session.turns) if session else None,
    )
    return plan, session


def add_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Register `speed` on the CLI's subparsers."""
    p = sub.add_parser(
        "speed",
        help="speed of a target against its baseline: input lengths, concurrency, tasks",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
        description="Measure TARGET against its baseline on prompts of controlled input lengths cut "
        "from the tasks' real text (fixed output length), a concurrency sweep, and the tasks' own "
        "prompts; warm-up first, then both arms interleaved on identical prompts. Reports decode "
        "tokens/s, TTFT, inter-token latency p50/p90/p99, draft acceptance and the paired speedup "
        "with a bootstrap interval per input length and concurrency.",
    )
    p.add_argument("target", help="a target with a baseline in the config")
    add_speed_options(p)
    p.add_argument(
        "--concurrency",
        type=_ints,
        default=(1, 2, 4, 8),
        metavar="N,N",
        help="concurrency levels, up to the servers' slots (default 1,2,4,8)",
    )
    p.add_argument(
        "--sweep-length",
        type=int,
        default=1024,
        metavar="N",
        help="input length of the concurrency sweep (default 1024)",
    )
    p.add_argument(
        "--rig-slots",
        type=int,
        default=1,
        metavar="N",
        help="start rig targets with N slots (--parallel N) so the concurrency sweep can batch (default 1)",
    )
    p.add_argument(
        "--data", choices=["hf", "local", "fixture"], help="where the task text comes from (default: the config's)"
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--out", metavar="DIR", help="write the report here instead of reports/<target>-speed/<timestamp>/")
    p.set_defaults(handler=cmd_speed)
    common(p)


def cmd_speed(args: argparse.Namespace) -> int:
    from pathlib import Path

    from evalsuite.config import load_config
    from evalsuite.speedrun import speed_target

    config = load_config(args.config)
    plan, session = speed_settings(args, config)

    def say(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr)

    paths, summary = speed_target(
        config,
        args.target,
        plan,
        data=args.data,
        seed=args.seed,
        rig_slots=args.rig_slots,
        one_at_a_time=args.one_at_a_time,
        session=session,
        out_dir=Path(args.out) if args.out else None,
        say=say,
    )
    for s in summary["speedups"]:
        d = s["decode"]
        if d["geometric_mean"] is not None:
            iv = f" [{d['low95']:.2f}, {d['high95']:.2f}]" if d["low95"] is not None else ""
            print(
                f"{s['workload']:>10s} c={s['concurrency']}: decode speedup {d['geometric_mean']:.2f}x{iv} "
                f"over {d['n']} pairs"
            )
    print(paths.folder)
    failed = len(summary["failed"])
    if failed:
        print(f"error: {failed} request(s) failed; see {paths.markdown}", file=sys.stderr)
        return 3
    return 0
