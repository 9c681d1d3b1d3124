"""Targets with a `serve` table: check the command before anything runs, then serve it for a block.

A missing binary, model file or working folder is a `ConfigError` (exit 2)
naming the target, the key and the value, raised before any server starts or
any request is sent.  What counts as a model file is said in
`evalsuite.serve.files`; a hub id such as `Qwen/Qwen3-8B` is left to the server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from evalsuite.errors import ConfigError
from evalsuite.serve.files import model_paths
from evalsuite.serve.process import RunningServer, ServerCommand, served

if TYPE_CHECKING:
    from evalsuite.config import TargetConfig


def server_command(target: TargetConfig, root: Path) -> ServerCommand:
    """The target's `serve` table as a command; relative `cwd` is taken from the config's folder."""
    serve = target.serve
    if serve is None:
        raise ConfigError(f"Target '{target.name}' has no serve table.")
    cwd = (root / Path(serve.cwd).expanduser()) if serve.cwd else root
    return ServerCommand(
        target.name, tuple(serve.argv()), dict(serve.env), cwd, serve.health_path, serve.startup_timeout_s
    )


def check_command(command: ServerCommand, where: str) -> None:
    """Raise a ConfigError naming the first thing the command needs that is not there."""
    key = f"targets.{command.name}.serve"
    if command.cwd is not None and not command.cwd.is_dir():
        raise ConfigError(f"{where}: {key}.cwd = '{command.cwd}' is not a folder.")
    if not any("{port}" in a for a in command.argv):
        raise ConfigError(
            f"{where}: {key}.command has no {{port}} placeholder; the suite picks a free port and "
            f"passes it there (e.g. --port {{port}})."
        )
    program = command.argv[0]
    path_env = command.env.get("PATH", os.environ.get("PATH", ""))
    if "/" in program:
        exe = (command.cwd or Path.cwd()) / Path(program).expanduser()
        if not exe.is_file() or not os.access(exe, os.X_OK):
            raise ConfigError(f"{where}: {key}.command runs '{program}', which is not an executable file ({exe}).")
    elif shutil.which(program, path=path_env) is None:
        raise ConfigError(
            f"{where}: {key}.command runs '{program}', which is not on PATH; install it or give its full path."
        )
    for value in model_paths(command.argv):
        path = (command.cwd or Path.cwd()) / Path(value).expanduser()
        if not path.exists():
            raise ConfigError(f"{where}: {key}.command names the model file '{value}', which does not exist ({path}).")


def preflight(target: TargetConfig, root: Path, where: str) -> None:
    """Check a serve target's command (no-op for other targets)."""
    if target.serve is not None:
        check_command(server_command(target, root), where)


@contextlib.contextmanager
def serve_target(
    target: TargetConfig, root: Path, log_dir: Path, say: Callable[[str], None]
) -> Iterator[RunningServer]:
    """Start the target's server, wait for health, yield it, stop it (also on errors and Ctrl-C)."""
    command = server_command(target, root)
    check_command(command, str(root / "evalsuite.toml"))
    say(f"starting '{target.name}': {' '.join(command.argv)} (log: {log_dir / (target.name + '.log')})")
    with served([command], log_dir) as running:
        yield running[target.name]


def default_log_dir() -> Path:
    """Where served targets' logs go: `<cache>/logs` (the cache folder the rig uses)."""
    from evalsuite.rig.build import cache_root

    return cache_root() / "logs"
