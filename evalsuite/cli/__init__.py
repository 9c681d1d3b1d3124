"""Command line: thin wrappers over the library.  `evalsuite --help` is the tour."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any, Literal

from evalsuite import __version__
from evalsuite.blas import one_blas_thread
from evalsuite.cli.failures import INPUT_ERRORS, input_error
from evalsuite.errors import EvalsuiteError

EPILOG = """\
examples:
  evalsuite init                             write a commented evalsuite.toml here (start here)
  evalsuite targets                          list the targets in evalsuite.toml
  evalsuite eval dflash --limit 20           baseline + dflash on every task, then compare
  evalsuite run baseline --task gsm8k        one target, one task (resumes if interrupted)
  evalsuite report RUN RUN [RUN...]          compare stored runs again and write the reports
  evalsuite grade runs/baseline/gsm8k/1a2b3c4d5e6f7a8b
  evalsuite runs                             what is stored, with sample counts
  evalsuite sandbox                          what isolation model-written code gets on this machine
  evalsuite rig build                        build the reference llama-server (CPU)
  evalsuite speed draft                      speed against the baseline: input lengths, concurrency
  evalsuite leaderboard dflash-n ngram draft several configurations against one baseline, ranked

exit codes: 0 ok, 1 verdict/gate failed, 2 bad input or config, 3 endpoint error, 4 this machine failed
(disk full, permission denied, read-only filesystem, no sandbox for model-written code), 5 the run is being
written by another process,
130 interrupted by Ctrl-C, 143 stopped by SIGTERM (both keep finished work; re-run to resume).
Docs: README.md (quick start), docs/deploy.md (recipes for your own servers), docs/ (the rest).
"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="PATH", help="config file (default: ./evalsuite.toml)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars; only results and errors")
    p.add_argument("-v", "--verbose", action="store_true", help="log retries and engine details")


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (`--limit 0` or `-2` would silently run 0 or n-2 samples)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def proportion(text: str) -> float:
    """argparse type: a number strictly between 0 and 1 (an equivalence margin as a proportion)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 0.02, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (0.02 = 2 points), got {text}")
    return value


def limit_arg(text: str) -> int | Literal["all"]:
    """argparse type for --limit: a positive number, or "all" to lift the config's `defaults.limit`."""
    return "all" if text.strip().lower() == "all" else positive_int(text)


def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data",
        choices=["hf", "local", "fixture"],
        help="dataset source: the pinned hub revision, a local file, or the bundled subset "
        "(default: defaults.data in the config)",
    )
    p.add_argument("--data-path", metavar="FILE", help="local JSONL/JSON/Parquet file for --data local")
    p.add_argument(
        "--limit",
        type=limit_arg,
        metavar="N",
        help="only the first N samples of each task (N >= 1; 'all': every sample; default: defaults.limit in the "
        "config, else all)",
    )
    p.add_argument("--max-tokens", type=positive_int, metavar="N", help="override the task's max_tokens")
    _sandbox_option(p)


