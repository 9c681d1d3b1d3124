"""Start, health-check and stop the rig's llama-server configurations on loopback ports.

Each configuration is one real `llama-server` process with `--parallel 1`
(comparisons need one slot: batched verification kernels differ).  Servers are
stopped with SIGTERM, then SIGKILL, whatever happens in the `with` body
(exceptions and Ctrl-C included); on Linux they also die with the parent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from evalsuite.rig.assets import RigAssets, ensure_assets
from evalsuite.rig.errors import RigError, missing_models
from evalsuite.rig.smollm2 import SMOLLM2_DFLASH_DRAFTS, SMOLLM2_DFLASH_P_MIN, SMOLLM2_DFLASH_REBUILD
from evalsuite.serve.process import RunningServer, ServeError, ServerCommand, free_port, served, stop_server

__all__ = [
    "RIG_CONFIGS",
    "RigConfig",
    "RunningServer",
    "free_port",
    "rig_command",
    "serve",
    "serve_vllm",
    "serve_with_assets",
    "server_args",
    "stop_server",
    "with_args",
]

CONTEXT_SIZE = 4096
HEALTH_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class RigConfig:
    """One named server configuration of the rig.

    `model` and `draft` name roles of `RigAssets.models` (target, draft, quant,
    dflash, learned, learned-draft); `lossless` is what the suite must find.
    """

    name: str
    summary: str
    model: str
    draft: str | None = None
    spec_args: tuple[str, ...] = ()
    lossless: bool = True
    compare_to: str | None = "baseline"

    @property
    def speculative(self) -> bool:
        return bool(self.spec_args)


RIG_CONFIGS: dict[str, RigConfig] = {
    c.name: c
    for c in (
        RigConfig("baseline", "the constructed target, no speculation: the reference", "target", compare_to=None),
        RigConfig(
            "draft",
            "draft-simple with a 1-block draft of the target (~90 % agreement)",
            "target",
            "draft",
            ("--spec-type", "draft-simple", "--spec-draft-n-max", "4"),
        ),
        RigConfig(
            "ngram",
            "ngram-simple: drafts from n-grams already in the context, no draft model",
            "target",
            None,
            ("--spec-type", "ngram-simple", "--spec-draft-n-max", "4"),
        ),
        RigConfig(
            "dflash",
            "draft-dflash with a one-block DFlash drafter fed by target layers 1 and 3",
            "target",
            "dflash",
            ("--spec-type", "draft-dflash", "--spec-draft-n-max", "4"),
        ),
        RigConfig(
            "mtp-baseline", "the Qwen3.5-layout target with a NextN block, no speculation", "mtp", compare_to=None
        ),
        RigConfig(
            "mtp",
            "draft-mtp: the Qwen3.5-layout target drafting with its own NextN block",
            "mtp",
            None,
            ("--spec-type", "draft-mtp", "--spec-draft-n-max", "1"),
            compare_to="mtp-baseline",
        ),
        RigConfig(
            "control",
            "the target drafting for itself: the control (should accept ~everything)",
            "target",
            "target",
            ("--spec-type", "draft-simple", "--spec-draft-n-max", "4"),
        ),
        RigConfig(
            "synthetic",
            "the DFlash drafter with --spec-synth-rates: drafts accepted at random, lossy by construction",
            "target",
            "dflash",
            ("--spec-type", "draft-dflash", "--spec-draft-n-max", "3", "--spec-synth-rates", "0.9,0.8,0.7"),
            lossless=False,
        ),
        RigConfig(
            "quant",
            "the target requantized to Q4_0, no speculation: lossy against the f32 baseline",
            "quant",
            lossless=False,
        ),
        RigConfig(
            "learned-baseline",
            "the model trained on the fixture problems, no speculation",
            "learned",
            compare_to=None,
        ),
        RigConfig(
            "learned-draft",
            "the trained model with its own Q4_0 copy as draft-simple drafter",
            "learned",
            "learned-draft",
            ("--spec-type", "draft-simple", "--spec-draft-n-max", "4"),
            compare_to="learned-baseline",
        ),
        RigConfig(
            "learned-control",
            "the trained model drafting for itself: the control of learned-*",
            "learned",
            "learned",
            ("--spec-type", "draft-simple", "--spec-draft-n-max", "4"),
            compare_to="learned-baseline",
        ),
        RigConfig(
            "learned-ngram",
            "the trained model with ngram-simple drafts from its own context (3-gram lookup, 4-token drafts)",
            "learned",
            None,
            # ngram-simple ignores --spec-draft-n-max: it drafts its own m-gram (default 48 tokens after a
            # 12-token match, which sampled draws of a branching model never repeat); 3 and 4 make it draft.
            (
                "--spec-type",
                "ngram-simple",
                "--spec-draft-n-max",
                "4",
                "--spec-ngram-simple-size-n",
                "3",
                "--spec-ngram-simple-size-m",
                "4",
            ),
            compare_to="learned-baseline",
        ),
        RigConfig(
            "learned-dflash",
            "draft-dflash with a DFlash drafter trained against the learned model (accepts)",
            "learned",
            "learned-dflash",
            ("--spec-type", "draft-dflash", "--spec-draft-n-max", "4"),
            compare_to="learned-baseline",
        ),
        RigConfig(
            "smollm2-baseline",
            "SmolLM2-135M-Instruct (a real model, Q4_1), no speculation",
            "smollm2",
            compare_to=None,
        ),
        RigConfig(
            "smollm2-control",
            "SmolLM2 drafting for itself: the control of smollm2-*",
            "smollm2",
            "smollm2",
            ("--spec-type", "draft-simple", "--spec-draft-n-max", "4"),
            compare_to="smollm2-baseline",
        ),
        RigConfig(
            "smollm2-draft",
            "SmolLM2 with its own first layers as draft-simple drafter",
            "smollm2",
            "smollm2-draft",
            ("--spec-type", "draft-simple", "--spec-draft-n-max", "4"),
            compare_to="smollm2-baseline",
        ),
        RigConfig(
            "smollm2-dflash",
            "SmolLM2 with its DFlash drafter (trained on its answers to GSM8K train, written and MATH train problems)",
            "smollm2",
            "smollm2-dflash",
            (
                "--spec-type",
                "draft-dflash",
                "--spec-draft-n-max",
                str(SMOLLM2_DFLASH_DRAFTS),
                "--spec-draft-p-min",
                str(SMOLLM2_DFLASH_P_MIN),
            ),
            compare_to="smollm2-baseline",
        ),
        RigConfig(
            "smollm2-ngram",
            "SmolLM2 with ngram-simple drafts from its own context",
            "smollm2",
            None,
            ("--spec-type", "ngram-simple", "--spec-draft-n-max", "4"),
            compare_to="smollm2-baseline",
        ),
        RigConfig(
            "smollm2-synthetic",
            "SmolLM2 with --spec-synth-rates: drafts accepted at random, lossy by construction",
            "smollm2",
            "smollm2-draft",
            ("--spec-type", "draft-simple", "--spec-draft-n-max", "3", "--spec-synth-rates", "0.9,0.8,0.7"),
            lossless=False,
            compare_to="smollm2-baseline",
        ),
    )
}


def served_name(config: RigConfig, assets: RigAssets) -> str:
    """The model name a configuration serves: its weights file, so configurations over the same
    weights report the same model and compare, and a requantized target does not."""
    return Path(assets.models[config.model]).stem


def server_args(config: RigConfig, assets: RigAssets, port: int | str, threads: int) -> list[str]:
    """The full llama-server command line of one configuration (`port` may be the "{port}" placeholder)."""
    args = [
        str(assets.binary),
        "--model",
        str(assets.models[config.model]),
        "--alias",
        served_name(config, assets),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--parallel",
        "1",
        "--ctx-size",
        str(CONTEXT_SIZE),
        "--threads",
        str(threads),
        "--threads-batch",
        str(threads),
        "--seed",
        "42",
        "--no-webui",
        "--jinja",
        "--no-repack",  # no extra CPU buffer types: AMX kernels die with SIGILL where the OS denies AMX tiles
    ]
    if config.draft is not None:
        args += ["--spec-draft-model", str(assets.models[config.draft]), "--spec-draft-threads", str(threads)]
    return args + list(config.spec_args)


REBUILD = {"smollm2-dflash": SMOLLM2_DFLASH_REBUILD}
"""Model roles a checkout may lack -> the command that makes the file (docs/rig.md has the others)."""


def _is_flag(arg: str) -> bool:
    return arg.startswith("-") and not _NUMBER.match(arg)


_NUMBER = re.compile(r"^-\d")


def with_args(argv: Sequence[str], extra: Sequence[str]) -> list[str]:
    """`argv` with `extra`'s flags: a flag already there takes the new value, a new one is added at the end.

    The command line then says each setting once (as the run's provenance and fingerprint show it);
    a flag given twice would also work on llama-server, where the last one wins.
    """
    out = list(argv)
    i = 0
    while i < len(extra):
        flag = extra[i]
        value = extra[i + 1] if i + 1 < len(extra) and not _is_flag(extra[i + 1]) else None
        i += 1 if value is None else 2
        if flag in out and value is not None:
            at = out.index(flag)
            if at + 1 < len(out) and not _is_flag(out[at + 1]):
                out[at + 1] = value
                continue
        if flag not in out or value is not None:
            out += [flag] if value is None else [flag, value]
    return out


def rig_command(config: RigConfig, assets: RigAssets, threads: int, extra_args: Sequence[str] = ()) -> ServerCommand:
    """A rig configuration as an ordinary served command (`{port}` filled in at start), with `extra_args` merged
    in (`with_args`)."""
    missing = [r for r in (config.model, config.draft) if r is not None and r not in assets.models]
    if missing:
        raise missing_models(config.name, {role: REBUILD.get(role) for role in missing})
    argv = with_args(server_args(config, assets, "{port}", threads), extra_args)
    return ServerCommand(config.name, tuple(argv), startup_timeout_s=HEALTH_TIMEOUT_S)


@contextlib.contextmanager
def serve(
    names: Sequence[str],
    *,
    log_dir: Path | None = None,
    threads: int | None = None,
    extra_args: Sequence[str] = (),
    progress: Callable[[str], None] = lambda _msg: None,
) -> Iterator[dict[str, RunningServer]]:
    """Start the named configurations (building the rig if needed), yield them by name, stop them all.

    `extra_args` are server flags merged into every named configuration's command line (`with_args`).
    Threads default to 2 for a single server and 1 each when several share
    the machine's cores; `EVALSUITE_RIG_THREADS` overrides that (1 on a busy
    machine: llama.cpp's worker threads spin at barriers, and two of them on
    an oversubscribed 2-core host decode at a small fraction of the speed).
    """
    from evalsuite.rig.vllm import VLLM_CONFIGS

    unknown = [n for n in names if n not in RIG_CONFIGS and n not in VLLM_CONFIGS]
    if unknown:
        known = ", ".join([*RIG_CONFIGS, *VLLM_CONFIGS])
        raise RigError(f"Unknown rig configuration(s) {', '.join(unknown)}; known: {known}.")
    if not names:
        raise RigError("serve() needs at least one rig configuration name.")
    llama = [n for n in names if n in RIG_CONFIGS]
    vllm = [n for n in dict.fromkeys(names) if n in VLLM_CONFIGS]
    with contextlib.ExitStack() as stack:
        running: dict[str, RunningServer] = {}
        if vllm:
            running |= stack.enter_context(serve_vllm(vllm, log_dir=log_dir, extra_args=extra_args, progress=progress))
        if llama:
            roles = {r for n in llama for r in (RIG_CONFIGS[n].model, RIG_CONFIGS[n].draft) if r is not None}
            assets = ensure_assets(
                progress,
                include_learned=any(r.startswith("learned") for r in roles),
                include_smollm2=any(r.startswith("smollm2") for r in roles),
            )
            running |= stack.enter_context(
                serve_with_assets(
                    llama, assets, log_dir=log_dir, threads=threads, extra_args=extra_args, progress=progress
                )
            )
        yield running


@contextlib.contextmanager
def serve_vllm(
    names: Sequence[str],
    *,
    log_dir: Path | None = None,
    extra_args: Sequence[str] = (),
    progress: Callable[[str], None] = lambda _msg: None,
) -> Iterator[dict[str, RunningServer]]:
    """Start the named vLLM configurations (installing vLLM and converting SmolLM2 the first time)."""
    from evalsuite.rig.vllm import vllm_commands
    from evalsuite.rig.vllm.env import vllm_home

    commands = [
        dataclasses.replace(c, argv=tuple(with_args(c.argv, extra_args))) for c in vllm_commands(list(names), progress)
    ]
    progress(f"starting vLLM configuration(s) {', '.join(names)} (about 60-100 s each to load)")
    stack = contextlib.ExitStack()
    try:
        running = stack.enter_context(served(commands, log_dir or vllm_home() / "logs"))
    except ServeError as exc:
        raise RigError(str(exc)) from None
    with stack:
        for name, server in running.items():
            progress(f"rig '{name}' is up at {server.base_url} (log: {server.log_path})")
        yield running


@contextlib.contextmanager
def serve_with_assets(
    names: Sequence[str],
    assets: RigAssets,
    *,
    log_dir: Path | None = None,
    threads: int | None = None,
    extra_args: Sequence[str] = (),
    progress: Callable[[str], None] = lambda _msg: None,
) -> Iterator[dict[str, RunningServer]]:
    """`serve` over already-resolved assets (no build or generation step)."""
    log_dir = log_dir or assets.home / "logs"
    threads = threads or int(os.environ.get("EVALSUITE_RIG_THREADS") or 0) or (2 if len(names) == 1 else 1)
    commands = [rig_command(RIG_CONFIGS[name], assets, threads, extra_args) for name in dict.fromkeys(names)]
    stack = contextlib.ExitStack()
    try:
        running = stack.enter_context(served(commands, log_dir))
    except ServeError as exc:
        raise RigError(str(exc)) from None
    with stack:
        for name, server in running.items():
            progress(f"rig '{name}' is up at {server.base_url} (log: {server.log_path})")
        yield running
