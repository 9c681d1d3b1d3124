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
from collections.abc import Callable, Iterator, Sequence

from evalsuite.rig.launcher import CONTEXT_SIZE, serve, with_args
from evalsuite.rig.vllm import VLLM_CONFIGS
from evalsuite.serve.process import RunningServer


def slot_args(slots: int) -> list[str]:
    """llama-server flags for `slots` slots, each with the rig's context."""
    return ["--parallel", str(slots), "--ctx-size", str(CONTEXT_SIZE * slots)]


def with_slots(args: Sequence[str], slots: int) -> list[str]:
    """The rig's command line with `--parallel slots` and the context multiplied to match."""
    return with_args(args, slot_args(slots))


@contextlib.contextmanager
def serve_slots(
    names: Sequence[str],
    slots: int,
    *,
    threads: int = 2,
    extra_args: Sequence[str] = (),
    progress: Callable[[str], None] = lambda _m: None,
) -> Iterator[dict[str, RunningServer]]:
    """The named rig configurations, llama-server ones with `slots` slots, all with `extra_args`; stopped on exit."""
    names = list(dict.fromkeys(names))
    llama = [n for n in names if n not in VLLM_CONFIGS]
    vllm = [n for n in names if n in VLLM_CONFIGS]  # vLLM batches concurrent requests as it is
    with contextlib.ExitStack() as stack:
        running: dict[str, RunningServer] = {}
        for group, args in ((llama, slot_args(slots) if slots > 1 else []), (vllm, [])):
            if group:
                running |= stack.enter_context(
                    serve(group, threads=threads, extra_args=[*args, *extra_args], progress=progress)
                )
        yield running