def _sandbox_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sandbox",
        choices=["auto", "namespaces", "uid", "none"],
        help="isolation of model-written code: auto (the best this machine allows; refused where there is none), "
        "a level, or none to run it unisolated on purpose (default: defaults.sandbox in the config, else auto; "
        "`evalsuite sandbox` shows what this machine allows)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalsuite",
        description="Is speculative decoding lossless? Run the same greedy, seeded evals against a baseline "
        "and a speculative endpoint, diff them token by token, grade them, and compare.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"evalsuite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "run",
        help="generate (and grade) one target on tasks; resumable",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Ask TARGET for every sample of each task that is not stored yet, then grade.\n"
        "Re-running the same command after Ctrl-C or a crash resumes: nothing is asked twice.",
        epilog="examples:\n  evalsuite run baseline --task math500 --limit 50\n"
        "  evalsuite run my-vllm --task gsm8k --data local --data-path gsm8k_test.jsonl",
    )
    p.add_argument("target", help="a target name from the config")
    p.add_argument(
        "--task", action="append", metavar="NAME", help="task(s) to run (repeatable; default: defaults.tasks)"
    )
    p.add_argument("--no-grade", action="store_true", help="only generate; grade later with `evalsuite grade`")
    _data_options(p)
    _common(p)

    p = sub.add_parser(
        "eval",
        help="baseline + target (+ control) on tasks, then compare",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run TARGET's baseline, its control (if configured) and TARGET on the "
        "tasks, grade all of them, then compare and report.",
        epilog="examples:\n  evalsuite eval dflash\n  evalsuite eval draft --task gsm8k --limit 20",
    )
    p.add_argument("target")
    p.add_argument("--task", action="append", metavar="NAME", help="task(s) (repeatable; default: defaults.tasks)")
    p.add_argument(
        "--repeat-baseline",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the baseline twice: the repeat shows whether the engine is deterministic "
        "(default: defaults.repeat_baseline)",
    )
    p.add_argument("--no-report", action="store_true", help="print the verdicts only")
    p.add_argument(
        "--sampling",
        action="store_true",
        help="also test the output distribution at temperature > 0 (sample-test, settings from TARGET's or "
        "its baseline's [sampling] table) and fold its section into the report",
    )
    _data_options(p)
    _common(p)

    p = sub.add_parser(
        "compare",
        help="diff, statistics and verdict for two stored runs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Compare CANDIDATE with BASELINE from stored runs only. Runs that differ in "
        "anything that changes outputs (task, prompt, parameters, data, model) are refused, "
        "naming the fields. Exit 1 when the verdict is LOSSY or accuracy DIFFERENT.",
        epilog="examples:\n  evalsuite compare runs/draft/gsm8k/<id> runs/baseline/gsm8k/<id>\n"
        "  evalsuite compare CAND BASE --control runs/control/gsm8k/<id> --json verdict.json",
    )
    p.add_argument("candidate", metavar="CANDIDATE_RUN")
    p.add_argument("baseline", metavar="BASELINE_RUN")
    p.add_argument(
        "--control", metavar="RUN", help="the control: the speculative server with the target as its own drafter"
    )
    p.add_argument("--repeat", metavar="RUN", help="the baseline run a second time")
    p.add_argument("--determinism", dest="repeat", metavar="RUN", help=argparse.SUPPRESS)  # the old name of --repeat
    p.add_argument(
        "--delta",
        type=proportion,
        default=None,
        help="equivalence margin as a proportion, 0.02 = 2 points (default: the task spec's margin, else 0.02)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--allow", action="append", metavar="FIELD", help="waive a must-match field on purpose, e.g. server.model"
    )
    p.add_argument("--json", metavar="PATH", help="also write the versioned JSON summary here")
    p.add_argument("--no-report", action="store_true", help="print the verdict only")
    _common(p)

    p = sub.add_parser(
        "report",
        help="compare stored runs and write the Markdown and HTML reports",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Compare stored runs and write report.md, report.html and comparison.json to "
        "reports/<target>/<timestamp>/. Roles belong to the comparison, not to a run: name them with "
        "--baseline/--control/--repeat, or pass the folders `evalsuite eval` printed in any order "
        "and each is placed by its target's configured baseline and control (a repeat of the "
        "baseline is the repeat), for one task or several. Exit 1 when a verdict is "
        "LOSSY or DIFFERENT.",
        epilog="examples:\n  evalsuite report runs/baseline/gsm8k/<id> runs/control/gsm8k/<id> "
        "runs/dflash/gsm8k/<id>\n  evalsuite report runs/dflash/gsm8k/<id> --baseline "
        "runs/baseline/gsm8k/<id> --control runs/control/gsm8k/<id>",
    )
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run folders (any order): candidates, and any runs whose role "
        "follows from the candidates' configured baseline and control",
    )
    p.add_argument("--baseline", action="append", metavar="RUN", help="the baseline run (one per task)")
    p.add_argument("--control", action="append", metavar="RUN", help="the control run (one per task)")
    p.add_argument("--repeat", action="append", metavar="RUN", help="the baseline run a second time (one per task)")
    p.add_argument("--determinism", action="append", dest="repeat", help=argparse.SUPPRESS)  # the old name of --repeat
    p.add_argument("--allow", action="append", metavar="FIELD", help="waive a must-match field on purpose")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    _common(p)

    p = sub.add_parser(
        "grade",
        help="re-grade stored runs without asking the endpoint",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  evalsuite grade runs/baseline/math500/*",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders")
    p.add_argument("--workers", type=positive_int, help="grading processes (default: all cores)")
    _sandbox_option(p)
    _common(p)

    p = sub.add_parser(
        "sandbox",
        help="what isolation model-written code gets here, and what each level protects",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Build the sandbox the code tasks would use, as this user on this machine, and say what "
        "it protects. Exit 4 when the setting cannot be had here (the message says why and the ways out).",
        epilog="examples:\n  evalsuite sandbox\n  evalsuite sandbox --sandbox none --json",
    )
    _sandbox_option(p)
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    _common(p)

    p = sub.add_parser("runs", help="list stored runs")
    p.add_argument("--target", help="only this target")
    _common(p)

    p = sub.add_parser("targets", help="list the configured targets")
    _common(p)

    from evalsuite.cli.speed import add_parser as add_speed_parser

    add_speed_parser(sub, _common)

    from evalsuite.cli.leaderboard import add_parser as add_leaderboard_parser

    add_leaderboard_parser(sub, _common, _data_options)

    from evalsuite.cli.sample_test import add_parser as add_sample_test

    add_sample_test(sub)

    from evalsuite.cli.init import add_parser as add_init_parser

    add_init_parser(sub)

    p = sub.add_parser("rig", help="the reference llama-server rig (build, models, up, status)", add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def _without_httpx_cli() -> None:
    """Keep httpx from importing its own command-line client with it: where rich, click and pygments are
    installed, that was about an eighth of a command's start-up.  httpx then defines `httpx.main` as a stub
    that names what is missing; this program never calls it."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: "not importable"


def main(argv: Sequence[str] | None = None) -> int:
    """The `evalsuite` command; called with ARGV, it leaves the caller's process settings alone."""
    program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] == ["rig"]:
        from evalsuite.rig.command import main as rig_main

        return rig_main(argv[1:])
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    stopped: list[int] = []
    previous = _stop_on_signals(stopped)
    try:
        if program:
            one_blas_thread()  # before the commands import numpy
            _without_httpx_cli()
        logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
        from evalsuite.cli import commands

        handler = getattr(args, "handler", None) or getattr(commands, f"cmd_{args.command}")
        return handler(args)
    except KeyboardInterrupt:
        if stopped:
            print(
                "\nstopped (SIGTERM): finished samples are saved; re-run the same command to resume.", file=sys.stderr
            )
            return 128 + signal.SIGTERM
        print("\ninterrupted: finished samples are saved; re-run the same command to resume.", file=sys.stderr)
        return 130
    except EvalsuiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except INPUT_ERRORS as exc:
        code, message = input_error(exc)
        print(f"error: {message}", file=sys.stderr)
        return code
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stop_on_signals(stopped: list[int]) -> dict[signal.Signals, Any]:
    """Make Ctrl-C (SIGINT) and SIGTERM (a job scheduler, `docker stop`, `kill`) stop a command one way, whatever
    this process inherited: in-flight requests are cancelled, every finished sample is committed, the session is
    recorded, and the exit code is 130 or 143.

    SIGINT is given Python's own handler explicitly.  A process started with SIGINT ignored (what a shell does
    to a job it starts with `&` without job control: a script, a CI step, `make test &`) would keep it ignored,
    Python included, and `asyncio.run` then leaves it alone too: Ctrl-C and `kill -INT` would do nothing and
    the run would go on to its end.  With the handler in place, inside `asyncio.run` the signal cancels the main
    task (the run's own cleanup runs at an await, never in the middle of a commit), elsewhere it raises
    KeyboardInterrupt.  SIGTERM is recorded in `stopped` and handed to whatever handles SIGINT at that moment,
    so it takes the same path.  Returns the handlers replaced, to put back (none off the main thread, where
    signals cannot be handled).
    """

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        stopped.append(signum)
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:  # SIGINT set aside by the command itself: SIGTERM still stops it the same way
            raise KeyboardInterrupt

    previous: dict[signal.Signals, Any] = {}
    try:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread
        pass
    return previous
