"""Rig servers with several slots, for the speed run's concurrency sweep.

The rig starts every configuration with `--parallel 1`, which comparisons of
outputs need (batched kernels change logits).  Speed under concurrency needs
the opposite: a server that batches several requests.  `serve_slots` starts
the same configurations as ordinary served commands with `--parallel N` and N
times the context, so each slot keeps the rig's context; with N = 1 and no
extra arguments it is the rig's plain `serve`.  vLLM configurations batch
concurrent requests as they are, so they are served unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence

from evalsuite.rig.assets import ensure_assets
from evalsuite.rig.errors import RigError
from evalsuite.rig.launcher import CONTEXT_SIZE, RIG_CONFIGS, rig_command, serve
from evalsuite.rig.vllm import VLLM_CONFIGS
from evalsuite.serve.process import ServeError, served


def with_slots(args: list[str], slots: int) -> list[str]:
    """The rig's command line with `--parallel slots` and the context multiplied to match."""
    out = list(args)
    for flag, value in (("--parallel", slots), ("--ctx-size", CONTEXT_SIZE * slots)):
        out[out.index(flag) + 1] = str(value)
    return out


@contextlib.contextmanager
def serve_slots(
    names: Sequence[str],
    slots: int,
    *,
    threads: int = 2,
    extra_args: Sequence[str] = (),
    progress: Callable[[str], None] = lambda _m: None,
) -> Iterator[dict[str, str]]:
    """Base URLs of the named rig configurations, each with `slots` slots (and `extra_args`); all stopped on exit."""
    names = list(dict.fromkeys(names))
    if all(n in VLLM_CONFIGS for n in names):
        if extra_args:
            raise RigError(f"Extra server arguments are for llama-server rig configurations, not {', '.join(names)}.")
        with serve(names, progress=progress) as running:  # vLLM batches concurrent requests as it is
            yield {n: s.base_url for n, s in running.items()}
        return
    if slots <= 1 and not extra_args:
        with serve(names, threads=threads, progress=progress) as running:
            yield {n: s.base_url for n, s in running.items()}
        return
    unknown = [n for n in names if n not in RIG_CONFIGS]
    if unknown:
        raise RigError(f"Unknown rig configuration(s) {', '.join(unknown)}; known: {', '.join(RIG_CONFIGS)}.")
    roles = {r for n in names for r in (RIG_CONFIGS[n].model, RIG_CONFIGS[n].draft) if r is not None}
    assets = ensure_assets(
        progress,
        include_learned=any(r.startswith("learned") for r in roles),
        include_smollm2=any(r.startswith("smollm2") for r in roles),
    )
    commands = []
    for name in names:
        base = rig_command(RIG_CONFIGS[name], assets, threads)
        argv = tuple(with_slots(list(base.argv), slots) + list(extra_args))
        commands.append(dataclasses.replace(base, name=f"{name}-slots{slots}", argv=argv))
    stack = contextlib.ExitStack()
    try:
        running = stack.enter_context(served(commands, assets.home / "logs"))
    except ServeError as exc:
        raise RigError(str(exc)) from None
    with stack:
        for server in running.values():
            progress(f"rig '{server.name}' is up at {server.base_url} (log: {server.log_path})")
        yield {name: running[f"{name}-slots{slots}"].base_url for name in names}
