"""What the CLI's commands share: messages, progress bars, run options and the task list from arguments.

Kept apart from the commands so any command module can use them without importing the others.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalsuite.config import Config, load_config
from evalsuite.workflow import RunOptions

if TYPE_CHECKING:
    from tqdm import tqdm


def say_for(args: argparse.Namespace) -> Callable[[str], None]:
    """A printer of progress messages to stderr, silent under --quiet."""

    def say(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr)

    return say


class _Bar:
    """A tqdm bar with rate and ETA, created on the first update."""

    def __init__(self, label: str):
        self.label = label
        self.bar: tqdm[Any] | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            interval = 0.1 if sys.stderr.isatty() else 30.0  # a log file gets a line every 30 s, not every sample
            self.bar = tqdm(
                total=total, desc=self.label, unit="sample", dynamic_ncols=True, file=sys.stderr, mininterval=interval
            )
        bar = self.bar
        bar.update(done - bar.n)
        if done >= total:
            bar.close()


def progress_for(args: argparse.Namespace) -> Callable[[str], Any] | None:
    """A maker of labelled progress bars, or None under --quiet."""
    return None if args.quiet else _Bar


def run_options(args: argparse.Namespace) -> RunOptions:
    """The data, limit, token and grading options shared by the commands that run a target."""
    return RunOptions(
        args.data,
        args.data_path,
        args.limit,
        args.max_tokens,
        grade=not getattr(args, "no_grade", False),
        sandbox=args.sandbox,
    )


def optional_config(args: argparse.Namespace) -> Config | None:
    """The config when one is named or present here; commands over stored runs also work without one."""
    return load_config(args.config) if args.config or Path("evalsuite.toml").exists() else None


def task_names(args: argparse.Namespace, config: Config) -> list[str]:
    """--task may repeat and may hold a comma list (as `make eval TASKS=a,b` passes it)."""
    names = [n.strip() for arg in (args.task or []) for n in arg.split(",") if n.strip()]
    return names or list(config.defaults.tasks)
