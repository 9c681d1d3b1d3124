"""Rig servers with several slots, for the speed run's concurrency sweep.

The rig starts every configuration with `--parallel 1`, which comparisons of
outputs need (batched kernels change logits).  Speed under concurrency needs
the opposite: a server that batches several requests.  `serve_slots` starts
the same configurations through the rig's own command line with
`--parallel N` and N times the context, so each slot keeps the rig's
context; with N = 1 it is the rig's plain `serve`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence

from evalsuite.rig.assets import ensure_assets
from evalsuite.rig.launcher import (
    CONTEXT_SIZE,
    RIG_CONFIGS,
    RunningServer,
    free_port,
    serve,
    served_name,
    server_args,
    stop_server,
    wait_healthy,
)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    """The server gets SIGTERM if this process dies, even by SIGKILL (Linux), and its own session."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setsid()


def with_slots(args: list[str], slots: int) -> list[str]:
    """The rig's command line with `--parallel slots` and the context multiplied to match."""
    out = list(args)
    for flag, value in (("--parallel", slots), ("--ctx-size", CONTEXT_SIZE * slots)):
        out[out.index(flag) + 1] = str(value)
    return out


@contextlib.contextmanager
def serve_slots(names: Sequence[str], slots: int, *, threads: int = 2, extra_args: Sequence[str] = (),
                progress: Callable[[str], None] = lambda _m: None) -> Iterator[dict[str, str]]:  # fmt: skip
    """Base URLs of the named rig configurations, each with `slots` slots (and `extra_args`); all stopped on exit."""
    names = list(dict.fromkeys(names))
    if slots <= 1 and not extra_args:
        with serve(names, threads=threads, progress=progress) as running:
            yield {n: s.base_url for n, s in running.items()}
        return
    assets = ensure_assets(progress, include_learned=any(RIG_CONFIGS[n].model.startswith("learned") for n in names))
    log_dir = assets.home / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    running: list[RunningServer] = []
    try:
        for name in names:
            port = free_port()
            args = with_slots(server_args(RIG_CONFIGS[name], assets, port, threads), slots) + list(extra_args)
            log_path = log_dir / f"{name}-slots{slots}.log"
            with log_path.open("ab") as log:
                process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                           preexec_fn=_die_with_parent)  # fmt: skip
            server = RunningServer(name, f"http://127.0.0.1:{port}", served_name(RIG_CONFIGS[name], assets), args,
                                   log_path, process)  # fmt: skip
            running.append(server)
            wait_healthy(server)
            progress(f"rig '{name}' is up with {slots} slots at {server.base_url} (log: {log_path})")
        yield {s.name: s.base_url for s in running}
    finally:
        for server in running:
            stop_server(server.process)
