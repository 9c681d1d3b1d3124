"""Start, health-check and stop the rig's llama-server configurations on loopback ports.

Each configuration is one real `llama-server` process with `--parallel 1`
(comparisons need one slot: batched verification kernels differ).  Servers are
stopped with SIGTERM, then SIGKILL, whatever happens in the `with` body
(exceptions and Ctrl-C included); on Linux they also die with the parent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from evalsuite.rig.assets import RigAssets, ensure_assets
from evalsuite.rig.errors import RigError

CONTEXT_SIZE = 4096
HEALTH_TIMEOUT_S = 120.0
STOP_GRACE_S = 10.0
BIND_FAILURE = "couldn't bind HTTP server socket"
BIND_RETRIES = 2
"""A free port can be taken between choosing it and the server binding it; then retry on a new one."""


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
            "draft", "draft-simple with a 1-block draft of the target (~90 % agreement)", "target", "draft",
            ("--spec-type", "draft-simple", "--spec-draft-n-max", "4"),
        ),
        RigConfig(
            "ngram", "ngram-simple: drafts from n-grams already in the context, no draft model", "target", None,
            ("--spec-type", "ngram-simple", "--spec-draft-n-max", "4"),
        ),
        RigConfig(
            "dflash", "draft-dflash with a one-block DFlash drafter fed by target layers 1 and 3", "target", "dflash",
            ("--spec-type", "draft-dflash", "--spec-draft-n-max", "4"),
        ),
        RigConfig("mtp-baseline", "the Qwen3.5-layout target with a NextN block, no speculation", "mtp",
                  compare_to=None),
        RigConfig(
            "mtp", "draft-mtp: the Qwen3.5-layout target drafting with its own NextN block", "mtp", None,
            ("--spec-type", "draft-mtp", "--spec-draft-n-max", "1"), compare_to="mtp-baseline",
        ),
        RigConfig(
            "control", "the target drafting for itself: a numerics control (should accept ~everything)",
            "target", "target", ("--spec-type", "draft-simple", "--spec-draft-n-max", "4"),
        ),
        RigConfig(
            "synthetic", "the DFlash drafter with --spec-synth-rates: drafts accepted at random, lossy by construction",
            "target", "dflash",
            ("--spec-type", "draft-dflash", "--spec-draft-n-max", "3", "--spec-synth-rates", "0.9,0.8,0.7"),
            lossless=False,
        ),
        RigConfig(
            "quant", "the target requantized to Q4_0, no speculation: lossy against the f32 baseline", "quant",
            lossless=False,
        ),
        RigConfig(
            "learned-baseline", "the model trained on the fixture problems, no speculation", "learned",
            compare_to=None,
        ),
        RigConfig(
            "learned-draft", "the trained model with its own Q4_0 copy as draft-simple drafter", "learned",
            "learned-draft", ("--spec-type", "draft-simple", "--spec-draft-n-max", "4"),
            compare_to="learned-baseline",
        ),
    )
}  # fmt: skip


@dataclass
class RunningServer:
    """A started, healthy server: what a client needs and what provenance records."""

    name: str
    base_url: str  # e.g. http://127.0.0.1:38113 (no /v1)
    model: str  # the served model name (--alias)
    args: list[str]  # the exact command line
    log_path: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def served_name(config: RigConfig, assets: RigAssets) -> str:
    """The model name a configuration serves: its weights file, so configurations over the same
    weights report the same model and compare, and a requantized target does not."""
    return Path(assets.models[config.model]).stem


def server_args(config: RigConfig, assets: RigAssets, port: int, threads: int) -> list[str]:
    """The full llama-server command line of one configuration."""
    args = [
        str(assets.binary),
        "--model", str(assets.models[config.model]),
        "--alias", served_name(config, assets),
        "--host", "127.0.0.1", "--port", str(port),
        "--parallel", "1", "--ctx-size", str(CONTEXT_SIZE),
        "--threads", str(threads), "--threads-batch", str(threads),
        "--seed", "42", "--no-webui", "--jinja",
    ]  # fmt: skip
    if config.draft is not None:
        args += ["--spec-draft-model", str(assets.models[config.draft]), "--spec-draft-threads", str(threads)]
    return args + list(config.spec_args)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    os.setsid()  # a Ctrl-C in the terminal reaches us, and we stop the server ourselves


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_server(process: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM, wait up to grace_s, then SIGKILL."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()


def _start(config: RigConfig, assets: RigAssets, log_dir: Path, threads: int) -> RunningServer:
    port = free_port()
    args = server_args(config, assets, port, threads)
    log_path = log_dir / f"{config.name}.log"
    with log_path.open("ab") as log:
        log.write(("\n$ " + " ".join(args) + "\n").encode())
        log.flush()
        process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
    return RunningServer(config.name, f"http://127.0.0.1:{port}", served_name(config, assets), args, log_path, process)


def wait_healthy(server: RunningServer, timeout_s: float = HEALTH_TIMEOUT_S) -> None:
    """Poll /health until 200; raise with the log's last lines if the process exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while True:
            code = server.process.poll()
            if code is not None:
                raise RigError(
                    f"llama-server for rig config '{server.name}' exited with code {code} before it was ready.\n"
                    f"Command: {' '.join(server.args)}\nLast lines of {server.log_path}:\n{_tail(server.log_path)}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if client.get(server.base_url + "/health").status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise RigError(
                    f"llama-server for rig config '{server.name}' was not healthy after {timeout_s:.0f} s.\n"
                    f"Last lines of {server.log_path}:\n{_tail(server.log_path)}"
                )
            time.sleep(0.2)


@contextlib.contextmanager
def serve(
    names: Sequence[str],
    *,
    log_dir: Path | None = None,
    threads: int | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
) -> Iterator[dict[str, RunningServer]]:
    """Start the named configurations (building the rig if needed), yield them by name, stop them all.

    Threads default to 2 for a single server and 1 each when several share
    the machine's cores.
    """
    unknown = [n for n in names if n not in RIG_CONFIGS]
    if unknown:
        raise RigError(f"Unknown rig configuration(s) {', '.join(unknown)}; known: {', '.join(RIG_CONFIGS)}.")
    if not names:
        raise RigError("serve() needs at least one rig configuration name.")
    assets = ensure_assets(progress, include_learned=any(RIG_CONFIGS[n].model.startswith("learned") for n in names))
    with serve_with_assets(names, assets, log_dir=log_dir, threads=threads, progress=progress) as running:
        yield running


@contextlib.contextmanager
def serve_with_assets(
    names: Sequence[str],
    assets: RigAssets,
    *,
    log_dir: Path | None = None,
    threads: int | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
) -> Iterator[dict[str, RunningServer]]:
    """`serve` over already-resolved assets (no build or generation step)."""
    log_dir = log_dir or assets.home / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    threads = threads or (2 if len(names) == 1 else 1)
    running: dict[str, RunningServer] = {}
    try:
        for name in dict.fromkeys(names):
            running[name] = _start(RIG_CONFIGS[name], assets, log_dir, threads)
        for name in list(running):
            for attempt in range(BIND_RETRIES + 1):
                try:
                    wait_healthy(running[name])
                    break
                except RigError:
                    lost_port = BIND_FAILURE in _tail(running[name].log_path, 5)
                    if not lost_port or attempt == BIND_RETRIES:
                        raise
                    stop_server(running[name].process)
                    running[name] = _start(RIG_CONFIGS[name], assets, log_dir, threads)
            progress(f"rig '{name}' is up at {running[name].base_url} (log: {running[name].log_path})")
        yield running
    finally:
        for server in running.values():
            stop_server(server.process)
