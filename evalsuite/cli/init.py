"""`evalsuite init [FOLDER]`: write a commented evalsuite.toml to start a project anywhere.

A pip-installed evalsuite has no checkout around it, so the first command
a user runs must give them a config: three targets for local llama-servers
(baseline, control, speculative), the built-in tasks, and every
option explained where it is set.  An existing file is never overwritten
without `--force`: it may hold the user's only copy of their targets.
"""

from __future__ import annotations

import argparse
from importlib.resources import files
from pathlib import Path

from evalsuite.errors import ConfigError

CONFIG_NAME = "evalsuite.toml"

DESCRIPTION = """\
Write a commented evalsuite.toml into FOLDER (default: the current folder).

It defines three targets served by llama-server on loopback, which is all
`evalsuite eval` needs:
  baseline     the target model alone               http://127.0.0.1:8080/v1
  control      the target drafting for itself       http://127.0.0.1:8081/v1
  speculative  the setup under test (DFlash, ...)    http://127.0.0.1:8082/v1
Edit the base_url lines to point at your servers (any OpenAI-compatible
server: llama.cpp, vLLM, SGLang), or give a target a [serve] command and
evalsuite starts and stops that server itself; the file explains both.

Tasks come with evalsuite (math500, gsm8k, livecodebench, humaneval, ...);
a tasks/NAME.yaml next to the config adds a task or overrides a built-in one.
Runs and reports are written next to the config (runs/, reports/)."""

EPILOG = """\
examples:
  evalsuite init                     write ./evalsuite.toml
  evalsuite init my-eval             create my-eval/ and write my-eval/evalsuite.toml
  evalsuite init --force             replace an existing evalsuite.toml

then:
  evalsuite targets                                    what the config defines
  evalsuite eval speculative --data fixture --limit 5  quick offline smoke test
  evalsuite eval speculative                           every task, full datasets"""


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `init` on the top-level subcommands."""
    p = sub.add_parser(
        "init",
        help="write a commented evalsuite.toml to start a project (local llama-server targets)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    p.add_argument("folder", nargs="?", default=".", metavar="FOLDER", help="where to write it (created if missing)")
    p.add_argument("--force", action="store_true", help=f"overwrite an existing {CONFIG_NAME}")
    p.set_defaults(handler=cmd_init, verbose=False, quiet=False)
    return p


def config_template() -> str:
    """The commented config `init` writes, shipped in the package next to this module."""
    return files("evalsuite.cli").joinpath("init_config.toml").read_text(encoding="utf-8")


def write_config(folder: Path, *, force: bool = False) -> Path:
    """Write the template as FOLDER/evalsuite.toml; refuse to replace an existing file unless forced."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} is a file, not a folder; give the folder the config should go into.")
    target = folder / CONFIG_NAME
    if target.is_dir():
        raise ConfigError(f"{target} is a folder; remove it or choose another FOLDER.")
    if target.exists() and not force:
        raise ConfigError(
            f"{target} already exists; evalsuite init does not overwrite it. "
            "Edit it, or pass --force to replace it with a fresh one."
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        target.write_text(config_template(), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"Could not write {target}: {exc.strerror or exc}.") from None
    return target


def cmd_init(args: argparse.Namespace) -> int:
    folder = Path(args.folder).expanduser()
    target = write_config(folder, force=args.force)
    steps = [f"Edit the base_url of baseline, control and speculative in {target} (or give them [serve] commands)."]
    if folder.resolve() != Path.cwd().resolve():
        steps.append(f"cd {folder}")
    steps += [
        "evalsuite targets                                    # what the config defines",
        "evalsuite eval speculative --data fixture --limit 5  # a quick offline check",
        "evalsuite eval speculative                           # every task, full datasets",
    ]
    print(f"Wrote {target}. Next:")
    for number, step in enumerate(steps, 1):
        print(f"  {number}. {step}")
    return 0
